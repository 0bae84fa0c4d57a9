"""Error localisation: every failure kind on hand-built records in the runner's format, the tables, the drawing."""

from __future__ import annotations

import json

import matplotlib

matplotlib.use("Agg")

import networkx as nx  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from matplotlib.colors import to_rgba  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.patches import FancyArrowPatch  # noqa: E402

from cpdagthink.dag import independence_facts  # noqa: E402
from cpdagthink.data import Instance  # noqa: E402
from cpdagthink.failures import (  # noqa: E402
    GALLERY_COLUMNS,
    FailureKind,
    classify,
    diagnose,
    draw_pair,
    failure_counts,
    gallery_rows,
)
from cpdagthink.oracle import analyse_premise, label_text  # noqa: E402
from cpdagthink.premise import verbalise_premise  # noqa: E402
from cpdagthink.records import InterventionRecord, RunRecord, TurnRecord
from cpdagthink.schema import CausalAnalysis  # noqa: E402

_ABSENT = object()


def instance(edges, hypothesis: str, variables: str, id_: str, label: int | None = None) -> Instance:
    dag = nx.DiGraph()
    dag.add_nodes_from(variables)
    dag.add_edges_from(edges)
    premise = verbalise_premise(independence_facts(dag, tuple(variables)))
    oracle = label_text(f"{premise}\nHypothesis: {hypothesis}").label
    return Instance(id=id_, premise=premise, hypothesis=hypothesis, num_variables=len(variables), template="parent",
                    label=oracle if label is None else label, split="t", source="constructed")


def reference(inst: Instance) -> dict:
    return CausalAnalysis.from_cpdag(analyse_premise(inst.premise).cpdag).model_dump(mode="json")


def record(inst: Instance, answer: str | None, *, parsed=_ABSENT, shown=_ABSENT, condition: str | None = None) -> RunRecord:
    """A record as the runner writes it: tool runs carry turn 1's parsed object and two turns."""
    tool = parsed is not _ABSENT
    text = "I thought about it." + (f"\nAnswer: {answer}" if answer else "")
    turn = lambda text, thinking: TurnRecord(messages_sha256="", request_sha256="", text=text, reasoning=thinking)
    emitted, error = None, None
    if tool and parsed is not None:
        try:
            emitted = CausalAnalysis.model_validate(parsed)
        except ValueError as invalid:  # the runner records an unparsable object as missing, with the reason
            error = str(invalid)
    return RunRecord(
        id=inst.id, content_sha256=inst.content_sha256,
        condition=condition or ("structured" if tool else "baseline_enhanced"),
        split=inst.split, num_variables=inst.num_variables, template=inst.template,
        turns=[turn("", "turn-1 thinking"), turn(text, "turn-2 thinking")] if tool else [turn(text, "turn-1 thinking")],
        tool_flow=tool, emitted=emitted, emitted_error=error,
        intervention=None if shown is _ABSENT else InterventionRecord(
            name="probe", note="probe", analysis=None if shown is None else CausalAnalysis.model_validate(shown)),
        answer=answer, gold_label=inst.label, oracle_label=label_text(inst.text).label,
    )


# A -> C <- B: one member, every edge directed; "A directly causes C" holds (label 1).
COLLIDER = instance([("A", "C"), ("B", "C")], "A directly causes C.", "ABC", "collider")
# A - B - C: three members; "A directly causes B" holds in one of them (label 0).
CHAIN = instance([("A", "B"), ("B", "C")], "A directly causes B.", "ABC", "chain")
# D - A -> B <- C: two members (D - A undirected); "A directly causes B" holds in both (label 1).
TAIL = instance([("D", "A"), ("A", "B"), ("C", "B")], "A directly causes B.", "ABCD", "tail")
INSTANCES = [COLLIDER, CHAIN, TAIL]


def reversed_graph(inst: Instance) -> dict:
    graph = reference(inst)
    graph["directed_edges"] = [[b, a] for a, b in graph["directed_edges"]]
    return graph


def test_constructed_instances_are_what_the_comments_say():
    assert (COLLIDER.label, CHAIN.label, TAIL.label) == (1, 0, 1)
    assert [len(analyse_premise(i.premise).members) for i in INSTANCES] == [1, 3, 2]


