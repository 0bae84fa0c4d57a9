"""Audits: field scores on hand-made objects, the record audit on constructed run records, the 18 gold errors
and the alphabetical-order shortcut on the real split."""

from __future__ import annotations

import json
import math

import networkx as nx
import pandas as pd
import pytest

from analyses import make, run_record
from cpdagthink.analysis import audit
from cpdagthink.analysis.audit import (
    QUALITIES,
    accuracy_by_quality,
    audit_records,
    audit_summary,
    field_scores,
    gold_errors,
    later_causes_earlier,
    shortcut_table,
)
from cpdagthink.causal.dag import independence_facts
from cpdagthink.causal.instance import Instance
from cpdagthink.causal.oracle import analyse_premise, label_text, pc_cpdag
from cpdagthink.causal.premise import Facts, verbalise_premise
from cpdagthink.method.schema import CausalAnalysis
from cpdagthink.run.data import read_csv



COLLIDER = nx.DiGraph([("A", "C"), ("B", "C"), ("C", "D")])
REFERENCE = CausalAnalysis.from_cpdag(pc_cpdag(independence_facts(COLLIDER, tuple("ABCD"))))
UNDIRECTED = make("ABCD", undirected=[("A", "C"), ("B", "C"), ("C", "D")])
NO_V_LISTED = REFERENCE.model_copy(update={"v_structures": []})
CYCLE = make("ABCD", directed=[("A", "B"), ("B", "C"), ("C", "A")])


# ------------------------------------------------------------------------------------- field scores


def test_reference_against_itself_is_exact():
    scores = field_scores(REFERENCE, REFERENCE)
    assert scores.exact_match
    for s in (scores.skeleton, scores.v_structures, scores.directed, scores.undirected):
        assert (s.precision, s.recall, s.f1) == (1.0, 1.0, 1.0)
    assert scores.undirected.emitted == scores.undirected.reference == 0  # both empty: F1 = 1 by convention


def test_empty_field_conventions():
    scores = field_scores(UNDIRECTED, REFERENCE)
    assert not scores.exact_match and scores.skeleton.f1 == 1.0
    v = scores.v_structures  # nothing emitted, one expected
    assert (v.precision, v.recall, v.f1) == (1.0, 0.0, 0.0)
    u = scores.undirected  # three emitted, none expected
    assert (u.precision, u.recall, u.f1) == (0.0, 1.0, 0.0)
    assert field_scores(make("AB"), make("AB")).exact_match


def test_partial_credit_and_orientation():
    emitted = make("ABCD", directed=[("A", "C"), ("C", "B"), ("C", "D")], v=[("B", "C", "A")],
                   skeleton=[("C", "A"), ("B", "C")])
    scores = field_scores(emitted, REFERENCE)
    assert (scores.skeleton.precision, scores.skeleton.recall) == (1.0, pytest.approx(2 / 3))
    assert scores.skeleton.f1 == pytest.approx(0.8)
    assert scores.v_structures.f1 == 1.0  # tails are unordered
    assert scores.directed.tp == 2 and scores.directed.f1 == pytest.approx(2 / 3)  # C->B is wrong
    assert not scores.exact_match


# ------------------------------------------------------------------------------------ record audit


def record(rid, analysis, prediction, gold, oracle, condition="structured"):
    return run_record(rid, answer="YES" if prediction else "NO", emitted=analysis, tool_flow=True,
                      gold_label=gold, oracle_label=oracle, condition=condition)


RECORDS = [
    record("exact", REFERENCE, 1, 1, 1),
    record("other-class", UNDIRECTED, 0, 1, 0),
    record("stale-v", NO_V_LISTED, 0, 0, 0),
    record("none", None, 0, 0, 1),
    record("cycle", CYCLE, 1, 0, 0),
]


@pytest.fixture(scope="module")
def audited() -> pd.DataFrame:
    return audit_records(RECORDS, lambda rid: REFERENCE)


def test_audit_rows(audited):
    df = audited.set_index("id")
    assert list(df["graph_quality"]) == ["exact", "valid_not_exact", "violations", "unparsed", "violations"]
    assert list(df["parsed"]) == [True, True, True, False, True]
    assert df.loc["stale-v", "violation_kinds"] == ["v_structure_contradicts_edges"]
    assert df.loc["cycle", "violation_kinds"] == ["directed_cycle", "not_a_cpdag"]
    assert df.loc["exact", "valid"] and df.loc["other-class", "valid"] and pd.isna(df.loc["none", "valid"])
    assert math.isnan(df.loc["none", "skeleton_f1"]) and df.loc["cycle", "skeleton_f1"] == pytest.approx(2 / 3)
    assert list(df["correct"]) == [True, False, True, True, False]
    assert list(df["correct_corrected"]) == [True, True, True, False, False]
    assert {"skeleton_f1", "v_structures_f1", "directed_f1", "undirected_f1", "exact_match", "condition"} <= set(df.columns)


