"""Error localisation: every failure kind on hand-built records in the runner's format, and the counts table."""

from __future__ import annotations

import pytest

from cpdagthink.analysis.failures import COUNT_COLUMNS, FailureKind, classify, diagnose, failure_counts, paper_sample
from cpdagthink.causal.oracle import analyse_premise
from cpdagthink.run.records import TurnRecord
from failure_cases import CHAIN, COLLIDER, INSTANCES, TAIL, instance, mixed_runs, record, reference, reversed_graph


def test_constructed_instances_are_what_the_comments_say():
    assert (COLLIDER.label, CHAIN.label, TAIL.label) == (1, 0, 1)
    assert [len(analyse_premise(i.premise).members) for i in INSTANCES] == [1, 3, 2]


def rejected(inst, **kwargs):
    """A record whose answer turn the service refused (HTTP 400), as the runner writes it."""
    out = record(inst, None, **kwargs)
    refused = TurnRecord(messages_sha256="", request_sha256="", meta={"rejected": "context too long"})
    return out.model_copy(update={"turns": [*out.turns[:-1], refused]})


def cut_off(out, turn: int):
    """``out`` with its turn ``turn`` stopped at its token budget."""
    turns = list(out.turns)
    turns[turn] = turns[turn].model_copy(update={"finish_reason": "length"})
    return out.model_copy(update={"turns": turns})


def test_every_kind_on_a_constructed_case():
    cases = {
        FailureKind.UNPARSED_ANSWER: record(COLLIDER, None, parsed=reference(COLLIDER)),
        FailureKind.REJECTED: rejected(COLLIDER, parsed=reference(COLLIDER)),
        FailureKind.TURN1_CUT_OFF: cut_off(record(COLLIDER, None, parsed=None), 0),
        FailureKind.CUT_OFF: cut_off(record(COLLIDER, None), -1),
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


def test_a_missing_answer_is_never_correct_in_the_gallery():
    """A row that states no answer is a failure of its own kind on a YES row and on a NO row alike (the scores
    read it as NO, so count it right on a NO row; the gallery shows no reasoning as right)."""
    assert classify(record(COLLIDER, None, parsed=None), COLLIDER) is FailureKind.UNPARSED_ANSWER
    assert classify(record(CHAIN, None, parsed=None), CHAIN) is FailureKind.UNPARSED_ANSWER
    assert classify(rejected(COLLIDER), COLLIDER) is FailureKind.REJECTED
    assert classify(rejected(CHAIN), CHAIN) is FailureKind.REJECTED
    # turn 1 stopped at its budget is its own class, not an unparsed answer
    assert classify(cut_off(record(CHAIN, None, parsed=None), 0), CHAIN) is FailureKind.TURN1_CUT_OFF
    # A row that was not posed has nothing to localise against.
    unposed = record(COLLIDER, None).model_copy(update={"problem": "PremiseError: x", "oracle_label": None})
    assert classify(unposed, COLLIDER) is None


def test_precedence_and_the_shown_object():
    # Unparsed wins over a missing graph.
    assert classify(record(COLLIDER, None, parsed=None), COLLIDER) is FailureKind.UNPARSED_ANSWER
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
    assert details.graph_detail == "decided on the CPDAG (2 undirected edge(s))"  # A - B - C, its 3 DAGs unlisted


def test_failure_counts_by_run_name_or_by_condition():
    runs = mixed_runs()
    counts = failure_counts(runs, INSTANCES)
    assert counts.loc["structured", ["n", "correct", "errors"]].tolist() == [3, 1, 2]
    assert counts.loc["structured", "wrong_graph"] == 1 and counts.loc["structured", "mec_ambiguity"] == 1
    assert counts.loc["baseline_enhanced", "one_turn_other"] == 1
    assert counts.loc["baseline_enhanced", "one_turn_mec_ambiguity"] == 1
    assert list(counts.columns) == [*COUNT_COLUMNS, *(k.value for k in FailureKind)]
    flat = failure_counts([r for run in runs.values() for r in run], {i.id: i for i in INSTANCES})
    assert flat.equals(counts)


def test_failure_counts_agree_with_the_records_and_the_scores():
    """Errors are the scores' false answers against the corrected labels and every missing answer (never
    correct, also where scoring it as NO would be); unparsed and refused answers are counted from the records'
    own flags."""
    run = [record(COLLIDER, None, parsed=None), record(CHAIN, None, parsed=None), rejected(TAIL, parsed=None),
           rejected(CHAIN), record(TAIL, "YES", parsed=reference(TAIL))]
    row = failure_counts({"structured": run}, INSTANCES).loc["structured"]
    wrong = sum(r.answer is None or r.says_yes != r.oracle_label for r in run)
    assert (row["n"], row["errors"], row["correct"]) == (5, wrong, 5 - wrong) == (5, 4, 1)
    assert (row["unparsed"], row["rejected"]) == (sum(r.unparsed for r in run), sum(r.rejected for r in run)) == (2, 2)
    assert (row["unparsed_answer"], row["rejected_request"], row["cut off"]) == (2, 2, 0)
    assert row[[k.value for k in FailureKind]].sum() == row["errors"]


def test_the_papers_view_is_a_seeded_sample_of_errors():
    runs = {f"run{i}": [record(COLLIDER, "NO", parsed=reversed_graph(COLLIDER)), record(CHAIN, "YES", parsed=reference(CHAIN)),
                        record(TAIL, "YES", parsed=reference(TAIL))] for i in range(20)}  # 40 errors, 20 correct
    sample = paper_sample(runs, INSTANCES, size=32, seed=3)
    assert list(sample.columns) == ["condition", "id", "kind"] and len(sample) == 32
    assert not sample.duplicated().any() and set(sample["id"]) <= {"collider", "chain"}
    assert set(sample["kind"]) <= {"wrong_graph", "mec_ambiguity"}
    order = [list(FailureKind).index(FailureKind(k)) for k in sample["kind"]]
    assert order == sorted(order)
    assert sample.equals(paper_sample(runs, INSTANCES, size=32, seed=3))
    assert not sample.equals(paper_sample(runs, INSTANCES, size=32, seed=4))
    assert len(paper_sample(runs, INSTANCES, size=100)) == 40  # fewer errors than asked: all of them


@pytest.mark.parametrize("inst", INSTANCES, ids=lambda i: i.id)
def test_reference_answers_are_never_errors(inst):
    answer = "YES" if inst.label else "NO"
    assert classify(record(inst, answer, parsed=reference(inst)), inst) is None