def test_every_kind_on_a_constructed_case():
    cases = {
        FailureKind.UNPARSED_ANSWER: record(COLLIDER, None, parsed=reference(COLLIDER)),
        FailureKind.NO_GRAPH: record(COLLIDER, "NO", parsed=None),
        FailureKind.WRONG_GRAPH: record(COLLIDER, "NO", parsed=reversed_graph(COLLIDER)),
        FailureKind.WRONG_READOUT: record(COLLIDER, "NO", parsed=reference(COLLIDER)),
        FailureKind.MEC_AMBIGUITY: record(CHAIN, "YES", parsed=reference(CHAIN)),
        FailureKind.ONE_TURN_MEC_AMBIGUITY: record(CHAIN, "YES"),
        FailureKind.ONE_TURN_OTHER: record(COLLIDER, "NO"),
    }
    assert set(cases) == set(FailureKind)
    found = {i.id: i for i in INSTANCES}
    for kind, rec in cases.items():
        assert classify(rec, found[rec.id]) is kind, kind


def test_correct_answers_are_none_against_the_corrected_label():
    assert classify(record(COLLIDER, "YES", parsed=reference(COLLIDER)), COLLIDER) is None
    assert classify(record(CHAIN, "NO"), CHAIN) is None
    # Published label 0, corrected label 1: a YES is correct, a NO is the error.
    mislabelled = instance([("A", "C"), ("B", "C")], "A directly causes C.", "ABC", "mislabelled", label=0)
    assert classify(record(mislabelled, "YES", parsed=reference(mislabelled)), mislabelled) is None
    assert classify(record(mislabelled, "NO", parsed=reference(mislabelled)), mislabelled) is FailureKind.WRONG_READOUT


def test_false_no_next_to_an_undirected_edge_is_an_ambiguity_case():
    assert classify(record(TAIL, "NO", parsed=reference(TAIL)), TAIL) is FailureKind.MEC_AMBIGUITY
    assert classify(record(TAIL, "NO"), TAIL) is FailureKind.ONE_TURN_MEC_AMBIGUITY
    # The same false NO on a one-member class is a plain readout error.
    assert classify(record(COLLIDER, "NO", parsed=reference(COLLIDER)), COLLIDER) is FailureKind.WRONG_READOUT


def test_a_false_yes_no_member_supports_is_not_an_ambiguity_case():
    never = instance([("A", "B"), ("B", "C")], "A directly causes C.", "ABC", "never")
    assert classify(record(never, "YES"), never) is FailureKind.ONE_TURN_OTHER
    assert classify(record(never, "YES", parsed=reference(never)), never) is FailureKind.WRONG_READOUT


def test_precedence_and_the_shown_object():
    # Unparsed wins over a missing graph, and over a "correct" NO-by-default.
    assert classify(record(CHAIN, None, parsed=None), CHAIN) is FailureKind.UNPARSED_ANSWER
    # Under a probe the shown object is judged, not the emitted one.
    probed = record(COLLIDER, "NO", parsed=reference(COLLIDER), shown=reversed_graph(COLLIDER))
    assert classify(probed, COLLIDER) is FailureKind.WRONG_GRAPH
    probed = record(COLLIDER, "NO", parsed=reversed_graph(COLLIDER), shown=reference(COLLIDER))
    assert classify(probed, COLLIDER) is FailureKind.WRONG_READOUT
    # A graph that is right but gives a wrong answer loses to WRONG_GRAPH over MEC_AMBIGUITY.
    wrong = reference(CHAIN)
    wrong.update(directed_edges=[["A", "B"]], undirected_edges=[["B", "C"]])
    assert classify(record(CHAIN, "YES", parsed=wrong), CHAIN) is FailureKind.WRONG_GRAPH
    # An object that does not validate counts as no graph.
    assert classify(record(COLLIDER, "NO", parsed={"variables": ["A"]}), COLLIDER) is FailureKind.NO_GRAPH
    details = diagnose(record(CHAIN, "YES", parsed=reference(CHAIN)), CHAIN)
    assert (details.members, details.members_holding, details.graph_verdict) == (3, 1, 0)


