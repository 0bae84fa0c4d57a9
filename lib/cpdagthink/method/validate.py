"""A certified CPDAG validator for emitted ``CausalAnalysis`` objects (the paper's §8 "future work").

Schema validity (what constrained decoding guarantees) says nothing about acyclicity, Meek closure or the
agreement of the six fields. :func:`violations` checks all of it and yields one typed :class:`Violation`
per problem; a valid CPDAG yields none. The verdict "is this the CPDAG of some DAG" is exact: it is decided
by a certificate (:func:`cpdag_certificate`) that builds a consistent extension with the oracle's own
Meek machinery and recomputes that DAG's CPDAG; the other kinds explain *why* an object fails.

The *graph* of an object is its directed plus undirected edges; the ``skeleton``, ``v_structures`` and
``separating_sets`` fields are checked against that graph. Names outside ``variables`` are reported, and
still take part in the structural checks (so one bad name does not hide other problems).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from enum import Enum
from functools import cached_property
from itertools import combinations
from typing import Iterable, Iterator

import networkx as nx

from ..causal.oracle import (
    PDAG,
    UnfaithfulFactsError,
    consistent_extensions,
    cpdag_of_dag,
    meek_step,
    pc_cpdag,
)
from ..causal.premise import Facts, Pair, pair
from .schema import CausalAnalysis


class ViolationKind(str, Enum):
    """What is wrong with an emitted CPDAG; :attr:`reference` gives each kind's one-line justification."""

    UNKNOWN_VARIABLE = "unknown_variable"
    SKELETON_MISMATCH = "skeleton_mismatch"
    DIRECTED_AND_UNDIRECTED = "directed_and_undirected"
    DIRECTED_CYCLE = "directed_cycle"
    V_STRUCTURE_CONTRADICTS_EDGES = "v_structure_contradicts_edges"
    V_STRUCTURE_CONTRADICTS_SEPSET = "v_structure_contradicts_sepset"
    NOT_MEEK_CLOSED = "not_meek_closed"
    NON_CHORDAL_COMPONENT = "non_chordal_component"
    NOT_A_CPDAG = "not_a_cpdag"
    FACTS_SKELETON = "facts_skeleton"
    FACTS_SEPSET = "facts_sepset"
    FACTS_CLASS = "facts_class"

    @property
    def reference(self) -> str:
        return REFERENCES[self]


REFERENCES: dict[ViolationKind, str] = {
    ViolationKind.UNKNOWN_VARIABLE:
        "Every name must be one of the premise's variables, declared once (this project's reading: appendix F.1's "
        "schema lists the fields, not these constraints; a CPDAG has one node per variable).",
    ViolationKind.SKELETON_MISMATCH:
        "The skeleton is the CPDAG's edge set with directions dropped, and has no self-loops (Spirtes et al. 2000, §5.4.2).",
    ViolationKind.DIRECTED_AND_UNDIRECTED:
        "A CPDAG edge is exactly one of a -> b, b -> a, a - b (Andersson, Madigan & Perlman 1997, Def. 2.1).",
    ViolationKind.DIRECTED_CYCLE:
        "A CPDAG is a chain graph: its directed edges contain no cycle (Andersson et al. 1997, Thm. 4.1(i)).",
    ViolationKind.V_STRUCTURE_CONTRADICTS_EDGES:
        "The v-structures are exactly the unshielded colliders a -> z <- b of the graph (Verma & Pearl 1990).",
    ViolationKind.V_STRUCTURE_CONTRADICTS_SEPSET:
        "PC orients x - z - y as a collider iff z is outside sepset(x, y); sepsets exist only for non-adjacent pairs (Spirtes et al. 2000, step C).",
    ViolationKind.NOT_MEEK_CLOSED:
        "A CPDAG is closed under Meek's rules R1-R4: none orients a remaining undirected edge (Meek 1995, Thm. 2-3).",
    ViolationKind.NON_CHORDAL_COMPONENT:
        "Every undirected component of a CPDAG is chordal (Andersson et al. 1997, Thm. 4.1(ii)).",
    ViolationKind.NOT_A_CPDAG:
        "Exact certificate: a consistent extension exists and its CPDAG (skeleton + v-structures + Meek closure) is the graph itself (Meek 1995; Chickering 1995).",
    ViolationKind.FACTS_SKELETON:
        "Under faithfulness x, y are adjacent iff no stated independence separates them (Spirtes et al. 2000, Thm. 3.4).",
    ViolationKind.FACTS_SEPSET:
        "A separating set must be a stated independence of its pair (closed-world premise, dataset semantics note).",
    ViolationKind.FACTS_CLASS:
        "A correct summary is the premise's own CPDAG, PC's output on the stated facts (Spirtes et al. 2000, §5.4.2).",
}


