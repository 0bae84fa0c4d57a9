"""``CausalAnalysis``: the typed CPDAG summary the model emits in turn 1 (paper §3.2, appendix F.1).

Edges are JSON pairs (``["A", "B"]``; directed ones read tail -> head), v-structures are triples
``[X, Z, Y]`` meaning X -> Z <- Y. The paper derives the decoding regex from the schema (appendix F.2).
Specialising that schema to one instance is this project's own choice, not the paper's: variable names
become an enum, pairs exclude a self-loop, and every list gets a bound derived from the number of
variables, so a regex-constrained model always reaches the closing brace.

Parsing checks the schema's field types only, as the paper's schema promises parseable fields, not
consistency: an object with a self-loop, a name the premise does not declare or a variable declared
twice is parsed and shown to turn 2 as emitted; the audit counts it as a violation
(:mod:`cpdagthink.method.validate`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from itertools import islice
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, create_model

from ..causal.dag import holds, max_v_structures
from ..causal.oracle import (CPDAG, PDAG, UnfaithfulFactsError, apply_meek_rules, consistent_extensions, entailed_by_cpdag,
                     is_cpdag)
from ..causal.premise import PremiseError, pair, parse_hypothesis

Variable = Annotated[str, Field(pattern=r"^[A-Za-z]$")]
FIELD_ORDER = ("variables", "skeleton", "separating_sets", "v_structures", "directed_edges", "undirected_edges")
# Completions listed for a graph that is not a CPDAG (a CPDAG is decided without listing any). A graph on n
# variables has at most n! of them, so a graph of up to 7 variables is always listed in full.
MAX_COMPLETIONS = 5040
TOOL_NAME = "record_causal_analysis"
TOOL_DESCRIPTION = (
    "Record the CPDAG you derived from the premise: variables, skeleton, separating sets of non-adjacent "
    "pairs, v-structures, and the directed and undirected edges of the equivalence class."
)


@dataclass(frozen=True)
class GraphVerdict:
    """What a graph says about a hypothesis: whether it ``holds`` in every DAG consistent with the graph, and
    how that was found (how many DAGs were checked, or why the graph or hypothesis could not be used)."""

    holds: bool
    detail: str


class SeparatingSet(BaseModel):
    """A non-adjacent pair and a set of variables that renders it independent."""

    model_config = ConfigDict(extra="forbid")
    pair: tuple[Variable, Variable]
    separating_set: list[Variable]


class CausalAnalysis(BaseModel):
    """The CPDAG summary: field order matters (it is the order the model writes them in)."""

    model_config = ConfigDict(extra="forbid")
    variables: list[Variable]
    skeleton: list[tuple[Variable, Variable]]
    separating_sets: list[SeparatingSet]
    v_structures: list[tuple[Variable, Variable, Variable]]
    directed_edges: list[tuple[Variable, Variable]]
    undirected_edges: list[tuple[Variable, Variable]]

    @classmethod
    def from_cpdag(cls, cpdag: CPDAG) -> "CausalAnalysis":
        """The oracle's reference CPDAG in the emitted format, lists sorted, for field-by-field audits."""
        order = {v: i for i, v in enumerate(cpdag.variables)}

        def ordered(p) -> tuple[str, str]:
            a, b = sorted(p, key=order.__getitem__)
            return a, b

        return cls(
            variables=list(cpdag.variables),
            skeleton=sorted((ordered(p) for p in cpdag.skeleton), key=lambda e: (order[e[0]], order[e[1]])),
            separating_sets=[
                SeparatingSet(pair=ordered(p), separating_set=sorted(s, key=order.__getitem__))
                for p, s in sorted(cpdag.separating_sets.items(), key=lambda i: sorted(order[v] for v in i[0]))
            ],
            v_structures=[tuple(v) for v in cpdag.v_structures],
            directed_edges=sorted(cpdag.directed, key=lambda e: (order[e[0]], order[e[1]])),
            undirected_edges=sorted((ordered(p) for p in cpdag.undirected), key=lambda e: (order[e[0]], order[e[1]])),
        )

    @staticmethod
    def bounds(n: int) -> dict[str, int]:
        """List bounds for ``n`` variables: every pair at most once, and no more v-structures than any DAG has.

        A tight v-structure bound matters in practice: a small model under the regex tends to fill a list
        to its bound, and the loose one (every triple once, 60 at six variables) tripled turn-1 length.
        """
        pairs = n * (n - 1) // 2
        return {
            "variables": n,
            "skeleton": pairs,
            "separating_sets": pairs,
            "separating_set": max(n - 2, 0),
            "v_structures": max_v_structures(n),
            "directed_edges": pairs,
            "undirected_edges": pairs,
        }

    @classmethod
    def json_schema_for(cls, variables: list[str] | tuple[str, ...]) -> dict[str, Any]:
        """The JSON schema constraining one instance's output: names from ``variables``, bounded lists."""
        return instance_model(tuple(variables)).model_json_schema()

    def answer(self, hypothesis: str) -> GraphVerdict:
        """Whether the hypothesis holds in every DAG consistent with this graph's directed and undirected
        edges, Meek-closed first (the other fields are not read). When the closed graph is a CPDAG (checked in
        polynomial time) it is decided on the graph itself (``oracle.entailed_by_cpdag``), so a large class
        costs no more than a small one. Any other graph has its completions listed, at most
        ``MAX_COMPLETIONS``. A graph that no DAG extends or that allows more completions, or a hypothesis that
        does not parse over these variables, answers NO with the reason.

        >>> collider = CausalAnalysis(
        ...     variables=["A", "B", "C"], skeleton=[("A", "C"), ("B", "C")],
        ...     separating_sets=[{"pair": ("A", "B"), "separating_set": []}], v_structures=[("A", "C", "B")],
        ...     directed_edges=[("A", "C"), ("B", "C")], undirected_edges=[])
        >>> collider.answer("A directly causes C.")
        GraphVerdict(holds=True, detail='decided on the CPDAG (0 undirected edge(s))')
        >>> collider.answer("C directly causes A.").holds
        False

        Only the edges are read. A -> B - C closes to the chain A -> B -> C, which is not a CPDAG (a chain's
        CPDAG leaves it undirected), so its one completion is checked:

        >>> chain = collider.model_copy(update={"directed_edges": [("A", "B")], "undirected_edges": [("B", "C")]})
        >>> chain.answer("A causes something else which causes C.")
        GraphVerdict(holds=True, detail='checked 1 completion(s)')
        >>> chain.answer("D directly causes A.")
        GraphVerdict(holds=False, detail="graph unusable: unknown variable D: 'D directly causes A.'")
        """
        graph = PDAG(tuple(self.variables), {tuple(e) for e in self.directed_edges},
                     {pair(*e) for e in self.undirected_edges})
        try:
            query = parse_hypothesis(hypothesis, tuple(self.variables))
            closed = apply_meek_rules(graph)
            if is_cpdag(closed):
                return GraphVerdict(entailed_by_cpdag(closed, query),
                                    f"decided on the CPDAG ({len(closed.undirected)} undirected edge(s))")
            members = list(islice(consistent_extensions(closed), MAX_COMPLETIONS + 1))
        except (UnfaithfulFactsError, PremiseError, ValueError) as error:
            return GraphVerdict(False, f"graph unusable: {error}")
        if len(members) > MAX_COMPLETIONS:
            return GraphVerdict(False,
                                f"graph unusable: not a CPDAG, and it has more than {MAX_COMPLETIONS} completions")
        return GraphVerdict(all(holds(m, query) for m in members), f"checked {len(members)} completion(s)")

    def to_dot(self) -> str:
        """A compact DOT view (returned to the model with its own object in the turn-2 tool result)."""
        lines = ["digraph CPDAG {"]
        lines += [f"  {a} -> {b};" for a, b in self.directed_edges]
        lines += [f"  {a} -> {b} [dir=none];" for a, b in self.undirected_edges]
        linked = {v for e in self.directed_edges + self.undirected_edges for v in e}
        lines += [f"  {v};" for v in self.variables if v not in linked]
        lines.append("}")
        return "\n".join(lines)


