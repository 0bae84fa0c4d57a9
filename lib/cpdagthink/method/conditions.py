"""Experimental conditions: which turns, prompts, tool and constraint each one uses (paper §3.2-3.3, §5).

A condition only *builds* requests and *reads* answers; the runner executes them. Between the two turns
of a tool condition, an :data:`Intervention` may replace the emitted object or drop the premise (the probes
of §6 use it); the replacement is shown to the model both as its own tool call and as the tool result.
A probed turn 2 is built exactly like an unprobed one: nothing in it says that a probe ran. Only the
object's serialisations differ (the turn-1 call's arguments, the DOT view and the JSON in the tool result),
and under ``drop_premise`` the premise text is deleted from the user turn (with the blank line after it).
The probe's note goes to the run record only.
"""

from __future__ import annotations

import hashlib
import random
import re
from dataclasses import dataclass, replace
from enum import Enum
from typing import Any, Callable

from ..causal.instance import Instance
from ..causal.premise import parse_premise
from .chat import Completion, Constraint, Request
from .decoding import Decoding
from .prompts import call_instruction, render, used_files
from .schema import TOOL_NAME, CausalAnalysis, analysis_regex, parse_analysis, tool_definition


class Flow(str, Enum):
    ONE_TURN = "one_turn"  # system + question -> answer
    TOOL = "tool"  # turn 1 emits the CausalAnalysis tool call, turn 2 answers against the tool result
    PROSE = "prose"  # turn 1 writes prose analysis, turn 2 answers against it


@dataclass(frozen=True)
class Condition:
    """One row of the paper's tables: its flow, prompt files and decoding switches."""

    name: str
    description: str
    flow: Flow
    system: str
    user: str
    follow_up: str | None = None
    constrained: bool = False
    thinking: bool = True

    def prompt_files(self) -> dict[str, str]:
        names = tuple(n for n in (self.system, self.user, self.follow_up) if n)
        return used_files(names)


_STRUCTURED = Condition(
    "structured",
    "Structured Thinking: CausalAnalysis tool call under the schema regex, then answer against it (§3.2)",
    Flow.TOOL,
    "structured_turn1_system",
    "structured_turn1_user",
    "structured_turn2_tool_result",
    constrained=True,
)
CONDITIONS: dict[str, Condition] = {
    c.name: c
    for c in (
        _STRUCTURED,
        Condition("baseline_enhanced", "BaselineEnhanced: one turn, PC scaffold, YES only if in every DAG (§3.3)",
                  Flow.ONE_TURN, "baseline_enhanced_system", "question_user"),
        Condition("twoturn_prose_pc", "TwoTurn-Prose-PC: same scaffold over two turns, prose intermediate, no tool (§3.3)",
                  Flow.PROSE, "twoturn_prose_turn1_system", "twoturn_prose_turn1_user", "twoturn_prose_turn2_user"),
        Condition("singleturn_structured", "Single-turn structured-prompt diagnostic: graph vocabulary, no object (§4.2)",
                  Flow.ONE_TURN, "singleturn_structured_system", "question_user"),
        Condition("baseline_no_thinking", "BaselineEnhanced with the model's thinking switched off (App. D, scale)",
                  Flow.ONE_TURN, "baseline_enhanced_system", "question_user", thinking=False),
        replace(_STRUCTURED, name="minimal_instruction", system="minimal_turn1_system", user="question_user",
                description="Ablation: the whole turn-1 instruction (system and user) minimal, no PC content; "
                            "same tool, schema and turn 2 (§5)"),
        replace(_STRUCTURED, name="no_thinking", thinking=False,
                description="Ablation: Structured Thinking with the model's thinking switched off (§5)"),
        replace(_STRUCTURED, name="no_constrained_decoding", constrained=False,
                description="Ablation: tool-call syntax kept, regex constraint removed (§5)"),
    )
}


def get_condition(name: str) -> Condition:
    if name not in CONDITIONS:
        raise ValueError(f"unknown condition {name!r}; choose one of {', '.join(CONDITIONS)}")
    return CONDITIONS[name]


