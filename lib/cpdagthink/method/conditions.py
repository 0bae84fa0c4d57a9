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
from functools import lru_cache
from itertools import product
from typing import Any, Callable

from ..causal.instance import Instance
from ..causal.premise import parse_premise
from .chat import Completion, Constraint, Request
from .decoding import Decoding
from .design import BINARY, FACTORS, Point, point_named
from .field_names import neutral_json, neutral_regex, neutral_text, neutral_tool_definition, paper_arguments
from .prompts import call_instruction, render, used_files
from .schema import TOOL_NAME, CausalAnalysis, analysis_regex, parse_analysis, tool_definition


class Flow(str, Enum):
    ONE_TURN = "one_turn"  # system + question -> answer
    TOOL = "tool"  # turn 1 emits the CausalAnalysis tool call, turn 2 answers against the tool result
    PROSE = "prose"  # turn 1 writes prose analysis, turn 2 answers against it


@dataclass(frozen=True)
class Condition:
    """One row of the paper's tables: its flow, prompt files and decoding switches, and where it sits in the
    design of the method's components (:mod:`cpdagthink.method.design`): the object's field names, how turn 2
    receives it, and whether a repair round runs between the turns. Those three keep the paper's settings
    unless a design point sets them, and :func:`describe` names them only then, so today's conditions describe
    (and identify their runs) exactly as before."""

    name: str
    description: str
    flow: Flow
    system: str
    user: str
    follow_up: str | None = None
    constrained: bool = False
    thinking: bool = True
    field_names: str = "paper"  # paper | neutral (field_a ... field_f)
    delivery: str = "tool"  # tool: turn 2 gets a tool result; user: the same text in a user message
    repair: bool = False  # the validator's findings go back once and the model may correct its object

    def prompt_files(self) -> dict[str, str]:
        names = tuple(n for n in (self.system, self.user, self.follow_up, REPAIR_RESULT if self.repair else None)
                      if n)
        return used_files(names)


REPAIR_RESULT = "structured_repair_tool_result"
_PAPER_SETTINGS = {"field_names": "paper", "delivery": "tool", "repair": False}


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
        Condition("light_prose", "Lightly structured prose: the object's six sections as headed plain text, no tool "
                  "and no schema; turn 2 shows the text back (§8's suggestion)", Flow.PROSE,
                  "light_prose_turn1_system", "light_prose_turn1_user", "light_prose_turn2_user"),
        replace(_STRUCTURED, name="structured_repair", repair=True,
                description="Structured Thinking with a repair round: the validator's findings about the emitted "
                            "graph go back once and the model may correct it before turn 2 (beyond the paper)"),
    )
}


def _typed(point: Point) -> Condition:
    """Structured Thinking's turn 1 under the point's constraint and field names, and turn 2 under its delivery
    and instruction."""
    words = ", ".join(f"{factor} {getattr(point, factor)}" for factor in FACTORS)
    return replace(_STRUCTURED, name=point.name, description=f"Design point: {words}",
                   constrained=point.constraint == "regex", field_names=point.field_names, delivery=point.delivery,
                   follow_up="structured_turn2_tool_result" if point.instruction == "e2" else "structured_turn2_bare")


CONDITIONS.update({p.name: _typed(p) for p in (Point("typed", *levels) for levels in product(
    *(FACTORS[f] for f in BINARY))) if p.name not in CONDITIONS})


def design_condition(point: Point) -> Condition:
    """The condition a design point runs as: today's condition where the point is one, else the typed
    object's point (a prose arm is always a named condition)."""
    return CONDITIONS[point.name]


def point_of(condition: Condition) -> Point | None:
    """The design point ``condition`` is (None for a condition outside the design: one turn, another turn-1
    prompt, thinking off, a repair round): a typed condition must build exactly what the point's own settings
    build, whatever its name and description."""
    point = point_named(condition.name)
    if point is None or point.intermediate != "typed":
        return point
    built = _typed(point)
    return point if replace(built, name="", description="") == replace(condition, name="", description="") else None


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
        {"role": "system", "content": _named(condition, render(condition.system, **fields).strip())},
        {"role": "user", "content": _named(condition, render(condition.user, **fields).strip())},
    ]


