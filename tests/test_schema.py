"""CausalAnalysis: field order, the reference conversion, the decoding regex and the DOT view."""

from __future__ import annotations

import json
import re
from itertools import combinations

import pytest
from pydantic import ValidationError

from cpdagthink.causal.oracle import analyse_premise, label_text
from cpdagthink.causal.premise import split_input
from cpdagthink.method import schema
from cpdagthink.method.schema import (FIELD_ORDER, CausalAnalysis, GraphVerdict, analysis_regex, instance_model,
                               parse_analysis, tool_definition)
from cpdagthink.run.data import read_csv
from cpdagthink.run.generate import stress_family

PREMISE = ("Premise: Suppose there is a closed system of 4 variables, A, B, C and D. All the statistical relations "
           "among these 4 variables are as follows: A correlates with C. A correlates with D. B correlates with C. "
           "B correlates with D. C correlates with D. However, A is independent of B. A and D are independent given C. "
           "A and D are independent given B and C. B and D are independent given C. B and D are independent given A and C.")


def reference() -> CausalAnalysis:
    return CausalAnalysis.from_cpdag(analyse_premise(PREMISE).cpdag)


def test_field_order_is_the_papers():
    assert tuple(CausalAnalysis.model_json_schema()["properties"]) == FIELD_ORDER
    assert tuple(json.loads(reference().model_dump_json())) == FIELD_ORDER


def test_reference_conversion():
    ref = reference()
    assert ref.v_structures == [("A", "C", "B")]
    assert ref.directed_edges == [("A", "C"), ("B", "C"), ("C", "D")]  # C -> D by Meek R1
    assert ref.undirected_edges == []
    assert {s.pair: s.separating_set for s in ref.separating_sets}[("A", "D")] == ["C"]


def test_regex_accepts_the_reference_and_rejects_foreign_names():
    regex = analysis_regex(["A", "B", "C", "D"])
    text = reference().model_dump_json()
    assert re.fullmatch(regex, text)
    assert not re.fullmatch(regex, text.replace('"D"', '"E"'))
    assert re.fullmatch(analysis_regex(), text)  # the generic regex accepts any single letters


def test_lists_are_bounded_by_the_variables():
    regex = analysis_regex(["A", "B"])
    one = '{"variables":["A","B"],"skeleton":[["A","B"]],"separating_sets":[],"v_structures":[],"directed_edges":[],"undirected_edges":[["A","B"]]}'
    assert re.fullmatch(regex, one)
    assert not re.fullmatch(regex, one.replace('"skeleton":[["A","B"]]', '"skeleton":[["A","B"],["A","B"]]'))
    assert CausalAnalysis.bounds(6)["v_structures"] == 12


def test_every_reference_cpdag_fits_its_bounded_schema(test_csv):
    premises = {instance.premise for instance in read_csv(test_csv)}
    premises |= {split_input(row.input)[0] for family in ("random7", "alarm7", "asia8")
                 for row in stress_family(family, graphs=5, per_graph=1, seed=0)}
    most = 0
    for premise in premises:
        cpdag = analyse_premise(premise).cpdag
        instance_model(tuple(cpdag.variables)).model_validate(CausalAnalysis.from_cpdag(cpdag).model_dump())
        most = max(most, len(cpdag.v_structures))
    assert most >= 3  # the check saw real v-structures, not only empty lists


def test_parse_checks_the_schema_types_not_the_instance():
    text = reference().model_dump_json()
    assert parse_analysis(text) == reference()
    with pytest.raises(ValidationError):
        parse_analysis(text.replace('"A"', '"AB"', 1))  # names are single letters
    with pytest.raises(ValueError):
        parse_analysis('{"variables": ["A"]')


SELF_LOOP = ('{"variables":["A","B","C"],"skeleton":[["B","B"]],"separating_sets":[],"v_structures":[],'
             '"directed_edges":[],"undirected_edges":[["B","B"]]}')


def test_the_narrowed_regex_bars_what_the_parser_admits():
    """The instance's regex has no self-loop, foreign or repeated name; the parser keeps such an object as
    emitted (the paper's schema promises parseable fields, not consistency), for the audit to count."""
    regex = analysis_regex(["A", "B", "C"])
    fine = SELF_LOOP.replace('["B","B"]', '["B","C"]')
    assert re.fullmatch(regex, fine) and parse_analysis(fine).skeleton == [("B", "C")]
    admitted = [SELF_LOOP, fine.replace('["B","C"]', '["B","D"]'), fine.replace('["A","B","C"]', '["A","A","B","C"]')]
    for field, bad in (("directed_edges", '[["C","C"]]'), ("v_structures", '[["A","A","B"]]'),
                       ("separating_sets", '[{"pair":["A","A"],"separating_set":[]}]')):
        admitted.append(fine.replace(f'"{field}":[]', f'"{field}":{bad}'))
    for text in admitted:
        assert text != fine and not re.fullmatch(regex, text), text
        assert parse_analysis(text).model_dump_json().replace(" ", "") == text.replace(" ", "")


