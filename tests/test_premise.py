"""Premise and hypothesis parsing, and the round trip through the dataset's own wording."""

from __future__ import annotations

import csv

import pytest

from cpdagthink.causal.premise import (
    ContradictoryFactsError,
    HYPOTHESIS_WORDINGS,
    PARAPHRASE_WORDINGS,
    Query,
    Relation,
    UnknownVariableError,
    UnparsableSentenceError,
    pair,
    paraphrase_hypothesis,
    parse_hypothesis,
    parse_premise,
    split_input,
    verbalise_hypothesis,
    verbalise_premise,
)

HEAD = "Premise: Suppose there is a closed system of 3 variables, {v}. All the statistical relations among these 3 variables are as follows: "


def premise(body: str, names: str = "A, B and C") -> str:
    return HEAD.format(v=names) + body


def test_parses_correlations_and_every_independence():
    facts = parse_premise(premise("A correlates with C. B correlates with C. However, A is independent of B."))
    assert facts.variables == ("A", "B", "C")
    assert facts.correlations == {pair("A", "C"), pair("B", "C")}
    assert facts.independent("A", "B") and not facts.independent("A", "B", {"C"})
    assert not facts.independent("A", "C")  # closed world: unlisted means dependent


def test_any_letters_any_order_and_conditioning_lists():
    text = premise("However, Q and Z are independent given X. X correlates with Z. Q correlates with X.", "Q, X and Z")
    facts = parse_premise(text)
    assert facts.independent("Z", "Q", {"X"})
    assert facts.variables == ("Q", "X", "Z")


def test_many_variables():
    names = [chr(ord("A") + i) for i in range(9)]
    listing = ", ".join(names[:-1]) + " and " + names[-1]
    text = (f"Premise: Suppose there is a closed system of 9 variables, {listing}. All the statistical relations among these 9 "
            "variables are as follows: A correlates with B. However, C and I are independent given A, B, D, E, F, G and H.")
    assert parse_premise(text).independent("C", "I", set("ABDEFGH"))


@pytest.mark.parametrize(
    "body, error, fragment",
    [
        ("A correlates with D.", UnknownVariableError, "A correlates with D"),
        ("A sort of likes B.", UnparsableSentenceError, "A sort of likes B"),
        ("A correlates with B. However, A is independent of B.", ContradictoryFactsError, "A and B"),
        ("A and B are independent given C and 7.", UnparsableSentenceError, "given C and 7"),
    ],
)
def test_malformed_text_names_the_sentence(body, error, fragment):
    with pytest.raises(error) as caught:
        parse_premise(premise(body))
    assert fragment in str(caught.value)


def test_header_count_must_match():
    with pytest.raises(ContradictoryFactsError):
        parse_premise(premise("A correlates with B.", "A, B, C and D"))


@pytest.mark.parametrize("relation", list(Relation))
def test_every_wording_parses_to_its_relation(relation):
    for index in range(len(HYPOTHESIS_WORDINGS[relation])):
        query = Query(relation, "D", "B")
        assert parse_hypothesis(verbalise_hypothesis(query, index)) == query


# The Corr2Cause generator's paraphrase templates (its Verbalizer), one per property; "child" and "non-child
# descendant" swap the two variables, so each reads as a relation from the first-named variable.
@pytest.mark.parametrize("sentence, query", [
    ("X directly affects Y.", Query(Relation.DIRECT_CAUSE, "X", "Y")),
    ("B directly affects E.", Query(Relation.DIRECT_CAUSE, "B", "E")),
    ("X influences Y through some mediator(s).", Query(Relation.INDIRECT_CAUSE, "X", "Y")),
    ("D influences A through some mediator(s).", Query(Relation.INDIRECT_CAUSE, "D", "A")),
    ("X and Y together cause some other variable(s).", Query(Relation.COLLIDER, "X", "Y")),
    ("Some variable(s) cause(s) both X and Y.", Query(Relation.CONFOUNDER, "X", "Y")),
])
def test_the_generator_paraphrase_templates_parse(sentence, query):
    assert parse_hypothesis(sentence) == query
    assert paraphrase_hypothesis(query) == sentence
    assert PARAPHRASE_WORDINGS[query.relation] in HYPOTHESIS_WORDINGS[query.relation]


def test_a_paraphrase_does_not_drop_its_parentheses():
    with pytest.raises(UnparsableSentenceError):
        parse_hypothesis("X influences Y through some mediators.")


def test_hypothesis_errors():
    with pytest.raises(UnknownVariableError):
        parse_hypothesis("Z directly causes A.", ("A", "B"))
    with pytest.raises(UnparsableSentenceError):
        parse_hypothesis("A is friends with B.")


def test_round_trip_reproduces_every_row_of_the_real_split(test_csv):
    for row in csv.DictReader(open(test_csv, encoding="utf-8")):
        text, hypothesis = split_input(row["input"])
        facts = parse_premise(text)
        assert verbalise_premise(facts) == text
        query = parse_hypothesis(hypothesis, facts.variables)
        wording = next(i for i in range(len(HYPOTHESIS_WORDINGS[query.relation]))
                       if verbalise_hypothesis(query, i) == hypothesis)
        assert wording in (0, 1)