def _named(condition: Condition, text: str) -> str:
    """An instruction under the condition's field names (neutral names replace the backticked paper ones)."""
    return neutral_text(text) if condition.field_names == "neutral" else text


def _tool(condition: Condition) -> dict[str, Any]:
    return neutral_tool_definition() if condition.field_names == "neutral" else tool_definition()


def _regex(condition: Condition, variables: tuple[str, ...] | None) -> str:
    return neutral_regex(variables) if condition.field_names == "neutral" else analysis_regex(variables)


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
    return _premise_variables(instance.premise)


@lru_cache(maxsize=8192)
def _premise_variables(premise: str) -> tuple[str, ...]:
    """A premise's variables, kept: the runs of a grid pose the same rows, each a request or more a row."""
    return parse_premise(premise).variables


def first_request(condition: Condition, instance: Instance, decoding: Decoding) -> Request:
    """Turn 1 of any condition (the only turn of a one-turn condition)."""
    messages = _first_messages(condition, instance, decoding)
    if condition.flow is not Flow.TOOL:
        return _request(condition, decoding, messages, decoding.one_turn_budget if condition.flow is Flow.ONE_TURN
                        else decoding.max_tokens_turn1)
    return _request(condition, decoding, messages, decoding.max_tokens_turn1, **_call_settings(condition, instance,
                                                                                               decoding))


def _call_settings(condition: Condition, instance: Instance, decoding: Decoding) -> dict[str, Any]:
    """The tool, tool choice and constraint of a request that asks for the object (turn 1, a repair round)."""
    variables = variables_of(instance) if decoding.narrow_regex else None
    constraint = Constraint(_regex(condition, variables), tool=TOOL_NAME) if condition.constrained else None
    return {"tools": (_tool(condition),), "tool_choice": TOOL_NAME if decoding.tool_choice == "forced" else "auto",
            "constraint": constraint}


@dataclass(frozen=True)
class Emitted:
    """Turn 1's tool call read back: the parsed object, or why it could not be parsed."""

    analysis: CausalAnalysis | None
    arguments: str | None
    error: str | None


