"""Golden numbers: the reference agent under every condition and probe gives exactly the tables it gave before.

The suite checks a fixed, representative subset of the test split (:func:`representative`: every template and
variable count with both gold labels where they occur, and every row whose gold label is wrong), against
``tests/golden/reference_subset.json``. That file is written by ``benchmarks/golden.py --write-subset`` only
after the same code reproduced ``tests/golden/reference_full_split.json`` (computed with the code of commit
6fdd9f1) on the whole split; that full check is the benchmark, not a test (12 runs x 1162 rows). A refactor of
the wiring must not move any number.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any, Sequence

import pandas as pd
import pytest

from cpdagthink.analysis import audit, failures, tables
from cpdagthink.analysis.probes import probe_table
from cpdagthink.book import experiments as ex
from cpdagthink.causal.instance import Instance
from cpdagthink.causal.oracle import analyse_premise
from cpdagthink.method.schema import CausalAnalysis
from cpdagthink.run.config import RunConfig

GOLDEN_DIR = Path(__file__).parent / "golden"
FULL_SPLIT = GOLDEN_DIR / "reference_full_split.json"
SUBSET = GOLDEN_DIR / "reference_subset.json"
CONDITIONS = ["baseline_enhanced", "structured", "twoturn_prose_pc", "singleturn_structured",
              "minimal_instruction", "no_thinking", "no_constrained_decoding"]
PROBE_NAMES = ["scramble_full", "scramble_skeleton", "scramble_v_structures", "scramble_directed", "drop_premise"]
TABLES = ["scores", "paired", "by_variables", "omitted", "probes", "audit_summary", "failure_counts"]
PER_CELL = 3  # rows of each (template, variable count, gold label) cell, first in split order


def _records(frame: pd.DataFrame) -> list[dict]:
    return json.loads(json.dumps(frame.to_dict(orient="records"), sort_keys=True, default=str))


def representative(instances: Sequence[Instance]) -> list[Instance]:
    """The golden subset, in split order: the first :data:`PER_CELL` rows of every (template, variable count,
    gold label) cell, and every row whose gold label the oracle contradicts (:func:`audit.gold_errors`)."""
    wrong = set(audit.gold_errors(instances)["id"])
    taken: Counter = Counter()
    picked = []
    for instance in instances:
        cell = (instance.template, instance.num_variables, instance.label)
        if instance.id in wrong or taken[cell] < PER_CELL:
            picked.append(instance)
            taken[cell] += 1
    return picked


def reference_setup(root: Path) -> RunConfig:
    """The reference agent on the whole test split, its run folders and cache under ``root``."""
    return ex.setup_from_parameters({"backend": "reference", "limit": 0, "data": None,
                                     "out_root": str(root / "runs"), "cache_dir": str(root / "cache")})


def golden_tables(setup: RunConfig, instances: Sequence[Instance]) -> dict[str, Any]:
    """Every condition and probe of the reference agent on ``instances``, as the plain values the golden files
    hold (:data:`TABLES`)."""
    instances = list(instances)
    runs = ex.run_grid(setup, CONDITIONS, [0], instances)
    scores = tables.scores_frame(runs)
    assert not scores["published only"].any()  # the oracle labels every row of the test split
    scores = scores.drop(columns=["cut off", "published only"])
    paired = tables.paired_frame(runs, "structured", [c for c in CONDITIONS if c != "structured"], n_resamples=2000)
    by_variables, omitted = tables.by_variables_frame(runs)
    probed = {p: ex.run(setup.for_run("structured", 0, p), instances, progress=False) for p in PROBE_NAMES}
    probes = probe_table(runs[("structured", 0)], probed).reset_index()
    by_id = {i.id: i for i in instances}
    audited = audit.audit_records(runs[("structured", 0)],
                                  lambda rid: CausalAnalysis.from_cpdag(analyse_premise(by_id[rid].premise).cpdag))
    counts = failures.failure_counts({**{c: runs[(c, 0)] for c in CONDITIONS}, **probed}, instances).reset_index()
    return {"scores": _records(scores), "paired": _records(paired), "by_variables": _records(by_variables),
            "omitted": omitted, "probes": _records(probes), "failure_counts": _records(counts),
            "audit_summary": json.loads(json.dumps(audit.audit_summary(audited), sort_keys=True, default=str))}


@pytest.fixture(scope="module")
def split(test_csv, tmp_path_factory) -> tuple[RunConfig, list[Instance]]:
    setup = reference_setup(tmp_path_factory.mktemp("golden"))
    return setup, setup.instances()


@pytest.fixture(scope="module")
def subset(split) -> list[Instance]:
    return representative(split[1])


@pytest.fixture(scope="module")
def now(split, subset) -> dict:
    return golden_tables(split[0], subset)


def test_the_subset_covers_every_template_variable_count_label_and_gold_error(split, subset):
    instances = split[1]
    cells = {(i.template, i.num_variables, i.label) for i in instances}
    assert {(i.template, i.num_variables, i.label) for i in subset} == cells
    assert {i.template for i in subset} == {i.template for i in instances}
    assert {i.num_variables for i in subset} == {i.num_variables for i in instances}
    wrong = audit.gold_errors(instances)
    assert len(wrong) == 18 and set(wrong["id"]) <= {i.id for i in subset}
    assert len(subset) < len(instances) / 5


def test_the_subset_is_the_one_the_golden_tables_were_computed_on(subset):
    assert [i.id for i in subset] == json.loads(SUBSET.read_text())["ids"]


@pytest.mark.parametrize("table", TABLES)
def test_reference_tables_are_unchanged(now, table):
    golden = json.loads(SUBSET.read_text())
    assert now[table] == golden[table]
