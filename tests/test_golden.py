"""Golden numbers: the reference agent on the whole test split gives exactly the tables it gave before the
typed-record / run-configuration rebuild (``tests/golden/reference_full_split.json`` was computed with the
code of commit 6fdd9f1). A refactor of the wiring must not move any number."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from cpdagthink.analysis import audit, failures, tables
from cpdagthink.analysis.probes import probe_table
from cpdagthink.book import experiments as ex
from cpdagthink.causal.oracle import analyse_premise
from cpdagthink.method.schema import CausalAnalysis

GOLDEN = Path(__file__).parent / "golden" / "reference_full_split.json"
CONDITIONS = ["baseline_enhanced", "structured", "twoturn_prose_pc", "singleturn_structured",
              "minimal_instruction", "no_thinking", "no_constrained_decoding"]
PROBE_NAMES = ["scramble_full", "scramble_skeleton", "scramble_v_structures", "scramble_directed", "drop_premise"]


def _records(frame: pd.DataFrame) -> list[dict]:
    return json.loads(json.dumps(frame.to_dict(orient="records"), sort_keys=True, default=str))


@pytest.fixture(scope="module")
def now(test_csv, tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("golden")
    setup = ex.setup_from_parameters({"backend": "reference", "limit": 0, "data": None,
                                      "out_root": str(root / "runs"), "cache_dir": str(root / "cache")})
    instances = setup.instances()
    runs = ex.run_grid(setup, CONDITIONS, [0], instances)
    scores = tables.scores_frame(runs)
    assert not scores["published only"].any()  # the oracle labels every row of the test split
    scores = scores.drop(columns=["cut off", "published only"])
    paired = tables.paired_frame(runs, "structured", [c for c in CONDITIONS if c != "structured"], n_resamples=2000)
    by_variables, omitted = tables.by_variables_frame(runs)
    probed = {p: ex.run(setup, "structured", 0, instances, probe=p, progress=False) for p in PROBE_NAMES}
    probes = probe_table(runs[("structured", 0)], probed).reset_index()
    by_id = {i.id: i for i in instances}
    audited = audit.audit_records(runs[("structured", 0)],
                                  lambda rid: CausalAnalysis.from_cpdag(analyse_premise(by_id[rid].premise).cpdag))
    counts = failures.failure_counts({**{c: runs[(c, 0)] for c in CONDITIONS}, **probed}, instances).reset_index()
    return {"scores": _records(scores), "paired": _records(paired), "by_variables": _records(by_variables),
            "omitted": omitted, "probes": _records(probes), "failure_counts": _records(counts),
            "audit_summary": json.loads(json.dumps(audit.audit_summary(audited), sort_keys=True, default=str))}


@pytest.mark.parametrize("table", ["scores", "paired", "by_variables", "omitted", "probes", "audit_summary",
                                   "failure_counts"])
def test_reference_tables_are_unchanged(now, table):
    golden = json.loads(GOLDEN.read_text())
    assert now[table] == golden[table]
