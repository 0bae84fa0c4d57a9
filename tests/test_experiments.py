"""Notebook-facing helpers: setups, run folders, banners, generated OOD stand-ins."""

from __future__ import annotations

import pytest

from cpdagthink import experiments as ex


@pytest.fixture()
def setup(test_csv, tmp_path, monkeypatch):
    monkeypatch.setenv("CORR2CAUSE_CSV", str(test_csv))
    return ex.setup_from_parameters({"backend": "reference", "limit": 20, "out_root": str(tmp_path / "runs"),
                                     "cache_dir": str(tmp_path / "cache"), "unrelated_global": 1})


def test_banner_counts_with_the_right_nouns(setup):
    instances = setup.instances()
    positives = sum(i.label for i in instances)
    text = ex.banner(setup, instances, [0, 1])
    assert "sample of 20 instances" in text and f"({positives} gold positives)" in text and "2 seeds [0, 1]" in text
    assert "1 seed [0]" in ex.banner(setup, instances, [0])


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


def test_sample_variables_restricts_the_sample_not_the_whole_split(setup):
    five = ex.updated(setup, sample_variables=(5,))
    assert {i.num_variables for i in five.instances()} == {5} and len(five.instances()) == 20
    assert sum(i.label for i in five.instances()) >= 1  # still label-stratified
    assert len(ex.updated(five, limit=0).instances()) == 1162
    with pytest.raises(ValueError, match="no row has"):
        ex.updated(setup, sample_variables=(9,)).instances()
    assert "drawn from rows with 5 variables" in ex.banner(five, five.instances(), [0])
    assert ex.setup_from_parameters({"backend": "reference", "sample_variables": "[5, 6]"}).sample_variables == (5, 6)