def read_emitted(completion: Completion, field_names: str = "paper") -> Emitted:
    """Parse the CausalAnalysis tool call; every failure is recorded, none raises. An object that parses is
    kept as emitted, however inconsistent with the instance (self-loops, foreign or repeated names): turn 2
    shows it and the audit counts its violations (``schema`` module docstring). Under neutral field names the
    arguments are read back under the paper's first (:func:`field_names.paper_arguments`)."""
    calls = [c for c in completion.tool_calls if c.name == TOOL_NAME]
    if not calls:
        return Emitted(None, None, f"no {TOOL_NAME} tool call in the output")
    try:
        arguments = paper_arguments(calls[0].arguments) if field_names == "neutral" else calls[0].arguments
        return Emitted(parse_analysis(arguments), calls[0].arguments, None)
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
    never shown (module docstring). ``emitted`` is turn 1 already read back (the runner parses it once; after a
    repair round, the corrected object). A prose follow-up that names ``$analysis_text`` shows turn 1's text
    back (lightly structured prose); the others only follow it."""
    if condition.flow is Flow.PROSE:
        if given is not None:
            raise ValueError(f"probes replace a tool call's object; {condition.name!r} makes none")
        messages = _first_messages(condition, instance, decoding)
        messages += [{"role": "assistant", "content": turn1.text, **_carried(turn1)},
                     {"role": "user", "content": render(condition.follow_up, analysis_text=turn1.text.strip())}]
        return _request(condition, decoding, messages, decoding.max_tokens_answer)
    emitted = emitted or read_emitted(turn1, condition.field_names)
    given = given or Turn2Input(emitted.analysis)
    messages = _first_messages(condition, instance, decoding, include_premise=given.include_premise)
    arguments, result = _shown(condition, given, emitted)
    messages += _delivered(condition, instance, turn1, arguments, result)
    # The tool stays declared (same system prompt as turn 1, so its cached prefix is reused) but may not be
    # called again: turn 2 answers in text.
    return _request(condition, decoding, messages, decoding.max_tokens_answer, tools=(_tool(condition),),
                    tool_choice="none")


def _shown(condition: Condition, given: Turn2Input, emitted: Emitted) -> tuple[str, str]:
    """The object's arguments as turn 2 shows them (under the condition's field names) and the result text."""
    if given.analysis is not None:
        neutral = condition.field_names == "neutral"
        arguments = neutral_json(given.analysis) if neutral else given.analysis.model_dump_json()
        result = render(condition.follow_up, status="parsed", dot=given.analysis.to_dot(), analysis_json=arguments)
        return arguments, _named(condition, result)
    result = render(condition.follow_up, status=f"not usable: {emitted.error}", dot="(none)",
                    analysis_json=emitted.arguments or "(none)")
    return emitted.arguments or "{}", _named(condition, result)


def _call_id(instance: Instance) -> str:
    # 9 alphanumerics (mistral_common's validators refuse anything else), fixed by the instance: a probed turn
    # 2 keeps the unprobed one's id.
    return hashlib.sha256(instance.id.encode()).hexdigest()[:9]


def _delivered(condition: Condition, instance: Instance, turn1: Completion, arguments: str,
               result: str) -> list[dict[str, Any]]:
    """Turn 1's call and what answers it: a tool message (the paper's), or under ``delivery="user"`` the call's
    arguments as the assistant's text and the same result text in a user message (no tool role)."""
    if condition.delivery == "user":
        return [{"role": "assistant", "content": arguments, **_carried(turn1)}, {"role": "user", "content": result}]
    call_id = _call_id(instance)
    return [
        {"role": "assistant", "content": "", **_carried(turn1),
         "tool_calls": [{"id": call_id, "type": "function", "function": {"name": TOOL_NAME, "arguments": arguments}}]},
        {"role": "tool", "tool_call_id": call_id, "name": TOOL_NAME, "content": result},
    ]


# ----------------------------------------------------------------------------------------- repair round


def repair_findings(instance: Instance, emitted: Emitted) -> list[str]:
    """What the certified validator finds wrong with the emitted graph (:func:`validate.violations` against the
    premise's variable names only: never the premise's facts, the reference CPDAG or the answer), or why the
    object could not be read; empty for a valid CPDAG, which gets no repair round."""
    from .validate import violations

    if emitted.analysis is None:
        return [f"not usable: {emitted.error}"]
    return [str(v) for v in violations(emitted.analysis, variables=variables_of(instance))]


def repair_request(condition: Condition, instance: Instance, decoding: Decoding, turn1: Completion, emitted: Emitted,
                   findings: list[str]) -> Request:
    """The repair round (``structured_repair``): turn 1's call answered once by the validator's findings, and a
    second chance to call the tool, under turn 1's tool, choice, constraint and budget."""
    status = "parsed" if emitted.analysis is not None else "not usable"
    result = render(REPAIR_RESULT, status=status, findings="\n".join(f"- {f}" for f in findings))
    messages = _first_messages(condition, instance, decoding)
    messages += _delivered(replace(condition, delivery="tool"), instance, turn1, emitted.arguments or "{}",
                           _named(condition, result))
    return _request(condition, decoding, messages, decoding.max_tokens_turn1,
                    **_call_settings(condition, instance, decoding))


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
    """The condition as plain JSON for run metadata. A design setting at the paper's level is left out, so a
    condition the design left as it was describes itself, and identifies its runs, as before the design."""
    return {**{k: (v.value if isinstance(v, Enum) else v) for k, v in condition.__dict__.items()
               if k not in _PAPER_SETTINGS or v != _PAPER_SETTINGS[k]},
            "prompt_hashes": condition.prompt_files()}