def test_objects_no_cpdag_has_are_parsed_and_audited_as_violations():
    """A self-loop, a name the premise lacks and a variable declared twice: turn 1's call parses, turn 2
    shows the object as emitted, and the audit counts it under the violation that names it."""
    from cpdagthink.method.chat import Completion, ToolCall
    from cpdagthink.method.conditions import read_emitted
    from cpdagthink.method.schema import TOOL_NAME

    base = REFERENCE.model_dump()
    cases = {
        "self-loop": ({**base, "undirected_edges": [["D", "D"]]}, "skeleton_mismatch"),
        "foreign": (json.loads(json.dumps(base).replace('"D"', '"E"')), "unknown_variable"),
        "repeated": ({**base, "variables": ["A", "B", "C", "D", "A"]}, "unknown_variable"),
    }
    rows = {}
    for rid, (data, kind) in cases.items():
        emitted = read_emitted(Completion(text="", tool_calls=[ToolCall(TOOL_NAME, json.dumps(data))]))
        assert emitted.error is None and emitted.analysis.model_dump() == CausalAnalysis.model_validate(data).model_dump()
        rows[rid] = audit.audit_record(record(rid, emitted.analysis, 1, 1, 1), REFERENCE)
        assert rows[rid]["parsed"] and rows[rid]["valid"] is False and rows[rid]["graph_quality"] != "unparsed"
        assert kind in rows[rid]["violation_kinds"], (rid, rows[rid]["violation_kinds"])
    assert rows["self-loop"]["graph_quality"] == rows["foreign"]["graph_quality"] == "violations"
    assert rows["repeated"]["graph_quality"] == "exact"  # its four fields are the reference's; its list is not
    assert audit_summary(pd.DataFrame(rows.values()))["violation_rate"] == 1.0


def test_audit_summary(audited):
    summary = audit_summary(audited)
    assert (summary["records"], summary["parsed"]) == (5, 4)
    assert summary["exact_match_rate"] == 0.25 and summary["violation_rate"] == 0.5
    assert summary["skeleton_f1"] == pytest.approx((3 + 2 / 3) / 4)
    assert summary["skeleton_f1_micro"] == pytest.approx(2 * 11 / 24)
    assert summary["v_structures_f1"] == pytest.approx(0.25)  # only the exact record lists A->C<-B
    rates = summary["violation_kind_rates"]
    assert rates["directed_cycle"] == rates["not_a_cpdag"] == rates["v_structure_contradicts_edges"] == 0.25
    assert rates["non_chordal_component"] == 0.0


def test_accuracy_by_quality(audited):
    table = accuracy_by_quality(audited)
    assert list(table.index) == list(QUALITIES)
    assert list(table["n"]) == [1, 1, 2, 1]
    assert list(table["accuracy"]) == [1.0, 0.0, 0.5, 1.0]
    assert list(table["accuracy_corrected"]) == [1.0, 1.0, 0.5, 0.0]


def test_display_views_of_the_audit(audited):
    """The book's views: rates transposed (one column per condition), violation shares and counts by kind,
    accuracy by quality per condition."""
    summary = audit.summary_frame(audited, ["structured"])
    assert list(summary.columns) == ["structured"] and summary.loc["violation_rate", "structured"] == 0.5
    assert "violation_kind_rates" not in summary.index
    rates = audit.violation_rates(audited)
    assert rates.loc["directed_cycle", "structured"] == 0.25 and rates.loc["not_a_cpdag", "structured"] == 0.25
    counts = audit.violation_counts(audited).set_index("violation_kinds")["outputs"]
    assert counts.to_dict() == {"directed_cycle": 1, "not_a_cpdag": 1, "v_structure_contradicts_edges": 1}
    quality = audit.quality_frame(audited, ["structured"])
    assert quality.loc[("structured", "violations"), "n"] == 2
    clean = audited[audited["graph_quality"] == "exact"]
    assert audit.violation_rates(clean).empty and audit.violation_counts(clean).empty


def test_empty_and_non_tool_records():
    assert audit_records([], lambda rid: REFERENCE).empty
    one_turn = run_record("x", answer="NO", condition="baseline_enhanced", tool_flow=False)
    df = audit_records([one_turn], lambda rid: REFERENCE)
    assert list(df["graph_quality"]) == ["unparsed"]
    assert accuracy_by_quality(df).loc["exact", "n"] == 0


# --------------------------------------------------------------------------------- dataset audits


def instance(facts: Facts, hypothesis: str, label: int, rid: str = "t-0") -> Instance:
    return Instance(id=rid, premise=verbalise_premise(facts), hypothesis=hypothesis, num_variables=len(facts.variables),
                    template="parent", label=label, split="t", source="hand")


def test_later_causes_earlier_reads_the_declared_order():
    chain = independence_facts(nx.DiGraph([("A", "B"), ("B", "C")]), ("A", "B", "C"))
    assert later_causes_earlier(instance(chain, "C directly causes A.", 0))
    assert later_causes_earlier(instance(chain, "C causes something else which causes A.", 0))
    assert not later_causes_earlier(instance(chain, "A directly causes C.", 0))
    assert not later_causes_earlier(instance(chain, "There exists at least one collider (i.e., common effect) of C and A.", 0))
    declared = Facts(("C", "A", "B"), chain.correlations, chain.independencies)
    assert later_causes_earlier(instance(declared, "A directly causes C.", 0))