def _others(variables: tuple[str, ...], *excluded: str) -> Any:
    return Literal[tuple(v for v in variables if v not in excluded)]  # type: ignore[valid-type]


@lru_cache(maxsize=256)
def instance_model(variables: tuple[str, ...]) -> type[BaseModel]:
    """A ``CausalAnalysis`` twin whose names are an enum of ``variables`` and whose lists are bounded.

    Pairs are one alternative per first name, the second drawn from the other names, so the schema (and the
    regex derived from it) has no self-loop ``["B", "B"]``; a v-structure's collider differs from both ends.
    """
    if not variables or len(set(variables)) != len(variables):
        raise ValueError(f"need distinct variable names, got {variables!r}")
    name = Literal[variables]  # type: ignore[valid-type]
    pair: Any = tuple[name, name]  # one variable: the bounds allow no pair at all
    triple: Any = tuple[name, name, name]
    if len(variables) > 1:
        pair = Union[tuple(tuple[Literal[v], _others(variables, v)] for v in variables)]  # type: ignore[misc]
        triple = Union[tuple(tuple[_others(variables, v), Literal[v], _others(variables, v)]  # type: ignore[misc]
                             for v in variables)]
    bound = CausalAnalysis.bounds(len(variables))
    separating = create_model(
        "SeparatingSet",
        __config__=ConfigDict(extra="forbid"),
        pair=(pair, ...),
        separating_set=(list[name], Field(max_length=bound["separating_set"])),
    )
    edges = list[pair]
    fields: dict[str, Any] = {
        "variables": (list[name], Field(max_length=bound["variables"])),
        "skeleton": (edges, Field(max_length=bound["skeleton"])),
        "separating_sets": (list[separating], Field(max_length=bound["separating_sets"])),
        "v_structures": (list[triple], Field(max_length=bound["v_structures"])),
        "directed_edges": (edges, Field(max_length=bound["directed_edges"])),
        "undirected_edges": (edges, Field(max_length=bound["undirected_edges"])),
    }
    return create_model("CausalAnalysis", __config__=ConfigDict(extra="forbid"), **fields)


