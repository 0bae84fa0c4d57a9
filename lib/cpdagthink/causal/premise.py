"""Corr2Cause text <-> typed facts.

A premise states, for a closed system of variables, which pairs correlate and every (conditional)
independence; anything not listed as an independence is a dependence (closed world). A hypothesis names
one of four relations between two variables. This module parses both into typed objects and writes them
back in the dataset's own wording, so generated instances read exactly like the hub's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import Enum
from itertools import combinations
from ..errors import CpdagthinkError



class PremiseError(CpdagthinkError, ValueError):
    """Raised for premise or hypothesis text that cannot be read unambiguously."""

    def __init__(self, message: str, sentence: str):
        super().__init__(f"{message}: {sentence!r}")
        self.sentence = sentence


class UnknownVariableError(PremiseError):
    """A sentence names a variable that the premise did not declare."""


class UnparsableSentenceError(PremiseError):
    """A sentence matches none of the known statement forms."""


class ContradictoryFactsError(PremiseError):
    """Two statements cannot both hold (e.g. a pair both correlated and marginally independent)."""


Pair = frozenset[str]


def pair(x: str, y: str) -> Pair:
    return frozenset((x, y))


@dataclass(frozen=True)
class Facts:
    """The statistical facts of one premise.

    ``independencies`` maps an unordered pair to every conditioning set that renders it independent
    (the empty set for a marginal independence). Pairs absent from it are dependent given every set.
    """

    variables: tuple[str, ...]
    correlations: frozenset[Pair]
    independencies: dict[Pair, frozenset[frozenset[str]]] = field(hash=False)

    def independent(self, x: str, y: str, given: frozenset[str] | set[str] = frozenset()) -> bool:
        """The closed-world independence oracle: True iff ``x _||_ y | given`` was stated."""
        return frozenset(given) in self.independencies.get(pair(x, y), frozenset())

    def statements(self) -> frozenset[tuple[Pair, frozenset[str]]]:
        """Every stated independence as (pair, conditioning set), for comparing fact sets."""
        return frozenset((p, s) for p, sets in self.independencies.items() for s in sets)


class Relation(str, Enum):
    """The four hypothesis relations of Corr2Cause (see the dataset semantics note)."""

    DIRECT_CAUSE = "direct_cause"
    INDIRECT_CAUSE = "indirect_cause"
    COLLIDER = "collider"
    CONFOUNDER = "confounder"

    @property
    def symmetric(self) -> bool:
        return self in (Relation.COLLIDER, Relation.CONFOUNDER)


@dataclass(frozen=True)
class Query:
    """A typed hypothesis: ``relation`` between ``x`` and ``y`` (ordered for causal relations)."""

    relation: Relation
    x: str
    y: str


# ---------------------------------------------------------------------------------------------- parsing

_VAR = r"([A-Za-z])"
_HEADER = re.compile(
    r"^(?:Premise:\s*)?Suppose there is a closed system of (\d+) variables?, (.+?)\.\s*"
    r"All the statistical relations among these \d+ variables? are as follows:\s*(.*)$",
    re.S,
)
_CORRELATES = re.compile(rf"^{_VAR} correlates with {_VAR}$")
_MARGINAL = re.compile(rf"^{_VAR} is independent of {_VAR}$")
_CONDITIONAL = re.compile(rf"^{_VAR} and {_VAR} are independent given (.+)$")

# The Corr2Cause generator's two template sets (its ``Verbalizer``), relation by relation. Its six properties
# are four relations here: "child" and "non-child descendant" are "parent" and "non-parent ancestor" with the
# two variables swapped, so ``{x}`` is always the cause. The hub's test split uses the original templates
# (the indirect relation in both of its wordings); its Paraphrase-OOD split uses the paraphrased ones, where
# ancestor and descendant read alike. Matching is on the text, never on the dataset's template column.
HUB_WORDINGS: dict[Relation, tuple[str, ...]] = {
    Relation.DIRECT_CAUSE: ("{x} directly causes {y}.",),
    Relation.INDIRECT_CAUSE: ("{x} causes something else which causes {y}.", "{x} is a cause for {y}, but not a direct one."),
    Relation.COLLIDER: ("There exists at least one collider (i.e., common effect) of {x} and {y}.",),
    Relation.CONFOUNDER: ("There exists at least one confounder (i.e., common cause) of {x} and {y}.",),
}
PARAPHRASE_WORDINGS: dict[Relation, str] = {
    Relation.DIRECT_CAUSE: "{x} directly affects {y}.",
    Relation.INDIRECT_CAUSE: "{x} influences {y} through some mediator(s).",
    Relation.COLLIDER: "{x} and {y} together cause some other variable(s).",
    Relation.CONFOUNDER: "Some variable(s) cause(s) both {x} and {y}.",
}
# Every wording the parser reads: the hub's first (index 0 is the test split's usual one), then the paraphrase.
HYPOTHESIS_WORDINGS: dict[Relation, tuple[str, ...]] = {
    relation: HUB_WORDINGS[relation] + (PARAPHRASE_WORDINGS[relation],) for relation in Relation
}


def _wording_regex(wording: str) -> re.Pattern[str]:
    body = re.escape(wording).replace(r"\{x\}", "(?P<x>[A-Za-z])").replace(r"\{y\}", "(?P<y>[A-Za-z])")
    return re.compile(f"^{body}$", re.I)


_HYPOTHESIS_PATTERNS = [
    (relation, _wording_regex(w)) for relation, ws in HYPOTHESIS_WORDINGS.items() for w in ws
]


def split_input(text: str) -> tuple[str, str]:
    """Split a Corr2Cause ``input`` cell into (premise, hypothesis)."""
    head, sep, tail = text.partition("Hypothesis:")
    if not sep:
        raise UnparsableSentenceError("no 'Hypothesis:' part", text[-120:])
    return head.strip(), tail.strip()


def _declared_variables(listing: str) -> tuple[str, ...]:
    names = [n.strip() for n in re.split(r",\s*|\s+and\s+", listing) if n.strip()]
    if not all(re.fullmatch(_VAR, n) for n in names):
        raise UnparsableSentenceError("variables must be single letters", listing)
    if len(set(names)) != len(names):
        raise ContradictoryFactsError("a variable is declared twice", listing)
    return tuple(names)


def _sentences(body: str) -> list[str]:
    return [s.strip() for s in re.split(r"\.(?:\s+|$)", body.strip()) if s.strip()]


def _header(text: str) -> tuple[tuple[str, ...], str]:
    """The variables a premise declares (checked against the count it announces) and its statements."""
    header = _HEADER.match(text.strip())
    if header is None:
        raise UnparsableSentenceError("not a Corr2Cause premise header", text[:120])
    count, listing, body = int(header.group(1)), header.group(2), header.group(3)
    variables = _declared_variables(listing)
    if len(variables) != count:
        raise ContradictoryFactsError(f"header announces {count} variables but lists {len(variables)}", listing)
    return variables, body


def declared_variables(text: str) -> tuple[str, ...]:
    """The variables a premise's header declares; raises a :class:`PremiseError` when it has none."""
    return _header(text)[0]


