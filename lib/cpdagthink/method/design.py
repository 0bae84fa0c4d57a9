"""The paper's bundled components as factors of one design: each condition of the two-turn method is a point.

The paper's controls remove one component at a time (§5) and say that the rest stay bundled (§8). Here each
component is a factor whose first level is the paper's:

- ``intermediate``: the typed ``CausalAnalysis`` tool object | lightly structured prose (the same six sections as
  headed plain text, no tool, no schema; turn 2 shows the text back) | free prose (the §3.3 prose control);
- ``constraint``: the schema regex | none (tool-call syntax kept, the §5 ablation);
- ``field_names``: the paper's | neutral ``field_a`` ... ``field_f`` (:mod:`cpdagthink.method.field_names`);
- ``delivery``: turn 2 gets the object as a tool result with its DOT view | the same text in a user message;
- ``instruction``: turn 2's E.2 template (the per-relation decision rules) | the bare question.

The last four apply to the typed object only: a prose arm is one point, at the paper's turn-2 settings (its text
comes back in a user message, under the E.2 rules). A point is named by its levels (``typed.regex.neutral.tool.e2``)
unless it is one of today's conditions, which keep their names (:data:`NAMED`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from itertools import product
from typing import Iterable, Sequence

FACTORS: dict[str, tuple[str, ...]] = {
    "intermediate": ("typed", "light_prose", "free_prose"),
    "constraint": ("regex", "none"),
    "field_names": ("paper", "neutral"),
    "delivery": ("tool", "user"),
    "instruction": ("e2", "bare"),
}
BINARY = ("constraint", "field_names", "delivery", "instruction")  # the typed arm's factors
LEVEL_WORDS: dict[str, dict[str, str]] = {
    "intermediate": {"typed": "typed tool object", "light_prose": "lightly structured prose",
                     "free_prose": "free prose"},
    "constraint": {"regex": "schema regex", "none": "no constraint"},
    "field_names": {"paper": "paper's field names", "neutral": "neutral field names"},
    "delivery": {"tool": "tool result", "user": "user message"},
    "instruction": {"e2": "E.2 template", "bare": "bare question"},
}


@dataclass(frozen=True)
class Point:
    """One point of the design; every level defaults to the paper's."""

    intermediate: str = "typed"
    constraint: str = "regex"
    field_names: str = "paper"
    delivery: str = "tool"
    instruction: str = "e2"

    def __post_init__(self) -> None:
        for f in fields(self):
            if getattr(self, f.name) not in FACTORS[f.name]:
                raise ValueError(f"{f.name} must be one of {', '.join(FACTORS[f.name])}, "
                                 f"got {getattr(self, f.name)!r}")
        if self.intermediate != "typed" and self.levels()[1:] != PROSE_LEVELS:
            raise ValueError(f"{self.intermediate} is one point, at the paper's turn-2 settings: only the typed "
                             "object varies the constraint, field names, delivery and instruction")

    def levels(self) -> tuple[str, ...]:
        return tuple(asdict(self).values())

    @property
    def name(self) -> str:
        """Today's condition name for this point, else its levels joined by dots."""
        return NAMED_BY_POINT.get(self, ".".join(self.levels()))

    def paper_level(self, factor: str) -> bool:
        return getattr(self, factor) == FACTORS[factor][0]


PROSE_LEVELS = ("none", "paper", "user", "e2")  # a prose arm's fixed settings
NAMED: dict[str, Point] = {
    "structured": Point(),
    "no_constrained_decoding": Point(constraint="none"),
    "twoturn_prose_pc": Point("free_prose", *PROSE_LEVELS),
    "light_prose": Point("light_prose", *PROSE_LEVELS),
}
NAMED_BY_POINT = {p: n for n, p in NAMED.items()}


def typed_cells(factors: Sequence[str] = BINARY, design: str = "full") -> list[Point]:
    """The typed arm's cells: every combination of ``factors`` (the others at the paper's level), or with
    ``design="half"`` the resolution-IV half fraction of the four binary factors (the cells whose levels multiply
    to +1 in ±1 coding, I = ABCD: no main effect is aliased with another or with a two-way interaction; each
    two-way interaction is aliased with its complement, AB = CD). The paper's own point comes first."""
    unknown = [f for f in factors if f not in BINARY]
    if unknown:
        raise ValueError(f"unknown factor {', '.join(unknown)}; the typed arm's factors are {', '.join(BINARY)}")
    if design not in ("full", "half"):
        raise ValueError(f"design must be 'full' or 'half', got {design!r}")
    if design == "half" and sorted(factors) != sorted(BINARY):
        raise ValueError("the half fraction is defined on all four binary factors: give factors=None with it")
    cells = []
    for combo in product((0, 1), repeat=len(factors)):
        if design == "half" and sum(combo) % 2:
            continue
        cells.append(Point(**{f: FACTORS[f][k] for f, k in zip(factors, combo)}))
    return cells


def design_points(factors: Sequence[str] | None = None, design: str = "full", prose: bool = True) -> list[Point]:
    """The chapter's cells: the typed arm's (:func:`typed_cells`) and, with ``prose``, the two prose arms."""
    cells = typed_cells(tuple(factors or BINARY), design)
    return cells + ([NAMED["light_prose"], NAMED["twoturn_prose_pc"]] if prose else [])


def point_named(name: str) -> Point | None:
    """The point a condition name stands for (today's names and dotted level names), else None."""
    if name in NAMED:
        return NAMED[name]
    parts = name.split(".")
    if len(parts) != len(FACTORS):
        return None
    try:
        point = Point(*parts)
    except ValueError:
        return None
    return point if point.name == name else None  # a named point is reached by its name only


def refusal(point: Point, applies_regex: bool = True, tools: bool = True) -> str | None:
    """Why a backend cannot apply ``point`` (None when it can), from what the backend answers for itself
    (``Backend.applies_regex``, ``Backend.tools``): a regex cell needs a backend that applies the regex (a generic
    OpenAI-compatible server applies none unless ``regex_mode=vllm``), and the typed object is a tool call. A
    refused point is left out with this reason, never run as another."""
    if point.intermediate == "typed" and point.constraint == "regex" and not applies_regex:
        return ("this backend does not apply the schema regex with these options (an OpenAI-compatible server "
                "needs regex_mode=vllm): this cell would run unconstrained")
    if point.intermediate == "typed" and not tools:
        return "this backend has no tools: the typed object is a tool call"
    return None


def level_of(points: Iterable[Point], factor: str) -> list[str]:
    """The levels of ``factor`` the points take, in the factor's order."""
    taken = {getattr(p, factor) for p in points}
    return [level for level in FACTORS[factor] if level in taken]
