"""Notebook-facing helpers: setups, run folders, banners, generated OOD stand-ins."""

from __future__ import annotations

import pytest

from cpdagthink.book import experiments as ex
from cpdagthink.run.runfolder import completeness
from cpdagthink.run.together import Planned


@pytest.fixture()
def setup(test_csv, tmp_path, monkeypatch):
    monkeypatch.setenv("CORR2CAUSE_CSV", str(test_csv))
    return ex.setup_from_parameters({"backend": "reference", "limit": 20, "out_root": str(tmp_path / "runs"),
                                     "cache_dir": str(tmp_path / "cache"), "unrelated_global": 1})


def test_banner_counts_with_the_right_nouns(setup):
    instances = setup.instances()
    positives = sum(i.label for i in instances)
    text = str(ex.banner(setup, instances, [0, 1]))
    assert "sample of 20 instances" in text and "2 seeds (0, 1)" in text
    assert f"({positives} gold positives and {20 - positives} negatives" in text
    assert "1 seed (0)" in str(ex.banner(setup, instances, [0]))


def test_the_banner_and_the_configuration_print_no_python_value(setup):
    """Prose reads as prose: a list of seeds or of variable counts is written out, never as Python shows it."""
    instances = setup.instances()
    sampled = ex.updated(setup, sample_variables=[5, 6])
    record = ex.configuration(sampled, instances, [0, 1])
    assert record["sample"] == "limit 20, seed 0, variables 5, 6, at least 1 positives"
    assert ex.configuration(setup, instances, [0])["sample"] == "limit 20, seed 0, variables any, at least 1 positives"
    for text in (str(ex.banner(sampled, instances, [0, 1, 2])), record["sample"]):
        assert not any(mark in text for mark in ("[", "]", "None", "True", "False")), text


def test_banner_names_the_resolved_model_budgets_and_runs_and_puts_the_verdict_first(setup):
    instances = setup.instances()
    banner = ex.banner(setup, instances, [0], conditions=["structured", "baseline_enhanced"], probes=["scramble_full"],
                       verdict="This build cannot test the paper's claim: X.", command="cpdagthink book --only 01")
    text = str(banner)
    assert text.startswith("Verdict. This build cannot test the paper's claim")
    assert banner.source().startswith("**Verdict\\.** This build") and "Probes\\: full scramble\\." in banner.source()
    assert banner.source().endswith("Reproduce this page\\: `cpdagthink book --only 01`")
    assert "model the symbolic reference agent" in text and "default" not in text
    # the reference agent computes its answers: no budgets or decoding are named for it
    assert "no token budgets or decoding (the reference agent computes its answers)" in text
    assert "token budgets" not in text.replace("no token budgets", "") and "greedy" not in text
    llm = ex.updated(setup, backend="openai", model="m", backend_options={"base_url": "http://127.0.0.1:9/v1"})
    assert "token budgets 512 for turn 1 and 128 for the answer (640 for one-turn conditions)" in \
        str(ex.banner(llm, instances, [0]))
    whole = str(ex.banner(ex.updated(setup, limit=0), instances, [0]))
    assert "the whole split, 20 instances" in whole and "sample of" not in whole
    assert "Conditions: Structured Thinking, BaselineEnhanced." in text and "Probes: full scramble." in text
    assert text.endswith("Reproduce this page: cpdagthink book --only 01")
    local = ex.updated(setup, backend="local", model=None)
    assert ex.model_name(local) == "Qwen2.5-Coder-0.5B-Instruct (GGUF)"
    assert ex.model_name(ex.updated(setup, backend="local", model="/m/own.gguf")) == "own.gguf"


def test_run_folders_separate_samples_and_probes(setup):
    a = setup.instances()
    b = ex.updated(setup, limit=10).instances()
    assert setup.for_run(seed=0).folder(a) != setup.for_run(seed=0).folder(b)
    assert setup.for_run(seed=0, probe="drop_premise").folder(a).name.endswith("probe-drop_premise")
    budget = ex.updated(setup, decoding={"max_tokens_turn1": 64})
    assert budget.for_run(seed=0).folder(a) != setup.for_run(seed=0).folder(a)
    records = ex.run(setup.for_run("structured", 0, "drop_premise"), a, progress=False)
    assert all(r.intervention.name == "drop_premise" and not r.intervention.include_premise for r in records)
    folder = setup.for_run("structured", 0, "drop_premise").folder(a)
    assert (folder / "config.json").is_file() and (folder / "summary.json").is_file()


def test_generated_ood_stand_ins_are_named_as_generated(setup):
    rows = ex.updated(setup, split="generated:paraphrase", limit=0).all_instances()
    assert len(rows) == 1162 and all(r.source.startswith("generated:paraphrase") for r in rows)
    assert rows[0].split == "generated:paraphrase"


def test_sample_variables_restricts_the_sample_not_the_whole_split(setup):
    five = ex.updated(setup, sample_variables=(5,))
    assert {i.num_variables for i in five.instances()} == {5} and len(five.instances()) == 20
    assert sum(i.label for i in five.instances()) >= 1  # still label-stratified
    assert len(ex.updated(five, limit=0).instances()) == 1162
    with pytest.raises(ValueError, match="no row has"):
        ex.updated(setup, sample_variables=(9,)).instances()
    assert "drawn from rows with 5 variables" in str(ex.banner(five, five.instances(), [0]))
    both = ex.updated(setup, sample_variables=(6, 5))
    assert "drawn from rows with 5 and 6 variables, an equal share each" in str(ex.banner(both, both.instances(), [0]))
    assert [i.num_variables for i in both.instances()].count(5) == 10  # half of the 20 rows each
    assert ex.setup_from_parameters({"backend": "reference", "sample_variables": "[5, 6]"}).sample_variables == (5, 6)