def parse_premise(text: str) -> Facts:
    """Parse premise text into :class:`Facts`.

    Accepts any single-letter variable names, any statement order and any number of variables.
    Raises a :class:`PremiseError` subclass naming the offending sentence; nothing is guessed.
    """
    variables, body = _header(text)
    known = set(variables)

    def check(sentence: str, *names: str) -> None:
        unknown = [n for n in names if n not in known]
        if unknown:
            raise UnknownVariableError(f"unknown variable {unknown[0]}", sentence)
        if len(set(names)) != len(names):
            raise ContradictoryFactsError("a variable appears twice in one statement", sentence)

    correlations: set[Pair] = set()
    independencies: dict[Pair, set[frozenset[str]]] = {}
    for sentence in _sentences(body):
        statement = re.sub(r"^However,\s*", "", sentence)
        if m := _CORRELATES.match(statement):
            check(sentence, *m.groups())
            correlations.add(pair(*m.groups()))
        elif m := _MARGINAL.match(statement):
            check(sentence, *m.groups())
            independencies.setdefault(pair(*m.groups()), set()).add(frozenset())
        elif m := _CONDITIONAL.match(statement):
            x, y, given_text = m.groups()
            given = [g.strip() for g in re.split(r",\s*|\s+and\s+", given_text)]
            if not all(re.fullmatch(_VAR, g) for g in given):
                raise UnparsableSentenceError("conditioning set is not a list of variables", sentence)
            check(sentence, x, y, *given)
            independencies.setdefault(pair(x, y), set()).add(frozenset(given))
        else:
            raise UnparsableSentenceError("unrecognised statement", sentence)

    for p in correlations:
        if frozenset() in independencies.get(p, ()):
            a, b = sorted(p)
            raise ContradictoryFactsError("pair stated both correlated and independent", f"{a} and {b}")
    return Facts(
        variables=variables,
        correlations=frozenset(correlations),
        independencies={p: frozenset(s) for p, s in independencies.items()},
    )