@dataclass(frozen=True)
class Violation:
    """One problem: its kind and a human-readable detail naming the offending variables or edges."""

    kind: ViolationKind
    detail: str

    def __str__(self) -> str:
        return f"{self.kind.value}: {self.detail}"


# ------------------------------------------------------------------------------------------ the graph


def _arc(e: tuple[str, str]) -> str:
    return f"{e[0]}->{e[1]}"


def _line(p: Pair | tuple[str, str]) -> str:
    return "-".join(sorted(p))


@dataclass(frozen=True)
class _Graph:
    """The object's graph as sets, self-loops and contradictory pairs set aside for the structural checks."""

    nodes: frozenset[str]
    directed: frozenset[tuple[str, str]]
    undirected: frozenset[Pair]

    @classmethod
    def of(cls, a: CausalAnalysis) -> "_Graph":
        directed = frozenset((x, y) for x, y in a.directed_edges if x != y)
        undirected = frozenset(pair(x, y) for x, y in a.undirected_edges if x != y)
        nodes = set(a.variables) | {v for e in a.directed_edges + a.undirected_edges for v in e}
        return cls(frozenset(nodes), directed, undirected)

    @cached_property
    def pairs(self) -> frozenset[Pair]:
        return frozenset(pair(*e) for e in self.directed) | self.undirected

    def adjacent(self, x: str, y: str) -> bool:
        return pair(x, y) in self.pairs

    def neighbours(self, z: str) -> set[str]:
        return {v for p in self.pairs if z in p for v in p if v != z}

    def clean_pdag(self) -> PDAG:
        """A PDAG of the unambiguous edges (a pair both directed and undirected keeps only its arc)."""
        arcs = {pair(*e) for e in self.directed}
        return PDAG(tuple(sorted(self.nodes)), set(self.directed), {p for p in self.undirected if p not in arcs})

    def unshielded_triples(self) -> Iterator[tuple[str, str, str]]:
        """Every x - z - y (any marks) with x, y non-adjacent, x < y."""
        for z in sorted(self.nodes):
            for x, y in combinations(sorted(self.neighbours(z)), 2):
                if not self.adjacent(x, y):
                    yield x, z, y


# ----------------------------------------------------------------------------------- the certificate


def _simple(directed: set[tuple[str, str]], undirected: set[Pair]) -> bool:
    """Whether the graph has no self-loop and at most one edge per pair (no arc both ways, no pair both
    directed and undirected): what every CPDAG is."""
    if any(x == y for x, y in directed) or any(len(p) < 2 for p in undirected):
        return False
    return not ({pair(*e) for e in directed} & undirected or any((y, x) in directed for x, y in directed))


def cpdag_certificate(directed: Iterable[tuple[str, str]], undirected: Iterable[tuple[str, str] | Pair],
                      variables: Iterable[str] = ()) -> nx.DiGraph | None:
    """A DAG whose CPDAG is exactly this graph, or None when there is none (so the graph is no CPDAG).

    Exact: if the graph is a CPDAG, orienting any undirected edge and Meek-closing never fails and ends in a
    member of its class (Meek 1995, Thm. 4), so the first extension's CPDAG equals the graph; if it is not a
    CPDAG, no DAG's CPDAG equals it, so the final comparison fails. Cost: one branch, not the whole class.
    """
    directed, undirected = set(directed), {pair(*e) for e in undirected}
    nodes = set(variables) | {v for e in directed for v in e} | {v for p in undirected for v in p}
    if not _simple(directed, undirected):
        return None
    start = PDAG(tuple(sorted(nodes)), set(directed), set(undirected))
    try:
        dag = next(consistent_extensions(start))
    except UnfaithfulFactsError:
        return None
    if not nx.is_directed_acyclic_graph(dag):
        return None
    try:
        recomputed = cpdag_of_dag(dag, sorted(nodes))
    except UnfaithfulFactsError:  # pragma: no cover - PC on a DAG's own d-separations never conflicts
        return None
    return dag if recomputed.directed == directed and recomputed.undirected == undirected else None