# ------------------------------------------------------------------------------------------- turn two


@dataclass(frozen=True)
class Turn2Input:
    """What turn 2 gets: the object to show (None if none was recorded) and whether the premise stays."""

    analysis: CausalAnalysis | None
    include_premise: bool = True
    note: str = ""  # what the probe did: written to the run record, never shown to the model


Intervention = Callable[[Instance, CausalAnalysis | None, random.Random], Turn2Input]


def _first_messages(condition: Condition, instance: Instance, decoding: Decoding,
                    include_premise: bool = True) -> list[dict[str, Any]]:
    fields = {"premise": instance.premise if include_premise else "", "hypothesis": instance.hypothesis,
              "call_instruction": call_instruction(decoding.tool_choice)}
    # strip(): without the premise, the blank line that followed it goes too; with it, nothing changes.
    return [
        {"role": "system", "content": render(condition.system, **fields).strip()},
        {"role": "user", "content": render(condition.user, **fields).strip()},
    ]


def _request(condition: Condition, decoding: Decoding, messages: list[dict], max_tokens: int, **extra) -> Request:
    return Request(
        messages=tuple(messages),
        thinking=decoding.thinking and condition.thinking,
        max_tokens=max_tokens,
        temperature=decoding.temperature,
        top_p=decoding.top_p,
        top_k=decoding.top_k,
        min_p=decoding.min_p,
        seed=decoding.seed,
        **extra,
    )


def variables_of(instance: Instance) -> tuple[str, ...]:
    return parse_premise(instance.premise).variables


def first_request(condition: Condition, instance: Instance, decoding: Decoding) -> Request:
    """Turn 1 of any condition (the only turn of a one-turn condition)."""
    messages = _first_messages(condition, instance, decoding)
    if condition.flow is not Flow.TOOL:
        return _request(condition, decoding, messages, decoding.one_turn_budget if condition.flow is Flow.ONE_TURN
                        else decoding.max_tokens_turn1)
    variables = variables_of(instance) if decoding.narrow_regex else None
    constraint = Constraint(analysis_regex(variables), tool=TOOL_NAME) if condition.constrained else None
    return _request(
        condition, decoding, messages, decoding.max_tokens_turn1,
        tools=(tool_definition(),),
        tool_choice=TOOL_NAME if decoding.tool_choice == "forced" else "auto",
        constraint=constraint,
    )


@dataclass(frozen=True)
class Emitted:
    """Turn 1's tool call read back: the parsed object, or why it could not be parsed."""

    analysis: CausalAnalysis | None
    arguments: str | None
    error: str | None


def read_emitted(completion: Completion) -> Emitted:
    """Parse the CausalAnalysis tool call; every failure is recorded, none raises. An object that parses is
    kept as emitted, however inconsistent with the instance (self-loops, foreign or repeated names): turn 2
    shows it and the audit counts its violations (``schema`` module docstring)."""
    calls = [c for c in completion.tool_calls if c.name == TOOL_NAME]
    if not calls:
        return Emitted(None, None, f"no {TOOL_NAME} tool call in the output")
    try:
        return Emitted(parse_analysis(calls[0].arguments), calls[0].arguments, None)
    except (ValueError, TypeError) as error:  # json and pydantic errors are ValueErrors
        return Emitted(None, calls[0].arguments, f"{type(error).__name__}: {str(error).splitlines()[0]}")


def _carried(turn1: Completion) -> dict[str, Any]:
    """What turn 1's answer carries into the conversation besides its text: the service's reasoning items
    (Responses API), so the model keeps its own reasoning; nothing for other backends."""
    return {"reasoning_items": turn1.reasoning_items} if turn1.reasoning_items else {}


