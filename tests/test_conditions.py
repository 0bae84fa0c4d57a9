"""Conditions build the right requests and read answers strictly."""

from __future__ import annotations

import dataclasses
import json
import re

import pytest

from cpdagthink.backends.reference import ReferenceBackend
from cpdagthink.causal.instance import Instance
from cpdagthink.causal.oracle import analyse_premise
from cpdagthink.method.chat import Completion, Request, ToolCall
from cpdagthink.method.conditions import (
    CONDITIONS,
    Flow,
    Turn2Input,
    first_request,
    get_condition,
    intervene,
    parse_answer,
    read_emitted,
    second_request,
)
from cpdagthink.method.decoding import Decoding
from cpdagthink.method.interventions import PROBES
from cpdagthink.method.prompts import call_instruction
from cpdagthink.method.schema import CausalAnalysis
from cpdagthink.run.data import read_csv

PREMISE = ("Premise: Suppose there is a closed system of 3 variables, A, B and C. All the statistical relations among "
           "these 3 variables are as follows: A correlates with C. B correlates with C. However, A is independent of B.")
INSTANCE = Instance(id="t-0", premise=PREMISE, hypothesis="A directly causes C.", num_variables=3, template="parent",
                    label=1, split="t", source="test")
REFERENCE = CausalAnalysis.from_cpdag(analyse_premise(PREMISE).cpdag)


def test_the_eight_conditions_and_the_design_points():
    from cpdagthink.method.design import design_points

    named = {"structured", "baseline_enhanced", "twoturn_prose_pc", "singleturn_structured", "minimal_instruction",
             "no_thinking", "no_constrained_decoding", "baseline_no_thinking", "light_prose", "structured_repair"}
    assert set(CONDITIONS) == named | {p.name for p in design_points()}
    with pytest.raises(ValueError, match="choose one of"):
        get_condition("magic")


def test_structured_turn1_is_constrained_and_offers_the_tool():
    request = first_request(CONDITIONS["structured"], INSTANCE, Decoding())
    assert request.constraint is not None and request.constraint.tool == "record_causal_analysis"
    assert re.fullmatch(request.constraint.regex, REFERENCE.model_dump_json())
    assert request.tool_choice == "auto" and request.tools[0]["function"]["name"] == "record_causal_analysis"
    assert PREMISE in request.messages[1]["content"]

def test_forced_tool_choice_changes_the_flag_and_the_call_instruction_only():
    auto = first_request(CONDITIONS["structured"], INSTANCE, Decoding())
    forced = first_request(CONDITIONS["structured"], INSTANCE, Decoding(tool_choice="forced"))
    assert forced.tool_choice == "record_causal_analysis"
    assert "required" in forced.messages[1]["content"] and "required" not in auto.messages[1]["content"]
    assert forced.messages[0] == auto.messages[0] and forced.constraint == auto.constraint
    said = {d.tool_choice: r.messages[1]["content"] for d, r in ((Decoding(), auto), (Decoding(tool_choice="forced"), forced))}
    assert said["auto"].replace(call_instruction("auto"), call_instruction("forced")) == said["forced"]
    with pytest.raises(ValueError, match="'auto' or 'forced'"):
        Decoding(tool_choice="required")


def test_ablations_change_one_thing():
    base = first_request(CONDITIONS["structured"], INSTANCE, Decoding())
    assert first_request(CONDITIONS["no_constrained_decoding"], INSTANCE, Decoding()).constraint is None
    assert first_request(CONDITIONS["no_constrained_decoding"], INSTANCE, Decoding()).tools == base.tools
    assert first_request(CONDITIONS["no_thinking"], INSTANCE, Decoding()).thinking is False and base.thinking
    minimal = first_request(CONDITIONS["minimal_instruction"], INSTANCE, Decoding())
    system, user = (m["content"] for m in minimal.messages)
    assert "Meek" not in system and "record_causal_analysis" in system and len(system) < 200
    assert user == f"{PREMISE}\n\nHypothesis: A directly causes C."  # no instruction in the user turn either
    assert minimal.constraint == base.constraint and minimal.tools == base.tools
    turn1 = Completion(text="", tool_calls=[ToolCall("record_causal_analysis", REFERENCE.model_dump_json())])
    assert (second_request(CONDITIONS["minimal_instruction"], INSTANCE, Decoding(), turn1).messages[2:]
            == second_request(CONDITIONS["structured"], INSTANCE, Decoding(), turn1).messages[2:])