def is_cpdag(analysis: CausalAnalysis) -> bool:
    """Whether the object's directed + undirected edges are the CPDAG of some DAG (the exact certificate)."""
    return cpdag_certificate(analysis.directed_edges, analysis.undirected_edges, analysis.variables) is not None


# ------------------------------------------------------------------------------------------- checks


def _unknown_variables(a: CausalAnalysis) -> Iterator[Violation]:
    kind = ViolationKind.UNKNOWN_VARIABLE
    for name, count in sorted(Counter(a.variables).items()):
        if count > 1:
            yield Violation(kind, f"variable {name} is declared {count} times")
    known = set(a.variables)
    fields = {
        "skeleton": [v for e in a.skeleton for v in e],
        "separating_sets": [v for s in a.separating_sets for v in (*s.pair, *s.separating_set)],
        "v_structures": [v for t in a.v_structures for v in t],
        "directed_edges": [v for e in a.directed_edges for v in e],
        "undirected_edges": [v for e in a.undirected_edges for v in e],
    }
    for field_name, names in fields.items():
        unknown = sorted(set(names) - known)
        if unknown:
            yield Violation(kind, f"{field_name} names undeclared variable(s) {', '.join(unknown)}")


def _skeleton_mismatch(a: CausalAnalysis, g: _Graph) -> Iterator[Violation]:
    kind = ViolationKind.SKELETON_MISMATCH
    for field_name, edges in (("skeleton", a.skeleton), ("directed_edges", a.directed_edges),
                              ("undirected_edges", a.undirected_edges)):
        for x in sorted({x for x, y in edges if x == y}):
            yield Violation(kind, f"self-loop {x}-{x} in {field_name}")
    skeleton = {pair(x, y) for x, y in a.skeleton if x != y}
    for p in sorted(g.pairs - skeleton, key=sorted):
        yield Violation(kind, f"edge {_line(p)} is missing from the skeleton")
    for p in sorted(skeleton - g.pairs, key=sorted):
        yield Violation(kind, f"skeleton edge {_line(p)} is neither directed nor undirected")


def _directed_and_undirected(g: _Graph) -> Iterator[Violation]:
    kind = ViolationKind.DIRECTED_AND_UNDIRECTED
    for x, y in sorted(g.directed):
        if pair(x, y) in g.undirected:
            yield Violation(kind, f"{x}->{y} is also listed as undirected {_line((x, y))}")
        if (y, x) in g.directed and x < y:
            yield Violation(kind, f"{x}-{y} is directed both ways")


def _directed_cycles(g: _Graph) -> Iterator[Violation]:
    """One violation per strongly connected set of arcs (2-cycles are DIRECTED_AND_UNDIRECTED)."""
    arcs = nx.DiGraph([e for e in g.directed if (e[1], e[0]) not in g.directed])
    for component in sorted(nx.strongly_connected_components(arcs), key=sorted):
        if len(component) > 1:
            cycle = nx.find_cycle(arcs.subgraph(component))
            yield Violation(ViolationKind.DIRECTED_CYCLE, "directed cycle " + " ".join(_arc(e) for e in cycle))


def _v_structures_vs_edges(a: CausalAnalysis, g: _Graph) -> Iterator[Violation]:
    kind = ViolationKind.V_STRUCTURE_CONTRADICTS_EDGES
    listed = {(pair(x, y), z) for x, z, y in a.v_structures}
    for x, z, y in a.v_structures:
        text = f"v-structure {x}->{z}<-{y}"
        if len({x, y, z}) < 3:
            yield Violation(kind, f"{text} repeats a variable")
            continue
        missing = [e for e in ((x, z), (y, z)) if e not in g.directed]
        if missing:
            yield Violation(kind, f"{text} but {', '.join(_arc(e) for e in missing)} not among the directed edges")
        if g.adjacent(x, y):
            yield Violation(kind, f"{text} is shielded: {x} and {y} are adjacent")
    for x, z, y in g.unshielded_triples():
        if (x, z) in g.directed and (y, z) in g.directed and (pair(x, y), z) not in listed:
            yield Violation(kind, f"unshielded collider {x}->{z}<-{y} is not listed as a v-structure")