def test_failure_counts_and_gallery_rows():
    runs = {
        "structured": [record(COLLIDER, "NO", parsed=reversed_graph(COLLIDER)), record(CHAIN, "NO", parsed=reference(CHAIN)),
                       record(TAIL, "NO", parsed=reference(TAIL))],
        "baseline_enhanced": [record(COLLIDER, "NO"), record(CHAIN, "YES"), record(TAIL, "YES")],
    }
    counts = failure_counts(runs, INSTANCES)
    assert counts.loc["structured", ["n", "correct", "errors"]].tolist() == [3, 1, 2]
    assert counts.loc["structured", "wrong_graph"] == 1 and counts.loc["structured", "mec_ambiguity"] == 1
    assert counts.loc["baseline_enhanced", "one_turn_other"] == 1
    assert counts.loc["baseline_enhanced", "one_turn_mec_ambiguity"] == 1
    flat = failure_counts([r for run in runs.values() for r in run], {i.id: i for i in INSTANCES})
    assert flat.equals(counts)

    rows = gallery_rows(runs, INSTANCES)
    assert list(rows.columns) == GALLERY_COLUMNS and len(rows) == 4
    first = rows.iloc[0]
    assert (first["id"], first["kind"], first["oracle"], first["answer"]) == ("collider", "wrong_graph", 1, "NO")
    assert json.loads(first["emitted_analysis"])["directed_edges"] == [["C", "A"], ["C", "B"]]
    assert json.loads(first["reference_analysis"]) == reference(COLLIDER)
    assert first["reasoning"] == "turn-2 thinking" and first["answer_text"].endswith("Answer: NO")
    assert pd.isna(rows.iloc[-1]["emitted_analysis"]) and rows.iloc[-1]["condition"] == "baseline_enhanced"


# ----------------------------------------------------------------------------------------------- drawing


def arrows(ax) -> list[FancyArrowPatch]:
    return [p for p in ax.patches if isinstance(p, FancyArrowPatch)]


def test_draw_pair_draws_every_edge_and_highlights_the_differences():
    ref = CausalAnalysis.model_validate(reference(TAIL))  # A -> B, C -> B, A - D
    emitted = ref.model_copy(update={"directed_edges": [("A", "B"), ("B", "C")], "undirected_edges": [("A", "D"), ("C", "D")]})
    figure = Figure()
    left, right = figure.subplots(1, 2)
    assert draw_pair(emitted, ref, left, right) is figure
    red = to_rgba("tab:red")
    assert len(arrows(left)) == 4 and len(arrows(right)) == 3
    assert sum(p.get_edgecolor() == red for p in arrows(left)) == 2  # B -> C, C - D
    assert sum(p.get_edgecolor() == red for p in arrows(right)) == 1  # C -> B
    assert left.get_title() == "emitted" and right.get_title() == "reference"
    # Same layout: every node label sits at the same place on both axes.
    where = [{t.get_text(): t.get_position() for t in ax.texts} for ax in (left, right)]
    assert where[0] == where[1] and set(where[0]) == {"A", "B", "C", "D"}


def test_draw_pair_without_an_emitted_graph():
    ref = CausalAnalysis.model_validate(reference(CHAIN))
    figure = Figure()
    left, right = figure.subplots(1, 2)
    draw_pair(None, ref, left, right)
    assert len(arrows(left)) == 0 and len(arrows(right)) == 2 and left.get_title() == "emitted: none"
    assert all(p.get_edgecolor() == to_rgba("tab:red") for p in arrows(right))


@pytest.mark.parametrize("inst", INSTANCES, ids=lambda i: i.id)
def test_reference_answers_are_never_errors(inst):
    answer = "YES" if inst.label else "NO"
    assert classify(record(inst, answer, parsed=reference(inst)), inst) is None


def test_filterable_html_escapes_and_filters_by_text():
    import pandas as pd

    from cpdagthink.failures import filterable_html

    page = filterable_html(pd.DataFrame({"id": ["t-1", "t-2"], "hypothesis": ["A <b> B", "C"]}))
    assert page.count("<tr>") == 3 and "A &lt;b&gt; B" in page and "addEventListener('input'" in page