def test_shortcut_table_on_constructed_records():
    chain = independence_facts(nx.DiGraph([("A", "B"), ("B", "C")]), ("A", "B", "C"))
    rows = [instance(chain, "C directly causes A.", 0, "t-0"), instance(chain, "B directly causes A.", 0, "t-1"),
            instance(chain, "A directly causes B.", 0, "t-2")]
    records = {"m": [run_record("t-0", answer="NO"), run_record("t-1", answer="YES"), run_record("t-2", answer="YES")]}
    table = shortcut_table(records, rows)
    assert table.loc["m", "n_later_causes_earlier"] == 2
    assert table.loc["m", "prediction_no_rate"] == 0.5 and table.loc["m", "no_rate_other_causal"] == 0.0
    assert table.loc["m", "gold_all_zero"] and table.loc["m", "oracle_all_zero"]


@pytest.fixture(scope="module")
def real(test_csv) -> list[Instance]:
    return read_csv(test_csv, split="test")


def test_gold_errors_on_the_real_split(real):
    errors = gold_errors(real)
    assert len(errors) == 18
    assert ((errors["gold"] == 0) & (errors["oracle"] == 1)).sum() == 15
    assert ((errors["gold"] == 1) & (errors["oracle"] == 0)).sum() == 3
    for row in errors.itertuples():
        assert real[row.index].id == row.id and real[row.index].label == row.gold != row.oracle
        assert row.class_size == len(analyse_premise(real[row.index].premise).members) >= 1
        assert row.directed or row.undirected
        # the evidence, counted DAG by DAG over the class: entailed (every DAG) exactly where the oracle says 1
        assert (row.holds_in == row.class_size) == (row.oracle == 1)
    assert set(errors.loc[errors["gold"] == 1, "holds_in"]) != {0}  # gold 1 rows hold in some DAGs, not all


def test_every_later_causes_earlier_row_is_labelled_zero(real):
    later = [i for i in real if later_causes_earlier(i)]
    assert len(later) > 100
    assert all(i.label == 0 for i in later)
    assert all(label_text(i.text).label == 0 for i in later)
    records = {name: [run_record(i.id, answer="YES" if p else "NO", oracle_label=label_text(i.text).label) for i in real]
               for name, p in (("always_no", 0), ("always_yes", 1))}
    table = shortcut_table(records, real)
    assert (table["n_later_causes_earlier"] == len(later)).all() and table["gold_all_zero"].all()
    assert table.loc["always_no", "prediction_no_rate"] == 1.0 and table.loc["always_yes", "prediction_no_rate"] == 0.0


def test_real_references_audit_as_exact(real):
    by_id = {i.id: i for i in real}
    reference_for = lambda rid: CausalAnalysis.from_cpdag(analyse_premise(by_id[rid].premise).cpdag)  # noqa: E731
    recs = [record(i.id, reference_for(i.id), i.label, i.label, label_text(i.text).label) for i in real[:60]]
    summary = audit_summary(audit_records(recs, reference_for))
    assert summary["exact_match_rate"] == 1.0 and summary["violation_rate"] == 0.0


def test_repair_transitions_count_what_the_round_did_to_each_graph():
    from cpdagthink.run.records import RepairRecord

    premise = ("Premise: Suppose there is a closed system of 3 variables, A, B and C. All the statistical relations "
               "among these 3 variables are as follows: A correlates with C. B correlates with C. However, A is "
               "independent of B.")
    reference = CausalAnalysis.from_cpdag(analyse_premise(premise).cpdag)  # the collider A -> C <- B
    cycle = reference.model_copy(update={"directed_edges": [("A", "C"), ("C", "A"), ("B", "C")]})
    chain = CausalAnalysis(variables=["A", "B", "C"], skeleton=[("A", "C"), ("B", "C")],
                           separating_sets=[{"pair": ("A", "B"), "separating_set": ["C"]}], v_structures=[],
                           directed_edges=[], undirected_edges=[("A", "C"), ("B", "C")])  # valid, not the premise's
    records = [
        run_record("fixed", emitted=cycle, repair=RepairRecord(findings=["directed_cycle: A->C->A"], sent=True,
                                                               analysis=reference)),
        run_record("half", emitted=cycle, repair=RepairRecord(findings=["directed_cycle"], sent=True, analysis=chain)),
        run_record("kept", emitted=cycle, repair=RepairRecord(findings=["directed_cycle"], sent=True, error="bad")),
        run_record("valid", emitted=reference, repair=RepairRecord()),
        run_record("no round", emitted=cycle),
    ]
    moved = audit.repair_transitions(records, lambda rid: reference)
    assert moved.to_dict(orient="records") == [
        {"before": "exact", "after": "exact", "graphs": 1},
        {"before": "violations", "after": "exact", "graphs": 1},
        {"before": "violations", "after": "valid_not_exact", "graphs": 1},
        {"before": "violations", "after": "violations", "graphs": 1},
    ]
    assert audit.repair_transitions(records, lambda rid: None).empty