def _refuse_backends(monkeypatch):
    def refuse(name, **options):
        raise AssertionError(f"a backend was built: {name}")

    monkeypatch.setattr(ex, "make_backend", refuse)
    ex._backend.cache_clear()


def test_a_complete_run_is_read_from_its_folder_without_a_backend(setup, monkeypatch):
    instances = setup.instances()
    made = ex.run(setup.for_run("structured", 0), instances, progress=False)
    folder = setup.for_run("structured", 0).folder(instances)
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    _refuse_backends(monkeypatch)
    assert ex.run(setup.for_run("structured", 0), instances, progress=False) == made
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before  # metadata and summary not rewritten
    assert ex.thinking_supported(setup, "structured", 0, instances) is False  # read from metadata.json
    with pytest.raises(AssertionError, match="a backend was built: reference"):  # missing records: computed
        ex.run(setup.for_run("baseline_enhanced", 0), instances, progress=False)


def test_render_only_refuses_a_run_not_yet_computed_naming_its_folder(setup, monkeypatch):
    instances = setup.instances()
    folder = setup.for_run("structured", 0).folder(instances)
    make_backend = ex.make_backend
    _refuse_backends(monkeypatch)
    monkeypatch.setenv(ex.ENV_RENDER_ONLY, "1")
    with pytest.raises(ex.RenderOnlyError) as raised:
        ex.run(setup.for_run("structured", 0), instances, progress=False)
    message = str(raised.value)
    assert "\n" not in message and message.startswith(f"{folder} does not hold this run yet (no run folder)")
    assert "make grid" in message and "cpdagthink plan" in message and "without --render-only" in message
    assert not folder.exists()
    with pytest.raises(ex.RenderOnlyError, match="no backend is built here"):
        ex.backend_of(setup)
    monkeypatch.delenv(ex.ENV_RENDER_ONLY)
    monkeypatch.setattr(ex, "make_backend", make_backend)  # computed where backends may be built, it renders
    made = ex.run(setup.for_run("structured", 0), instances, progress=False)
    monkeypatch.setenv(ex.ENV_RENDER_ONLY, "1")
    _refuse_backends(monkeypatch)
    assert ex.run(setup.for_run("structured", 0), instances, progress=False) == made


def test_the_banner_lists_conditions_whose_names_hold_no_comma(setup):
    """Chapter 03's banner read "BaselineEnhanced, BaselineEnhanced, no thinking": a name with a comma in a
    comma-separated list reads as two conditions."""
    from cpdagthink.book import presentation
    from cpdagthink.method.conditions import CONDITIONS

    assert [c for c in CONDITIONS if "," in presentation.label(c)] == []
    text = str(ex.banner(setup, setup.instances(), [0], conditions=["baseline_enhanced", "baseline_no_thinking"]))
    assert "Conditions: BaselineEnhanced, BaselineEnhanced without thinking." in text


def test_a_run_left_with_instances_unanswered_stops_its_chapter_and_reads_as_incomplete(test_csv, tmp_path):
    from loopback_api import Faults, LoopbackAPI, key_of, key_of_instance

    from cpdagthink.run.config import RunParameters

    def config_on(url):
        return RunParameters(backend="openai", model="gpt-4.1-mini", data=str(test_csv), limit=4,
                             backend_options={"base_url": url, "retries": 0, "timeout": 5},
                             out_root=str(tmp_path / "runs"), cache_dir=str(tmp_path / "cache")
                             ).to_config().for_run("baseline_enhanced")

    instances = config_on("http://127.0.0.1:9/v1").instances()
    failing = key_of_instance(instances[2], "baseline_enhanced")
    with LoopbackAPI(faults=Faults(pick=lambda body: "500" if key_of(body) == failing else None, times=2)) as server:
        config = config_on(server.url)
        with pytest.raises(ex.RunIncompleteError, match="finished with 1 instance not answered"):
            ex.run(config, instances, progress=False)
        held = completeness(config.folder(instances), config, instances)
        assert not held.complete and "status 'incomplete': finished with 1 instance not answered" in held.missing
        with pytest.raises(ex.RunIncompleteError, match="finished with 1 instance not answered"):  # a plan's way
            ex.compute([Planned(config, instances)], progress=False)
        records = ex.run(config, instances, progress=False)  # the server answers it this time
    assert [r.id for r in records] == [i.id for i in instances]
    assert sum(s.instance == failing for s in server.log) == 3  # asked again each time, and only it


def test_computing_a_plan_makes_its_runs_and_holds_none_of_their_records(setup, monkeypatch):
    instances = setup.instances()
    planned = [Planned(setup.for_run(condition, 0), instances) for condition in ("structured", "baseline_enhanced")]
    assert ex.compute(planned, progress=False) is None
    _refuse_backends(monkeypatch)  # complete: read as they are, and a second compute makes nothing
    ex.compute(planned, progress=False)
    assert [len(ex.run(p.config, instances, progress=False)) for p in planned] == [len(instances)] * 2
    held = completeness(planned[0].config.folder(instances), planned[0].config, instances, records=False)
    assert held.complete and held.records == []