def analysis_schema(variables: list[str] | tuple[str, ...] | None) -> dict[str, Any]:
    """The generic schema, or the one narrowed to an instance's variables."""
    return CausalAnalysis.model_json_schema() if variables is None else CausalAnalysis.json_schema_for(variables)


def json_schema_regex(schema: dict[str, Any]) -> str:
    """The regex of the JSON texts that ``schema`` accepts (outlines_core), with one optional space between
    tokens: enough for readable JSON, small enough to keep the automaton small."""
    from outlines_core.json_schema import build_regex_from_schema

    return build_regex_from_schema(json.dumps(schema), whitespace_pattern=r"[ ]?")


@lru_cache(maxsize=256)
def _regex(variables: tuple[str, ...] | None) -> str:
    return json_schema_regex(analysis_schema(variables))


def analysis_regex(variables: list[str] | tuple[str, ...] | None = None) -> str:
    """The schema-derived regex for the tool-call arguments (appendix F.2), narrowed to ``variables`` (the
    narrowing is the project's own, module docstring).

    >>> import re
    >>> regex = analysis_regex(["A", "B"])
    >>> emitted = ('{"variables": ["A", "B"], "skeleton": [["A", "B"]], "separating_sets": [], '
    ...            '"v_structures": [], "directed_edges": [], "undirected_edges": [["A", "B"]]}')
    >>> re.fullmatch(regex, emitted) is not None
    True

    A self-loop, or a name the instance does not declare, cannot be emitted under it; the generic regex
    takes any one-letter names:

    >>> re.fullmatch(regex, emitted.replace('[["A", "B"]]}', '[["A", "A"]]}')) is None
    True
    >>> foreign = emitted.replace('"B"', '"D"')
    >>> re.fullmatch(regex, foreign) is None, re.fullmatch(analysis_regex(), foreign) is not None
    (True, True)
    """
    return _regex(tuple(variables) if variables else None)


def without_titles(node: Any) -> Any:
    """Drop pydantic's ``title`` keys: they cost prompt tokens and constrain nothing."""
    if isinstance(node, dict):
        return {k: without_titles(v) for k, v in node.items() if not (k == "title" and isinstance(v, str))}
    if isinstance(node, list):
        return [without_titles(v) for v in node]
    return node


@lru_cache(maxsize=256)
def _tool_definition_text(variables: tuple[str, ...] | None) -> str:
    """The tool definition as JSON text: pydantic builds the schema once per variable list, not once per request."""
    schema = analysis_schema(variables)
    return json.dumps({"type": "function", "function": {"name": TOOL_NAME, "description": TOOL_DESCRIPTION,
                                                        "parameters": without_titles(schema)}})


def tool_definition(variables: list[str] | tuple[str, ...] | None = None) -> dict[str, Any]:
    """The OpenAI-style function tool whose arguments are a ``CausalAnalysis`` (a new dict on each call).

    Without ``variables`` the definition is the same for every instance, so a prompt that shows it keeps a
    common prefix across instances (llama.cpp and vLLM reuse it); the instance's names are then enforced by
    the narrowed regex where there is one; elsewhere a foreign name is parsed and counted by the audit.
    """
    return json.loads(_tool_definition_text(None if variables is None else tuple(variables)))


def parse_analysis(arguments: str | dict) -> CausalAnalysis:
    """Validate emitted arguments (JSON text or dict) against the generic schema: six typed fields of
    one-letter names. Consistency is not checked here (module docstring); ``ValueError`` on anything else."""
    data = json.loads(arguments) if isinstance(arguments, str) else arguments
    return CausalAnalysis.model_validate(data)