def test_baseline_without_thinking_differs_from_the_baseline_by_the_switch_only():
    base = first_request(CONDITIONS["baseline_enhanced"], INSTANCE, Decoding())
    off = first_request(CONDITIONS["baseline_no_thinking"], INSTANCE, Decoding())
    assert base.thinking and not off.thinking and dataclasses.replace(off, thinking=True) == base


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
    assert tool["role"] == "tool" and "A -> C;" in tool["content"] and "Recorded CPDAG (parsed):" in tool["content"]
    assert request.messages[-2]["content"] == "" and request.messages[-2]["tool_calls"]


def test_turn2_call_id_is_nine_alphanumerics_fixed_per_instance():
    """mistral_common (vLLM's Mistral tokenizers v3, v7, v11) refuses a tool-call id that is not 9 alphanumerics."""
    turn1 = Completion(text="", tool_calls=[ToolCall("record_causal_analysis", REFERENCE.model_dump_json())])
    request = second_request(CONDITIONS["structured"], INSTANCE, Decoding(), turn1)
    call_id = request.messages[-2]["tool_calls"][0]["id"]
    assert re.fullmatch(r"[a-zA-Z0-9]{9}", call_id) and request.messages[-1]["tool_call_id"] == call_id
    assert second_request(CONDITIONS["structured"], INSTANCE, Decoding(seed=5), turn1).messages[-1]["tool_call_id"] == call_id
    other = INSTANCE.model_copy(update={"id": "t-1"})
    assert second_request(CONDITIONS["structured"], other, Decoding(), turn1).messages[-1]["tool_call_id"] != call_id


def test_intervention_replaces_the_object_everywhere_and_can_drop_the_premise():
    turn1 = Completion(text="", tool_calls=[ToolCall("record_causal_analysis", REFERENCE.model_dump_json())])
    other = REFERENCE.model_copy(update={"directed_edges": [("C", "A"), ("C", "B")], "v_structures": []})
    request = second_request(CONDITIONS["structured"], INSTANCE, Decoding(), turn1,
                             Turn2Input(other, include_premise=False, note="swapped"))
    assert PREMISE not in request.messages[1]["content"]
    assert request.messages[1]["content"].startswith("Hypothesis: A directly causes C.\n\nDerive the CPDAG")
    assert "C -> A;" in request.messages[-1]["content"] and '"C","A"' in request.messages[-1]["content"]
    assert '"C","A"' in request.messages[-2]["tool_calls"][0]["function"]["arguments"]
    assert "swapped" not in json.dumps(request.to_json())  # the note is for the record only


def test_probes_are_refused_for_the_prose_control():
    with pytest.raises(ValueError, match="makes none"):
        second_request(CONDITIONS["twoturn_prose_pc"], INSTANCE, Decoding(), Completion(text="prose"),
                       Turn2Input(None, note="x"))


# ------------------------------------------------------------------- a probed turn 2 looks unprobed

MASK = "<masked>"


def _masked(request: Request, shown: CausalAnalysis | None, premise: str | None) -> Request:
    """The request with the shown object's serialisations masked (the turn-1 call's arguments, and the DOT
    view and JSON inside the tool result), and with ``premise`` (if given) deleted along with the blank
    line after it, which is how ``drop_premise`` removes it."""
    messages = []
    for message in request.messages:
        message = dict(message)
        if message.get("tool_calls"):
            (call,) = message["tool_calls"]
            message["tool_calls"] = [{**call, "function": {**call["function"], "arguments": MASK}}]
        if message["role"] == "tool":
            for text in (shown.to_dot(), shown.model_dump_json()):
                assert text in message["content"]
                message["content"] = message["content"].replace(text, MASK)
        if premise is not None and message["role"] == "user":
            message["content"] = message["content"].replace(f"{premise}\n\n", "")
        messages.append(message)
    return dataclasses.replace(request, messages=tuple(messages))


