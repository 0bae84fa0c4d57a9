"""The calls a run still makes, counted as the runner makes them, before it runs."""

from __future__ import annotations

from cpdagthink.backends.reference import ReferenceBackend
from cpdagthink.method.conditions import get_condition
from cpdagthink.run.config import RunSet
from cpdagthink.run.estimate import earlier_runs, measured, pending
from cpdagthink.run.runner import pose, run_config


def setup(test_csv, tmp_path, condition: str) -> RunSet:
    return RunSet(condition=condition, backend="reference", data=str(test_csv), limit=5,
                  out_root=str(tmp_path / "runs"), cache_dir=str(tmp_path / "cache"))


def test_one_call_per_posed_row_of_a_one_turn_condition_two_of_a_two_turn_one(test_csv, tmp_path):
    for condition, turns in (("baseline_enhanced", 1), ("structured", 2)):
        config = setup(test_csv, tmp_path, condition).for_run()
        instances = config.instances()
        p = pending(config, instances, config.folder(instances))
        assert (p.calls, p.done, p.cached) == (turns * len(instances), 0, 0)
        assert p.ceiling == len(instances) * (config.decoding.one_turn_budget if turns == 1 else
                                              config.decoding.max_tokens_turn1 + config.decoding.max_tokens_answer)


def test_a_row_no_dag_satisfies_makes_no_call(test_csv, tmp_path):
    config = setup(test_csv, tmp_path, "baseline_enhanced").for_run()
    row = config.instances()[0]
    unfaithful = row.model_copy(update={"id": "u", "premise": (  # A-B correlated, yet separated given C
        "Premise: Suppose there is a closed system of 3 variables, A, B and C. All the statistical relations among "
        "these 3 variables are as follows: A correlates with B. A correlates with C. B correlates with C. However, "
        "A and C are independent given B. A and B are independent given C.")})
    assert isinstance(pose(get_condition(config.condition), unfaithful, config.decoding), str)  # why, not a request
    assert pending(config, [unfaithful], tmp_path / "none").calls == 0


def test_what_the_folder_and_the_cache_hold_is_subtracted(test_csv, tmp_path):
    config = setup(test_csv, tmp_path, "structured").for_run()
    instances = config.instances()
    run_config(config, ReferenceBackend(), instances[:3], config.folder(instances), progress=False)
    p = pending(config, instances, config.folder(instances))
    assert (p.done, p.calls, p.cached) == (3, 2 * (len(instances) - 3), 0)
    elsewhere = pending(config, instances, tmp_path / "a-new-folder")  # its calls are cached all the same
    assert (elsewhere.done, elsewhere.cached, elsewhere.calls) == (0, 6, 2 * (len(instances) - 3))
    seen: set[str] = set()
    pending(config, instances, tmp_path / "one", planned=seen)
    later = pending(config, instances, tmp_path / "two", planned=seen)
    # the turns 1 a run planned before sends are cached by then; a turn 2 built on an answer not yet known is
    # counted as a call (the count is an upper bound there)
    assert later.calls_by_turn == [0, len(instances) - 3] and later.cached == 6 + len(instances) - 3


def test_earlier_runs_of_the_model_give_means_per_turn(test_csv, tmp_path):
    config = setup(test_csv, tmp_path, "structured").for_run()
    instances = config.instances()
    run_config(config, ReferenceBackend(), instances, config.folder(instances), progress=False)
    earlier = earlier_runs(config)
    assert [f.name for f, _ in earlier] == [config.folder(instances).name]
    found = measured(config, earlier)
    assert found.folders == (config.folder(instances).name,) and found.latency_s is not None
    other = setup(test_csv, tmp_path, "baseline_enhanced").for_run()
    assert measured(other, earlier_runs(other)).folders == ()  # another condition measures nothing here
