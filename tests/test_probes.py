"""Probe scoring: the reference agent run through the runner under every probe, and the probe table."""

from __future__ import annotations

import pytest

from cpdagthink.analysis.probes import probe_table
from cpdagthink.backends.reference import ReferenceBackend
from cpdagthink.method.conditions import CONDITIONS
from cpdagthink.method.interventions import PROBES
from cpdagthink.run.data import read_csv, sample
from cpdagthink.run.runner import run_config
from conftest import configured


@pytest.fixture(scope="module")
def probe_runs(test_csv, tmp_path_factory):
    items = sample(read_csv(test_csv), 15, seed=0)
    root = tmp_path_factory.mktemp("probes")
    condition = CONDITIONS["structured"]
    base = run_config(configured(condition.name, cache_dir=root / "cache"),
                      ReferenceBackend(), items, root / "base", progress=False)
    runs = {
        name: run_config(configured(condition.name, cache_dir=root / "cache", probe=name),
                         ReferenceBackend(), items, root / name, progress=False).records
        for name, probe in PROBES.items()
    }
    return items, base.records, runs


def test_reference_agent_reads_the_graph_it_is_shown(probe_runs):
    items, base, runs = probe_runs
    by_id = {i.id: i for i in items}
    assert sum(r.oracle_label for r in base) >= 1
    for name, records in runs.items():
        assert len(records) == len(items)
        for record in records:
            shown = record.intervention.analysis
            verdict = shown.answer(by_id[record.id].hypothesis)
            assert record.prediction == int(verdict.holds), name
            assert record.intervention.note


def test_probe_table_drop_premise_is_free_and_scrambling_hurts(probe_runs):
    _, base, runs = probe_runs
    table = probe_table(base, runs)
    assert list(table.index) == list(PROBES)
    assert (table["n"] == 15).all()
    assert table.loc["drop_premise", "drop_gold_pp"] == 0 and table.loc["drop_premise", "drop_oracle_pp"] == 0
    assert table.loc["drop_premise", "flipped_share"] == 0 and table.loc["drop_premise", "intervened_share"] == 1
    assert table.loc["scramble_full", "base_f1_oracle"] == 100
    assert table.loc["scramble_full", "drop_oracle_pp"] > 0 and table.loc["scramble_full", "flipped_share"] > 0
    assert table.loc["swap_valid_cpdag", "intervened_share"] == 1


def test_reference_agent_errors_under_probes_are_all_graph_errors(probe_runs):
    from cpdagthink.analysis.failures import FailureKind, classify, failure_counts

    items, base, runs = probe_runs
    by_id = {i.id: i for i in items}
    assert all(classify(r, by_id[r.id]) is None for r in base)
    kinds = {classify(r, by_id[r.id]) for records in runs.values() for r in records}
    assert kinds <= {None, FailureKind.WRONG_GRAPH} and FailureKind.WRONG_GRAPH in kinds
    counts = failure_counts(runs, items)
    assert counts.loc["scramble_full", "wrong_graph"] == counts.loc["scramble_full", "errors"] > 0