def _sepsets(a: CausalAnalysis) -> dict[Pair, list[frozenset[str]]]:
    found: dict[Pair, list[frozenset[str]]] = {}
    for s in a.separating_sets:
        found.setdefault(pair(*s.pair), []).append(frozenset(s.separating_set))
    return found


def _sepsets_misplaced(sepsets: dict[Pair, list[frozenset[str]]], g: _Graph) -> Iterator[Violation]:
    """Separating sets that cannot be: of one variable's pair, of an adjacent pair, or holding an endpoint."""
    kind = ViolationKind.V_STRUCTURE_CONTRADICTS_SEPSET
    for p, sets in sorted(sepsets.items(), key=lambda i: sorted(i[0])):
        if len(p) < 2:
            yield Violation(kind, f"separating set listed for the pair {_line(p)}-{_line(p)} of one variable")
        elif g.adjacent(*p):
            yield Violation(kind, f"separating set listed for adjacent pair {_line(p)}")
        for s in sets:
            if s & p:
                yield Violation(kind, f"separating set of {_line(p)} contains its own endpoint(s) {', '.join(sorted(s & p))}")


def _v_structures_vs_sepsets(a: CausalAnalysis, g: _Graph) -> Iterator[Violation]:
    kind = ViolationKind.V_STRUCTURE_CONTRADICTS_SEPSET
    sepsets = _sepsets(a)
    yield from _sepsets_misplaced(sepsets, g)
    for x, z, y in sorted({(min(x, y), z, max(x, y)) for x, z, y in a.v_structures if len({x, y, z}) == 3}):
        if any(z in s for s in sepsets.get(pair(x, y), ())):
            yield Violation(kind, f"v-structure {x}->{z}<-{y} but {z} is in the separating set of {x}-{y}")
    for x, z, y in g.unshielded_triples():
        collider = (x, z) in g.directed and (y, z) in g.directed
        if not collider and any(z not in s for s in sepsets.get(pair(x, y), ())):
            yield Violation(kind, f"non-collider {x}-{z}-{y} but {z} is missing from the separating set of {x}-{y}")


def meek_orientable(g: PDAG) -> list[tuple[str, str]]:
    """The arcs Meek's rules R1-R4 would still add to ``g`` (closing a copy; conflicts stop the closure)."""
    work, added = g.copy(), []
    while (arc := meek_step(work)) is not None:
        try:
            work.orient(*arc)
        except UnfaithfulFactsError:  # pragma: no cover - only undirected pairs are ever oriented
            break
        added.append(arc)
    return added


def _not_meek_closed(g: _Graph) -> Iterator[Violation]:
    for arc in meek_orientable(g.clean_pdag()):
        yield Violation(ViolationKind.NOT_MEEK_CLOSED, f"undirected {_line(arc)} is forced to {_arc(arc)} by Meek's rules")


def _non_chordal(g: _Graph) -> Iterator[Violation]:
    lines = nx.Graph([tuple(p) for p in g.undirected])
    for component in sorted(nx.connected_components(lines), key=sorted):
        if not nx.is_chordal(lines.subgraph(component)):
            yield Violation(ViolationKind.NON_CHORDAL_COMPONENT,
                            f"undirected component {{{', '.join(sorted(component))}}} has a chordless cycle")


def _certificate(a: CausalAnalysis) -> Iterator[Violation]:
    if not is_cpdag(a):
        yield Violation(ViolationKind.NOT_A_CPDAG, "no DAG has these directed and undirected edges as its CPDAG")


# ------------------------------------------------------------------------------------- premise checks


def _instance_variables(a: CausalAnalysis, premise: Iterable[str]) -> Iterator[Violation]:
    """The declared variables against the premise's (a foreign or a missing name)."""
    premise = set(premise)
    if set(a.variables) != premise:
        yield Violation(ViolationKind.UNKNOWN_VARIABLE,
                        f"variables {{{', '.join(sorted(set(a.variables)))}}} differ from the premise's "
                        f"{{{', '.join(sorted(premise))}}}")


