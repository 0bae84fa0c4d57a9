"""Conditions as points of a design: today's conditions build the same requests, byte for byte, and every
factor changes only what it names."""

from __future__ import annotations

import json
import re

import pytest

from condition_requests import GOLDEN, condition_requests, hashes, rows
from cpdagthink.method.chat import Completion, ToolCall
from cpdagthink.method.conditions import (CONDITIONS, describe, first_request, get_condition, point_of, read_emitted,
                                          second_request)
from cpdagthink.method.decoding import Decoding
from cpdagthink.method.design import NAMED, Point, design_points, point_named, refusal, typed_cells
from cpdagthink.method.schema import TOOL_NAME


@pytest.fixture(scope="module")
def instances(test_csv):
    return rows(test_csv)


def test_todays_conditions_build_the_requests_they_built_before(instances):
    golden = json.loads(GOLDEN.read_text())
    assert hashes(instances, list(golden)) == golden
    assert set(golden) < set(CONDITIONS)  # every condition of main is still there, under its name


def test_todays_conditions_describe_themselves_as_before():
    # describe() enters the run identity: a field the design added at the paper's level must not appear in it
    for name in ("structured", "no_constrained_decoding", "twoturn_prose_pc", "baseline_enhanced"):
        assert not {"field_names", "delivery", "repair"} & set(describe(CONDITIONS[name]))
    assert describe(CONDITIONS["typed.regex.neutral.tool.e2"])["field_names"] == "neutral"


def test_todays_conditions_are_named_points():
    assert point_of(CONDITIONS["structured"]) == Point()
    assert point_of(CONDITIONS["no_constrained_decoding"]) == Point(constraint="none")
    assert point_of(CONDITIONS["twoturn_prose_pc"]) == NAMED["twoturn_prose_pc"]
    assert point_of(CONDITIONS["no_thinking"]) is None and point_of(CONDITIONS["baseline_enhanced"]) is None
    assert point_named("typed.regex.paper.tool.e2") is None  # the paper's point is reached by its own name only
    assert Point().name == "structured"


def test_the_full_factorial_and_the_half_fraction():
    full, half = design_points(), design_points(design="half")
    assert len(full) == 18 and len(half) == 10 and full[0] == Point()
    cells = [[int(not p.paper_level(f)) for f in ("constraint", "field_names", "delivery", "instruction")]
             for p in typed_cells(design="half")]
    # resolution IV: every main effect balanced, and orthogonal to every two-way interaction
    for a in range(4):
        assert sum(c[a] for c in cells) == 4
        for b in range(4):
            for c2 in range(b + 1, 4):
                if a not in (b, c2):
                    signs = [(2 * c[a] - 1) * (2 * c[b] - 1) * (2 * c[c2] - 1) for c in cells]
                    assert sum(signs) == 0
    assert [p.name for p in typed_cells(["instruction"])] == ["structured", "typed.regex.paper.tool.bare"]
    with pytest.raises(ValueError, match="unknown factor"):
        typed_cells(["colour"])
    with pytest.raises(ValueError, match="one point"):
        Point("light_prose")


def _parsed_turn1(instance, arguments: str) -> Completion:
    return Completion(text="", tool_calls=[ToolCall(TOOL_NAME, arguments)])


def test_neutral_field_names_reach_schema_regex_instruction_and_tool_result(instances):
    instance = instances[1]
    paper, neutral = CONDITIONS["structured"], CONDITIONS["typed.regex.neutral.tool.e2"]
    first = first_request(neutral, instance, Decoding())
    text = json.dumps(first.to_json())
    assert "skeleton" not in json.dumps(first.tools) and "`field_b`: every adjacent pair" in text
    assert "`skeleton`" not in text and "field_f" in first.constraint.regex
    built = condition_requests("structured", instance, Decoding())
    arguments = built["turn2:parsed"].messages[2]["tool_calls"][0]["function"]["arguments"]
    renamed = arguments.replace('"variables"', '"field_a"').replace('"skeleton"', '"field_b"').replace(
        '"separating_sets"', '"field_c"').replace('"v_structures"', '"field_d"').replace(
        '"directed_edges"', '"field_e"').replace('"undirected_edges"', '"field_f"')
    assert re.fullmatch(first.constraint.regex, renamed) and not re.fullmatch(first.constraint.regex, arguments)
    emitted = read_emitted(_parsed_turn1(instance, renamed), "neutral")
    assert emitted.error is None
    assert read_emitted(_parsed_turn1(instance, arguments), "neutral").analysis is None  # paper names refused
    turn2 = second_request(neutral, instance, Decoding(), _parsed_turn1(instance, renamed))
    assert turn2.messages[-1]["role"] == "tool" and '"field_e"' in turn2.messages[-1]["content"]
    assert "directed_edges" not in turn2.messages[-1]["content"]
    paper2 = second_request(paper, instance, Decoding(), _parsed_turn1(instance, arguments))
    # the DOT view is the same under both names
    assert paper2.messages[-1]["content"].split("Fields:")[0] == turn2.messages[-1]["content"].split("Fields:")[0]


def test_delivery_and_instruction_change_only_turn_two(instances):
    instance = instances[2]
    turn1 = condition_requests("structured", instance, Decoding())["turn2:parsed"].messages[2]
    answer = _parsed_turn1(instance, turn1["tool_calls"][0]["function"]["arguments"])
    paper = second_request(CONDITIONS["structured"], instance, Decoding(), answer)
    user = second_request(CONDITIONS["typed.regex.paper.user.e2"], instance, Decoding(), answer)
    bare = second_request(CONDITIONS["typed.regex.paper.tool.bare"], instance, Decoding(), answer)
    assert first_request(CONDITIONS["typed.regex.paper.user.bare"], instance, Decoding()) == \
        first_request(CONDITIONS["structured"], instance, Decoding())
    assert [m["role"] for m in user.messages] == ["system", "user", "assistant", "user"]
    assert user.messages[-1]["content"] == paper.messages[-1]["content"]  # the same text, another role
    assert user.messages[2]["content"] == answer.tool_calls[0].arguments
    assert "Direct causation" in paper.messages[-1]["content"]
    assert "Direct causation" not in bare.messages[-1]["content"] and "Answer: YES" in bare.messages[-1]["content"]
    assert bare.messages[-1]["content"].split("Fields:")[0] == paper.messages[-1]["content"].split("Fields:")[0]


def test_light_prose_shows_its_text_back(instances):
    instance = instances[0]
    condition = get_condition("light_prose")
    first = first_request(condition, instance, Decoding())
    assert not first.tools and "Separating sets:" in first.messages[0]["content"]
    turn2 = second_request(condition, instance, Decoding(), Completion(text="Variables: A, B, C\nSkeleton: A - B"))
    assert turn2.messages[-1]["content"].startswith("Recorded CPDAG:\nVariables: A, B, C")
    assert turn2.messages[2] == {"role": "assistant", "content": "Variables: A, B, C\nSkeleton: A - B"}


def test_a_point_a_backend_cannot_apply_is_refused_with_its_reason():
    assert "regex_mode=vllm" in refusal(Point(), applies_regex=False)
    assert refusal(Point()) is None
    assert refusal(Point(constraint="none"), applies_regex=False) is None
    assert "no tools" in refusal(Point(constraint="none"), tools=False)
    assert refusal(NAMED["light_prose"], applies_regex=False, tools=False) is None