def second_request(
    condition: Condition, instance: Instance, decoding: Decoding, turn1: Completion, given: Turn2Input | None = None,
    emitted: Emitted | None = None,
) -> Request:
    """Turn 2 of a two-turn condition, built from turn 1's output (and an intervention's replacement).

    ``given`` (a probe's output) changes only the object shown and whether the premise stays; its note is
    never shown (module docstring). ``emitted`` is turn 1 already read back (the runner parses it once)."""
    if condition.flow is Flow.PROSE:
        if given is not None:
            raise ValueError(f"probes replace a tool call's object; {condition.name!r} makes none")
        messages = _first_messages(condition, instance, decoding)
        messages += [{"role": "assistant", "content": turn1.text, **_carried(turn1)},
                     {"role": "user", "content": render(condition.follow_up)}]
        return _request(condition, decoding, messages, decoding.max_tokens_answer)
    emitted = emitted or read_emitted(turn1)
    given = given or Turn2Input(emitted.analysis)
    messages = _first_messages(condition, instance, decoding, include_premise=given.include_premise)
    if given.analysis is not None:
        arguments = given.analysis.model_dump_json()
        result = render(condition.follow_up, status="parsed", dot=given.analysis.to_dot(), analysis_json=arguments)
    else:
        arguments = emitted.arguments or "{}"
        result = render(condition.follow_up, status=f"not usable: {emitted.error}", dot="(none)",
                        analysis_json=emitted.arguments or "(none)")
    # 9 alphanumerics (mistral_common's validators refuse anything else), fixed by the instance: a probed turn
    # 2 keeps the unprobed one's id.
    call_id = hashlib.sha256(instance.id.encode()).hexdigest()[:9]
    messages += [
        {"role": "assistant", "content": "", **_carried(turn1),
         "tool_calls": [{"id": call_id, "type": "function", "function": {"name": TOOL_NAME, "arguments": arguments}}]},
        {"role": "tool", "tool_call_id": call_id, "name": TOOL_NAME, "content": result},
    ]
    # The tool stays declared (same system prompt as turn 1, so its cached prefix is reused) but may not be
    # called again: turn 2 answers in text.
    return _request(condition, decoding, messages, decoding.max_tokens_answer, tools=(tool_definition(),),
                    tool_choice="none")


def intervene(intervention: Intervention | None, instance: Instance, emitted: CausalAnalysis | None,
              seed: int) -> Turn2Input | None:
    """Apply ``intervention`` to turn 1's parsed object with the instance's own random stream (seeded by the
    run seed and the instance id, so a resumed run, or ``cpdagthink prompt``, draws the same replacement)."""
    if intervention is None:
        return None
    return intervention(instance, emitted, random.Random(f"{seed}:{instance.id}"))


_ANSWER = re.compile(r"^\W*answer\W*:?\W*(yes|no)\W*$", re.I | re.M)


def parse_answer(text: str) -> str | None:
    """The final ``Answer: YES|NO`` line (the last one wins), or a bare YES/NO reply; else None (unparsed)."""
    found = _ANSWER.findall(text or "")
    if found:
        return found[-1].upper()
    bare = (text or "").strip().strip(".*").upper()
    return bare if bare in ("YES", "NO") else None


# The flexible reading (lm-evaluation-harness's flexible-extract beside its strict-match): an answer phrase
# ("the answer is yes", "Answer - **NO**") in any case, else a YES or NO written in capitals as a word.
_STATED = re.compile(r"\banswer\b\W{0,6}(?:is|would be)?\W{0,6}(yes|no)\b", re.I)
_SHOUTED = re.compile(r"\b(YES|NO)\b")


def parse_answer_flexible(text: str) -> str | None:
    """The answer a reviewer reads in a reply: :func:`parse_answer`'s when it finds one, else the last answer
    phrase (``The answer is YES.``), else the last YES or NO written in capitals; None when the reply states
    neither. An additional reading beside the strict one the records store: it never changes a record."""
    strict = parse_answer(text)
    if strict:
        return strict
    for pattern in (_STATED, _SHOUTED):
        found = pattern.findall(text or "")
        if found:
            return found[-1].upper()
    return None


def describe(condition: Condition) -> dict[str, Any]:
    """The condition as plain JSON for run metadata."""
    return {**{k: (v.value if isinstance(v, Enum) else v) for k, v in condition.__dict__.items()},
            "prompt_hashes": condition.prompt_files()}