def _facts_skeleton(g: _Graph, facts: Facts) -> Iterator[Violation]:
    kind = ViolationKind.FACTS_SKELETON
    for x, y in combinations(sorted(facts.variables), 2):
        stated = facts.independencies.get(pair(x, y))
        if g.adjacent(x, y) and stated:
            given = min(stated, key=lambda s: (len(s), sorted(s)))
            yield Violation(kind, f"{x}-{y} are adjacent but stated independent given {{{', '.join(sorted(given))}}}")
        elif not g.adjacent(x, y) and not stated:
            yield Violation(kind, f"{x} and {y} are not adjacent but no independence of them is stated")


def _facts_sepsets(a: CausalAnalysis, facts: Facts) -> Iterator[Violation]:
    for p, sets in sorted(_sepsets(a).items(), key=lambda i: sorted(i[0])):
        for s in sets:
            if len(p) == 2 and not facts.independent(*sorted(p), s):
                yield Violation(ViolationKind.FACTS_SEPSET,
                                f"{_line(p)} given {{{', '.join(sorted(s))}}} is not a stated independence")


def _facts_class(a: CausalAnalysis, g: _Graph, facts: Facts) -> Iterator[Violation]:
    if not is_cpdag(a):
        return
    try:
        reference = pc_cpdag(facts)
    except UnfaithfulFactsError:
        return
    if reference.directed != g.directed or reference.undirected != g.undirected:
        wrong = sorted(_arc(e) for e in g.directed - reference.directed) + sorted(
            _line(p) for p in g.undirected - reference.undirected)
        missed = sorted(_arc(e) for e in reference.directed - g.directed) + sorted(
            _line(p) for p in reference.undirected - g.undirected)
        yield Violation(ViolationKind.FACTS_CLASS, f"a CPDAG, but not the premise's: has {', '.join(wrong) or 'nothing extra'}; "
                                                   f"lacks {', '.join(missed) or 'nothing'}")


# ---------------------------------------------------------------------------------------- entry points


def violations(analysis: CausalAnalysis, facts: Facts | None = None,
               variables: Iterable[str] | None = None) -> Iterator[Violation]:
    """Every problem of an emitted CPDAG summary, structural kinds first; none for a valid CPDAG.

    With ``facts`` the object is also checked against the premise (FACTS_* kinds and the variable set);
    with only the premise's ``variables``, against its variable set (a name the premise does not declare).
    """
    g = _Graph.of(analysis)
    yield from _unknown_variables(analysis)
    yield from _skeleton_mismatch(analysis, g)
    yield from _directed_and_undirected(g)
    yield from _directed_cycles(g)
    yield from _v_structures_vs_edges(analysis, g)
    yield from _v_structures_vs_sepsets(analysis, g)
    yield from _not_meek_closed(g)
    yield from _non_chordal(g)
    yield from _certificate(analysis)
    if facts is not None or variables is not None:
        yield from _instance_variables(analysis, facts.variables if facts is not None else variables)
    if facts is not None:
        yield from _facts_skeleton(g, facts)
        yield from _facts_sepsets(analysis, facts)
        yield from _facts_class(analysis, g, facts)


def is_valid(analysis: CausalAnalysis, facts: Facts | None = None) -> bool:
    """True iff :func:`violations` yields nothing."""
    return next(iter(violations(analysis, facts)), None) is None


def violation_kinds(analysis: CausalAnalysis, facts: Facts | None = None) -> set[ViolationKind]:
    """The distinct kinds an object violates."""
    return {v.kind for v in violations(analysis, facts)}


def violation_counts(analyses: Iterable[CausalAnalysis], facts: Iterable[Facts | None] | None = None) -> Counter[ViolationKind]:
    """How many objects violate each kind (an object counts once per kind)."""
    facts_list = list(facts) if facts is not None else None
    counts: Counter[ViolationKind] = Counter()
    for i, analysis in enumerate(analyses):
        counts.update(violation_kinds(analysis, facts_list[i] if facts_list is not None else None))
    return counts


__all__ = [
    "REFERENCES",
    "Violation",
    "ViolationKind",
    "cpdag_certificate",
    "is_cpdag",
    "is_valid",
    "meek_orientable",
    "violation_counts",
    "violation_kinds",
    "violations",
]
