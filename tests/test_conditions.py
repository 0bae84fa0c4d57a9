"""Conditions build the right requests and read answers strictly."""

from __future__ import annotations

import re

import pytest

from cpdagthink.backends.base import Completion, ToolCall
from cpdagthink.conditions import (
    CONDITIONS,
    Decoding,
    Flow,
    Turn2Input,
    first_request,
    get_condition,
    parse_answer,
    read_emitted,
    second_request,
)
from cpdagthink.data import Instance
from cpdagthink.oracle import analyse_premise
from cpdagthink.schema import CausalAnalysis

PREMISE = ("Premise: Suppose there is a closed system of 3 variables, A, B and C. All the statistical relations among "
           "these 3 variables are as follows: A correlates with C. B correlates with C. However, A is independent of B.")
INSTANCE = Instance(id="t-0", premise=PREMISE, hypothesis="A directly causes C.", num_variables=3, template="parent",
                    label=1, split="t", source="test")
REFERENCE = CausalAnalysis.from_cpdag(analyse_premise(PREMISE).cpdag)


def test_the_seven_conditions():
    assert set(CONDITIONS) == {"structured", "baseline_enhanced", "twoturn_prose_pc", "singleturn_structured",
                               "minimal_instruction", "no_thinking", "no_constrained_decoding"}
    with pytest.raises(ValueError, match="choose one of"):
        get_condition("magic")


def test_structured_turn1_is_constrained_and_offers_the_tool():
    request = first_request(CONDITIONS["structured"], INSTANCE, Decoding())
    assert request.constraint is not None and request.constraint.tool == "record_causal_analysis"
    assert re.fullmatch(request.constraint.regex, REFERENCE.model_dump_json())
    assert request.tool_choice == "auto" and request.tools[0]["function"]["name"] == "record_causal_analysis"
    assert PREMISE in request.messages[1]["content"]
    forced = first_request(CONDITIONS["structured"], INSTANCE, Decoding(tool_choice="forced"))
    assert forced.tool_choice == "record_causal_analysis"


def test_ablations_change_one_thing():
    base = first_request(CONDITIONS["structured"], INSTANCE, Decoding())
    assert first_request(CONDITIONS["no_constrained_decoding"], INSTANCE, Decoding()).constraint is None
    assert first_request(CONDITIONS["no_constrained_decoding"], INSTANCE, Decoding()).tools == base.tools
    assert first_request(CONDITIONS["no_thinking"], INSTANCE, Decoding()).thinking is False and base.thinking
    minimal = first_request(CONDITIONS["minimal_instruction"], INSTANCE, Decoding())
    assert "Meek" not in minimal.messages[0]["content"] and minimal.constraint == base.constraint


def test_one_turn_conditions_have_no_tool():
    for name in ("baseline_enhanced", "singleturn_structured"):
        assert CONDITIONS[name].flow is Flow.ONE_TURN
        assert first_request(CONDITIONS[name], INSTANCE, Decoding()).tools == ()


def test_budgets_are_matched_across_one_and_two_turn_flows():
    decoding = Decoding(max_tokens_turn1=300, max_tokens_answer=50)
    assert first_request(CONDITIONS["baseline_enhanced"], INSTANCE, decoding).max_tokens == 350
    assert first_request(CONDITIONS["singleturn_structured"], INSTANCE, decoding).max_tokens == 350
    assert first_request(CONDITIONS["structured"], INSTANCE, decoding).max_tokens == 300
    assert first_request(CONDITIONS["twoturn_prose_pc"], INSTANCE, decoding).max_tokens == 300
    turn1 = Completion(text="", tool_calls=[ToolCall("record_causal_analysis", REFERENCE.model_dump_json())])
    assert second_request(CONDITIONS["structured"], INSTANCE, decoding, turn1).max_tokens == 50


def test_turn2_returns_the_object_with_its_dot_view():
    turn1 = Completion(text="", tool_calls=[ToolCall("record_causal_analysis", REFERENCE.model_dump_json())])
    request = second_request(CONDITIONS["structured"], INSTANCE, Decoding(), turn1)
    tool = request.messages[-1]
    assert tool["role"] == "tool" and "A -> C;" in tool["content"] and "as recorded" in tool["content"]
    assert request.messages[-2]["content"] == "" and request.messages[-2]["tool_calls"]


def test_intervention_replaces_the_object_everywhere_and_can_drop_the_premise():
    turn1 = Completion(text="", tool_calls=[ToolCall("record_causal_analysis", REFERENCE.model_dump_json())])
    other = REFERENCE.model_copy(update={"directed_edges": [("C", "A"), ("C", "B")], "v_structures": []})
    request = second_request(CONDITIONS["structured"], INSTANCE, Decoding(), turn1,
                             Turn2Input(other, include_premise=False, note="swapped"))
    assert PREMISE not in request.messages[1]["content"] and "Hypothesis:" in request.messages[1]["content"]
    assert "C -> A;" in request.messages[-1]["content"] and "swapped" in request.messages[-1]["content"]
    assert '"C","A"' in request.messages[-2]["tool_calls"][0]["function"]["arguments"]


def test_malformed_and_truncated_json_is_recorded_not_raised():
    truncated = Completion(text="", tool_calls=[ToolCall("record_causal_analysis", '{"variables": ["A", "B"')])
    emitted = read_emitted(truncated, INSTANCE)
    assert emitted.analysis is None and "JSONDecodeError" in emitted.error
    none = read_emitted(Completion(text="I think yes"), INSTANCE)
    assert none.analysis is None and "no record_causal_analysis" in none.error
    request = second_request(CONDITIONS["structured"], INSTANCE, Decoding(), truncated)
    assert "not usable" in request.messages[-1]["content"]


@pytest.mark.parametrize(
    "text, answer",
    [("Reasoning...\nAnswer: YES", "YES"), ("Answer: no.", "NO"), ("**Answer:** YES", "YES"), ("NO", "NO"),
     ("Answer: YES\nwait\nAnswer: NO", "NO"), ("Yes, probably.", None), ("", None), ("Answer: maybe", None)],
)
def test_answers_are_parsed_strictly(text, answer):
    assert parse_answer(text) == answer
