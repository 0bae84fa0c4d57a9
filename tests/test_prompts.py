"""Prompt files: every condition's prompts exist, render without missing fields, and hash stably."""

from __future__ import annotations

import pytest

from cpdagthink.causal.instance import Instance
from cpdagthink.causal.oracle import analyse_premise
from cpdagthink.method.chat import Completion, ToolCall
from cpdagthink.method.conditions import CONDITIONS, first_request, second_request
from cpdagthink.method.decoding import Decoding
from cpdagthink.method.prompts import CALL_INSTRUCTIONS, PromptError, call_instruction, file_hash, raw, render, used_files
from cpdagthink.method.schema import CausalAnalysis

PREMISE = ("Premise: Suppose there is a closed system of 3 variables, A, B and C. All the statistical relations among "
           "these 3 variables are as follows: A correlates with C. B correlates with C. However, A is independent of B.")
INSTANCE = Instance(id="t-0", premise=PREMISE, hypothesis="A directly causes C.", num_variables=3, template="parent",
                    label=1, split="t", source="test")


@pytest.mark.parametrize("name", sorted(CONDITIONS))
def test_condition_prompts_render(name):
    condition = CONDITIONS[name]
    fields = {"premise": "Premise: P.", "hypothesis": "A directly causes B.", "status": "parsed",
              "dot": "digraph {}", "analysis_json": "{}", "call_instruction": call_instruction("auto"),
              "analysis_text": "Variables: A, B", "findings": "- not_a_cpdag: a cycle"}
    for prompt in (condition.system, condition.user, condition.follow_up, *condition.prompt_files()):
        if prompt:
            text = render(prompt, **fields)
            assert "$" not in text


def test_shared_scaffold_is_included_once_and_hashed():
    assert "Meek" in render("baseline_enhanced_system") and "Meek" in render("structured_turn1_system")
    assert "Meek" not in render("minimal_turn1_system", call_instruction=call_instruction("auto"))
    hashes = used_files(("structured_turn1_system",))
    assert set(hashes) == {"structured_turn1_system", "pc_scaffold"}
    assert hashes["pc_scaffold"] == file_hash("pc_scaffold") and len(hashes["pc_scaffold"]) == 64


def test_decision_rules_are_one_text_shared_by_method_baseline_and_prose_control():
    """The prose control differs from the method by prose versus the typed object, not by the rules."""
    rules = render("decision_rules")
    assert "EVERY DAG" in rules and "Common cause" in rules and "Indirect causation" in rules
    analysis = CausalAnalysis.from_cpdag(analyse_premise(PREMISE).cpdag)
    turn1 = Completion(text="", tool_calls=[ToolCall("record_causal_analysis", analysis.model_dump_json())])
    shown = {
        "baseline_enhanced": first_request(CONDITIONS["baseline_enhanced"], INSTANCE, Decoding()).messages[0],
        "structured": second_request(CONDITIONS["structured"], INSTANCE, Decoding(), turn1).messages[-1],
        "twoturn_prose_pc": second_request(CONDITIONS["twoturn_prose_pc"], INSTANCE, Decoding(),
                                           Completion(text="The CPDAG is A -> C <- B.")).messages[-1],
    }
    for name, message in shown.items():
        assert message["content"].count(rules) == 1, name
        assert "decision_rules" in CONDITIONS[name].prompt_files()
    # What the prose control's answer turn says beyond the rules is one lead-in line and the answer format.
    prose = shown["twoturn_prose_pc"]["content"].replace(rules, "")
    assert prose == "Now decide the hypothesis against the CPDAG you described.\n\n\nEnd with a final line that is exactly `Answer: YES` or `Answer: NO`."


def test_call_instruction_follows_the_tool_choice_and_both_are_hashed():
    assert "required" in call_instruction("forced") and "required" not in call_instruction("auto")
    assert all("record_causal_analysis" in call_instruction(c) for c in CALL_INSTRUCTIONS)
    assert set(CALL_INSTRUCTIONS.values()) <= set(CONDITIONS["structured"].prompt_files())
    assert set(CALL_INSTRUCTIONS.values()) <= set(CONDITIONS["minimal_instruction"].prompt_files())
    assert not set(CALL_INSTRUCTIONS.values()) & set(CONDITIONS["baseline_enhanced"].prompt_files())
    with pytest.raises(ValueError, match="unknown tool choice"):
        call_instruction("sometimes")


def test_missing_field_and_missing_file_are_errors():
    with pytest.raises(PromptError, match="premise"):
        render("question_user", hypothesis="x")
    with pytest.raises(PromptError):
        raw("does_not_exist")