def parse_hypothesis(text: str, variables: tuple[str, ...] | None = None) -> Query:
    """Parse hypothesis text into a :class:`Query`; the relation is read from the wording."""
    sentence = text.strip().removeprefix("Hypothesis:").strip()
    if not sentence.endswith("."):
        sentence += "."
    for relation, pattern in _HYPOTHESIS_PATTERNS:
        if m := pattern.match(sentence):
            x, y = m.group("x"), m.group("y")
            if variables is not None:
                for v in (x, y):
                    if v not in variables:
                        raise UnknownVariableError(f"unknown variable {v}", sentence)
            if x == y:
                raise ContradictoryFactsError("a hypothesis relates a variable to itself", sentence)
            return Query(relation, x, y)
    raise UnparsableSentenceError("unrecognised hypothesis", sentence)


# ------------------------------------------------------------------------------------------ verbalising


def _join(names: list[str] | tuple[str, ...]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def verbalise_premise(facts: Facts) -> str:
    """Write facts in the dataset's wording: correlations, then 'However,' and every independence."""
    order = {v: i for i, v in enumerate(facts.variables)}

    def ordered(p: Pair) -> list[str]:
        return sorted(p, key=order.__getitem__)

    n = len(facts.variables)
    parts = [
        f"Premise: Suppose there is a closed system of {n} variables, {_join(facts.variables)}.",
        f"All the statistical relations among these {n} variables are as follows:",
    ]
    for x, y in combinations(facts.variables, 2):
        if pair(x, y) in facts.correlations:
            parts.append(f"{x} correlates with {y}.")
    statements = []
    for x, y in combinations(facts.variables, 2):
        for given in sorted(facts.independencies.get(pair(x, y), ()), key=lambda s: sorted(s, key=order.__getitem__)):
            if given:
                cond = _join(sorted(given, key=order.__getitem__))
                statements.append(f"{x} and {y} are independent given {cond}.")
            else:
                statements.append(f"{x} is independent of {y}.")
    if statements:
        statements[0] = "However, " + statements[0]
    return " ".join(parts + statements)


def verbalise_hypothesis(query: Query, wording: int = 0) -> str:
    """Write a query with the ``wording``-th of :data:`HYPOTHESIS_WORDINGS` for its relation (0 is the hub's)."""
    templates = HYPOTHESIS_WORDINGS[query.relation]
    return templates[wording % len(templates)].format(x=query.x, y=query.y)


def paraphrase_hypothesis(query: Query) -> str:
    """Write a query as the generator's Paraphrase-OOD split words it (:data:`PARAPHRASE_WORDINGS`)."""
    return PARAPHRASE_WORDINGS[query.relation].format(x=query.x, y=query.y)


def all_pairs(variables: tuple[str, ...]) -> list[Pair]:
    return [pair(x, y) for x, y in combinations(variables, 2)]


__all__ = [
    "ContradictoryFactsError",
    "Facts",
    "HUB_WORDINGS",
    "HYPOTHESIS_WORDINGS",
    "PARAPHRASE_WORDINGS",
    "PremiseError",
    "Query",
    "Relation",
    "UnknownVariableError",
    "UnparsableSentenceError",
    "all_pairs",
    "declared_variables",
    "pair",
    "parse_hypothesis",
    "paraphrase_hypothesis",
    "parse_premise",
    "split_input",
    "verbalise_hypothesis",
    "verbalise_premise",
]