@pytest.fixture(scope="module")
def real_turns(test_csv):
    """Reference-agent turn 1 on real rows of every size, for both tool choices."""
    rows = read_csv(test_csv)
    picked = [next(r for r in rows if r.num_variables == n and r.label == n % 2) for n in (3, 4, 5, 6)]
    backend = ReferenceBackend()
    turns = []
    for instance in picked:
        for decoding in (Decoding(seed=3), Decoding(tool_choice="forced")):
            turn1 = backend.complete(first_request(CONDITIONS["structured"], instance, decoding))
            turns.append((instance, decoding, turn1))
    return turns


@pytest.mark.parametrize("name", list(PROBES))
def test_a_probed_turn2_differs_from_the_unprobed_one_only_in_the_object(name, real_turns):
    changed = 0
    for instance, decoding, turn1 in real_turns:
        emitted = read_emitted(turn1).analysis
        given = intervene(PROBES[name], instance, emitted, decoding.seed)
        assert given.note  # recorded, never shown
        assert given.include_premise is (name != "drop_premise")
        plain = second_request(CONDITIONS["structured"], instance, decoding, turn1)
        probed = second_request(CONDITIONS["structured"], instance, decoding, turn1, given)
        dropped = None if given.include_premise else instance.premise
        assert _masked(probed, given.analysis, dropped) == _masked(plain, emitted, dropped)
        assert (instance.premise in probed.messages[1]["content"]) is given.include_premise
        changed += probed != plain
    assert changed >= len(real_turns) - 2, "the probe should change most turns"


def test_malformed_and_truncated_json_is_recorded_not_raised():
    truncated = Completion(text="", tool_calls=[ToolCall("record_causal_analysis", '{"variables": ["A", "B"')])
    emitted = read_emitted(truncated)
    assert emitted.analysis is None and "JSONDecodeError" in emitted.error
    none = read_emitted(Completion(text="I think yes"))
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


def test_an_object_with_a_self_loop_and_a_foreign_name_goes_to_turn2_as_emitted():
    """INSTANCE declares A, B, C: the object names D and loops B on itself, yet parses and is shown."""
    arguments = ('{"variables":["A","B","C","D"],"skeleton":[["B","B"],["C","D"]],"separating_sets":[],'
                 '"v_structures":[],"directed_edges":[["C","D"]],"undirected_edges":[["B","B"]]}')
    turn1 = Completion(text="", tool_calls=[ToolCall("record_causal_analysis", arguments)])
    emitted = read_emitted(turn1)
    assert emitted.error is None and emitted.analysis.undirected_edges == [("B", "B")]
    request = second_request(CONDITIONS["structured"], INSTANCE, Decoding(), turn1)
    result = request.messages[-1]["content"]
    assert "not usable" not in result and "C -> D;" in result and "B -> B [dir=none];" in result
    assert json.loads(request.messages[-2]["tool_calls"][0]["function"]["arguments"]) == json.loads(arguments)


def test_the_flexible_reading_reads_what_a_reviewer_reads_and_the_strict_one_stays_as_it_was():
    from cpdagthink.method.conditions import parse_answer_flexible

    assert parse_answer("The answer is YES.") is None  # strict: the format the prompt asks for
    cases = {"The answer is YES.": "YES", "The answer is: **No**.": "NO", "There is no edge, so the answer is yes": "YES",
             "Answer: NO": "NO", "I weighed both and say NO.": "NO", "no idea": None, "": None,
             "Answer: YES\nOn reflection the answer is no.": "YES"}  # a strict line, when there is one, wins
    assert {text: parse_answer_flexible(text) for text in cases} == cases