def test_dot_view_and_tool_definition():
    dot = reference().to_dot()
    assert "A -> C;" in dot and dot.startswith("digraph")
    tool = tool_definition(["A", "B"])
    assert tool["function"]["name"] == "record_causal_analysis"
    assert tool["function"]["parameters"]["properties"]["variables"]["maxItems"] == 2


def graph(directed=(), undirected=(), variables=("A", "B", "C")) -> CausalAnalysis:
    return CausalAnalysis(variables=list(variables), skeleton=[], separating_sets=[], v_structures=[],
                          directed_edges=list(directed), undirected_edges=list(undirected))


def test_the_reference_cpdag_answers_every_hypothesis_like_the_oracle(test_csv):
    for instance in read_csv(test_csv)[::25]:
        premise, hypothesis = split_input(instance.text)
        oracle = label_text(instance.text)
        if oracle.label is None:
            continue
        verdict = CausalAnalysis.from_cpdag(analyse_premise(premise).cpdag).answer(hypothesis)
        assert verdict.holds == bool(oracle.label), instance.id
        assert verdict.detail == f"decided on the CPDAG ({len(analyse_premise(premise).cpdag.undirected)} undirected edge(s))"


def test_an_answer_needs_every_consistent_dag_and_meek_closes_first():
    undetermined = graph(undirected=[("A", "B")], variables=("A", "B"))
    assert undetermined.answer("A directly causes B.") == GraphVerdict(False, "decided on the CPDAG (1 undirected edge(s))")
    # A -> B - C with A, C non-adjacent: Meek R1 forces B -> C, so A causes C indirectly in the one completion.
    chain = graph(directed=[("A", "B")], undirected=[("B", "C")])
    assert chain.answer("A causes something else which causes C.") == GraphVerdict(True, "checked 1 completion(s)")


def test_a_graph_no_dag_extends_or_a_foreign_hypothesis_answers_no_with_the_reason():
    cyclic = graph(directed=[("A", "B"), ("B", "C"), ("C", "A")])
    verdict = cyclic.answer("A directly causes B.")
    assert verdict.holds is False and verdict.detail.startswith("graph unusable:")
    foreign = graph(directed=[("A", "B")]).answer("A directly causes Z.")
    assert foreign.holds is False and foreign.detail.startswith("graph unusable:")


def test_a_large_cpdag_is_answered_on_the_graph_without_listing_its_dags():
    """All undirected on 10 variables: 10! DAGs, none listed; each relation fails in some of them."""
    names = "ABCDEFGHIJ"
    complete = graph(undirected=list(combinations(names, 2)), variables=names)
    for hypothesis in ("A directly causes B.", "A causes something else which causes B.",
                       "There exists at least one collider (i.e., common effect) of A and B.",
                       "There exists at least one confounder (i.e., common cause) of A and B."):
        assert complete.answer(hypothesis) == GraphVerdict(False, "decided on the CPDAG (45 undirected edge(s))")


def test_a_graph_that_is_no_cpdag_is_listed_only_up_to_the_bound(monkeypatch):
    # Complete on 5 nodes with one arc A -> B: Meek-closed, no CPDAG, 5!/2 = 60 completions.
    names = "ABCDE"
    one_arc = graph(directed=[("A", "B")], undirected=[e for e in combinations(names, 2) if e != ("A", "B")],
                    variables=names)
    assert one_arc.answer("A directly causes B.") == GraphVerdict(True, "checked 60 completion(s)")
    monkeypatch.setattr(schema, "MAX_COMPLETIONS", 59)
    assert one_arc.answer("A directly causes B.") == GraphVerdict(
        False, "graph unusable: not a CPDAG, and it has more than 59 completions")


def test_the_paper_is_credited_with_the_regex_and_the_project_with_its_narrowing():
    """Appendix F.2 derives a regex from the schema; the per-instance enums and list bounds are this
    project's. Every mention of the appendix in the module says which is whose."""
    import inspect

    source = inspect.getsource(schema)
    assert "this project's own choice, not the paper's" in schema.__doc__
    for line in (line for line in source.splitlines() if "appendix F.2" in line):
        assert "enum" not in line and "bound" not in line, line
    assert "narrowing is the project's own" in schema.analysis_regex.__doc__
