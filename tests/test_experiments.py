"""Notebook-facing helpers: setups, run folders, tables, generated OOD stand-ins."""

from __future__ import annotations

import pytest

from analyses import run_record
from cpdagthink import experiments as ex
from cpdagthink.records import TurnRecord


@pytest.fixture()
def setup(test_csv, tmp_path, monkeypatch):
    monkeypatch.setenv("CORR2CAUSE_CSV", str(test_csv))
    return ex.setup_from_parameters({"backend": "reference", "limit": 20, "out_root": str(tmp_path / "runs"),
                                     "cache_dir": str(tmp_path / "cache"), "unrelated_global": 1})


def test_grid_tables_and_paper_values(setup):
    instances = setup.instances()
    runs = ex.run_grid(setup, ["structured", "baseline_enhanced"], [0, 1], instances)
    scores = ex.scores_frame(runs)
    assert set(scores["labels"]) == {"gold", "corrected"} and len(scores) == 8
    corrected = scores[scores["labels"] == "corrected"]
    assert (corrected["F1"] == 100).all()  # the reference agent is the oracle
    seeds = ex.seed_frame(scores)
    assert list(seeds["seeds"]) == [2, 2] and (seeds["F1 sd"] == 0).all()
    paired = ex.paired_frame(runs, "structured", ["baseline_enhanced"], n_resamples=200)
    assert len(paired) == 2 and (paired["gain (pp)"] == 0).all() and (paired["McNemar p"] == 1).all()
    cost = ex.cost_frame(runs)
    assert set(cost["condition"]) == {"structured", "baseline_enhanced"}
    assert ex.paper(["main_f1_structured"])["value"].item() == 86.36
    assert "sample of 20 instances" in ex.banner(setup, instances, [0, 1])


def test_run_folders_separate_samples_and_probes(setup):
    a = setup.instances()
    b = ex.updated(setup, limit=10).instances()
    assert setup.for_run(seed=0).folder(a) != setup.for_run(seed=0).folder(b)
    assert setup.for_run(seed=0, probe="drop_premise").folder(a).name.endswith("probe-drop_premise")
    budget = ex.updated(setup, decoding={"max_tokens_turn1": 64})
    assert budget.for_run(seed=0).folder(a) != setup.for_run(seed=0).folder(a)
    records = ex.run(setup, "structured", 0, a, probe="drop_premise", progress=False)
    assert all(r.intervention.name == "drop_premise" and not r.intervention.include_premise for r in records)
    folder = setup.for_run("structured", 0, "drop_premise").folder(a)
    assert (folder / "config.json").is_file() and (folder / "summary.json").is_file()


def test_generated_ood_stand_ins_are_named_as_generated(setup):
    rows = ex.updated(setup, split="generated:paraphrase", limit=0).all_instances()
    assert len(rows) == 1162 and all(r.source.startswith("generated:paraphrase") for r in rows)
    assert rows[0].split == "generated:paraphrase"


def test_by_variables_omits_thin_bins(setup):
    runs = ex.run_grid(setup, ["structured"], [0])
    frame, omitted = ex.by_variables_frame(runs, min_positives=3)
    assert all("fewer than min_positives=3" in o for o in omitted) and omitted
    bins = ex.bins_frame(runs)
    assert bins["n"].sum() == 20 and set(bins["num_variables"]) == {r.num_variables for r in runs[("structured", 0)]}
    assert bins["positives"].sum() == sum(r.gold_label for r in runs[("structured", 0)])
    correct = sum(r.prediction == r.gold_label for r in runs[("structured", 0)])
    assert (bins["accuracy"] * bins["n"]).sum() / 100 == pytest.approx(correct)


def test_cut_off_counts_turns_that_hit_the_budget():
    turn = lambda reason: TurnRecord(messages_sha256="", request_sha256="", finish_reason=reason)
    ended = run_record(answer="NO", gold_label=1, oracle_label=1, turns=[turn("stop"), turn("stop")])
    cut = run_record(answer=None, gold_label=1, oracle_label=1, turns=[turn("length"), turn("stop")])
    assert not ended.cut_off and cut.cut_off and cut.unparsed and cut.prediction is None
    scores = ex.scores_frame({("baseline_enhanced", 0): [cut, ended]})
    assert set(scores["cut off"]) == {1} and set(scores["unparsed"]) == {1}


def test_sample_variables_restricts_the_sample_not_the_whole_split(setup):
    five = ex.updated(setup, sample_variables=(5,))
    assert {i.num_variables for i in five.instances()} == {5} and len(five.instances()) == 20
    assert sum(i.label for i in five.instances()) >= 1  # still label-stratified
    assert len(ex.updated(five, limit=0).instances()) == 1162
    with pytest.raises(ValueError, match="no row has"):
        ex.updated(setup, sample_variables=(9,)).instances()
    assert "drawn from rows with 5 variables" in ex.banner(five, five.instances(), [0])
    assert ex.setup_from_parameters({"backend": "reference", "sample_variables": "[5, 6]"}).sample_variables == (5, 6)
