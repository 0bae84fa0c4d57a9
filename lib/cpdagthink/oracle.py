"""The PC algorithm with the premise as its independence oracle, and exact equivalence-class queries.

Steps (each a small function): skeleton and separating sets, v-structures, Meek's rules -> CPDAG. A
hypothesis is entailed iff it holds in every DAG of the class. The class is enumerated member by member
(never the 2^|E| orientations of the skeleton): pick an undirected edge, orient it each way, close under
Meek's rules, recurse. By Meek (1995, Thm. 2-4) every branch ends in a distinct member and none is a dead
end, so the cost is linear in the class size, which is exponential only in the largest undirected
(chordal) component.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from itertools import combinations
from typing import Callable, Iterator, Sequence

import networkx as nx

from .dag import d_separated, holds, independence_facts
from .errors import CpdagthinkError
from .premise import Facts, Pair, Query, pair, parse_hypothesis, parse_premise, split_input


# Whether x and y are independent given a conditioning set: a premise's stated facts, or a DAG's d-separation.
Independence = Callable[[str, str, frozenset[str]], bool]


class UnfaithfulFactsError(CpdagthinkError, ValueError):
    """No DAG has exactly these (in)dependencies: the premise cannot be labelled."""


@dataclass
class PDAG:
    """A partially directed graph: directed arcs ``(a, b)`` meaning a -> b, and undirected pairs."""

    variables: tuple[str, ...]
    directed: set[tuple[str, str]] = field(default_factory=set)
    undirected: set[Pair] = field(default_factory=set)

    def copy(self) -> "PDAG":
        return PDAG(self.variables, set(self.directed), set(self.undirected))

    def adjacent(self, a: str, b: str) -> bool:
        return (a, b) in self.directed or (b, a) in self.directed or pair(a, b) in self.undirected

    def orient(self, a: str, b: str) -> None:
        """Turn the undirected edge a - b into a -> b; orienting against an arc is a contradiction."""
        if (b, a) in self.directed:
            raise UnfaithfulFactsError(f"conflicting orientations of {a} - {b}")
        self.undirected.discard(pair(a, b))
        self.directed.add((a, b))

    def undirected_neighbours(self, a: str) -> set[str]:
        return {b for p in self.undirected if a in p for b in p if b != a}

    def parents(self, a: str) -> set[str]:
        return {x for x, y in self.directed if y == a}

    def children(self, a: str) -> set[str]:
        return {y for x, y in self.directed if x == a}

    def to_dag(self) -> nx.DiGraph:
        if self.undirected:
            raise ValueError("graph still has undirected edges")
        dag = nx.DiGraph()
        dag.add_nodes_from(self.variables)
        dag.add_edges_from(self.directed)
        if not nx.is_directed_acyclic_graph(dag):
            raise UnfaithfulFactsError("the directed edges contain a cycle")
        return dag


@dataclass(frozen=True)
class CPDAG:
    """The reference CPDAG of a premise: PC's output plus what it recorded on the way."""

    variables: tuple[str, ...]
    skeleton: frozenset[Pair]
    separating_sets: dict[Pair, frozenset[str]] = field(hash=False, compare=False)
    v_structures: tuple[tuple[str, str, str], ...]
    directed: frozenset[tuple[str, str]]
    undirected: frozenset[Pair]

    def pdag(self) -> PDAG:
        return PDAG(self.variables, set(self.directed), set(self.undirected))

    def to_json(self) -> dict:
        """Plain JSON, lists sorted, for ``cpdagthink reference``."""
        return {
            "variables": list(self.variables),
            "skeleton": sorted(sorted(p) for p in self.skeleton),
            "separating_sets": [
                {"pair": sorted(p), "set": sorted(s)} for p, s in sorted(self.separating_sets.items(), key=lambda i: sorted(i[0]))
            ],
            "v_structures": [list(v) for v in self.v_structures],
            "directed_edges": sorted(list(e) for e in self.directed),
            "undirected_edges": sorted(sorted(p) for p in self.undirected),
        }


# ------------------------------------------------------------------------------------------ PC's steps


def learn_skeleton(variables: tuple[str, ...], independent: Independence) -> tuple[set[Pair], dict[Pair, frozenset[str]]]:
    """PC's adjacency search (Spirtes, Glymour & Scheines 2000, §5.4.2; order-independent 'stable' form,
    Colombo & Maathuis 2014): remove x - y at the first conditioning size where some subset of x's or y's
    current neighbours separates them, recording that set."""
    edges = {pair(x, y) for x, y in combinations(variables, 2)}
    sepsets: dict[Pair, frozenset[str]] = {}
    size = 0
    while True:
        neighbours = {v: {u for p in edges if v in p for u in p if u != v} for v in variables}
        if not any(len(n) - 1 >= size for n in neighbours.values()):
            return edges, sepsets
        removed = set()
        for p in sorted(edges, key=sorted):
            x, y = sorted(p)
            for a, b in ((x, y), (y, x)):
                candidates = sorted(neighbours[a] - {b})
                found = next(
                    (frozenset(s) for s in combinations(candidates, size) if independent(x, y, frozenset(s))), None
                )
                if found is not None:
                    sepsets[p] = found
                    removed.add(p)
                    break
        edges -= removed
        size += 1


def orient_v_structures(
    variables: tuple[str, ...], skeleton: set[Pair], sepsets: dict[Pair, frozenset[str]]
) -> tuple[PDAG, tuple[tuple[str, str, str], ...]]:
    """Orient every unshielded triple x - z - y with z outside sepset(x, y) as x -> z <- y
    (Spirtes et al. 2000, step C of PC). Returns the pattern and the v-structures found."""
    graph = PDAG(variables, undirected=set(skeleton))
    found = []
    for z in variables:
        around = sorted(u for p in skeleton if z in p for u in p if u != z)
        for x, y in combinations(around, 2):
            if pair(x, y) not in skeleton and z not in sepsets[pair(x, y)]:
                found.append((x, z, y))
    for x, z, y in found:
        graph.orient(x, z)
        graph.orient(y, z)
    return graph, tuple(found)


def _meek_step(g: PDAG) -> tuple[str, str] | None:
    """The first undirected edge a - b that one of Meek's rules R1-R4 orients as a -> b (Meek 1995)."""
    for p in sorted(g.undirected, key=sorted):
        for a, b in (tuple(sorted(p)), tuple(sorted(p, reverse=True))):
            # R1: c -> a - b with c, b non-adjacent.
            if any(not g.adjacent(c, b) for c in g.parents(a)):
                return a, b
            # R2: a -> c -> b.
            if g.children(a) & g.parents(b):
                return a, b
            undirected_a = g.undirected_neighbours(a)
            # R3: a - c -> b and a - d -> b with c, d non-adjacent.
            tails = sorted(undirected_a & g.parents(b))
            if any(not g.adjacent(c, d) for c, d in combinations(tails, 2)):
                return a, b
            # R4: a - d -> c -> b with a adjacent to c and d, b non-adjacent to d.
            for c in g.parents(b):
                if g.adjacent(a, c):
                    if any(d in undirected_a and not g.adjacent(d, b) for d in g.parents(c)):
                        return a, b
    return None


def apply_meek_rules(g: PDAG) -> PDAG:
    """Close a pattern under Meek's rules, in place; returns it for chaining."""
    while (arc := _meek_step(g)) is not None:
        g.orient(*arc)
    if not nx.is_directed_acyclic_graph(nx.DiGraph(list(g.directed))):
        raise UnfaithfulFactsError("the forced orientations contain a directed cycle")
    return g


def consistent_extensions(cpdag: CPDAG | PDAG) -> Iterator[nx.DiGraph]:
    """Every DAG of the equivalence class, each once (branch on an undirected edge, then Meek-close)."""
    start = cpdag.pdag() if isinstance(cpdag, CPDAG) else cpdag

    def expand(g: PDAG) -> Iterator[nx.DiGraph]:
        if not g.undirected:
            yield g.to_dag()
            return
        a, b = sorted(min(g.undirected, key=sorted))
        for tail, head in ((a, b), (b, a)):
            branch = g.copy()
            branch.orient(tail, head)
            yield from expand(apply_meek_rules(branch))

    yield from expand(start)


# ------------------------------------------------------------------------------------------- the oracle


@dataclass(frozen=True)
class PremiseAnalysis:
    """Everything the oracle knows about one premise; members are enumerated once and reused."""

    facts: Facts
    cpdag: CPDAG
    members: tuple[nx.DiGraph, ...] = field(compare=False)


def _pc(variables: tuple[str, ...], independent: Independence) -> CPDAG:
    skeleton, sepsets = learn_skeleton(variables, independent)
    pattern, v_structures = orient_v_structures(variables, skeleton, sepsets)
    closed = apply_meek_rules(pattern)
    return CPDAG(
        variables=variables,
        skeleton=frozenset(skeleton),
        separating_sets=sepsets,
        v_structures=v_structures,
        directed=frozenset(closed.directed),
        undirected=frozenset(closed.undirected),
    )


def pc_cpdag(facts: Facts) -> CPDAG:
    """Run PC on the facts: skeleton, v-structures, Meek closure."""
    return _pc(facts.variables, facts.independent)


def cpdag_of_dag(dag: nx.DiGraph, variables: Sequence[str] = ()) -> CPDAG:
    """The CPDAG of a DAG: PC with the DAG's own d-separations as its independence oracle.

    Exact, since a DAG is faithful to its own d-separations, and the separating sets are the ones PC records
    for a premise with those facts. Each test is asked of the DAG directly, so only the tests PC needs are
    run (never every pair and conditioning set). ``variables`` fixes the order of the result's variables;
    nodes of ``dag`` missing from it follow, sorted.
    """
    order = tuple(variables) + tuple(sorted(set(dag.nodes) - set(variables)))
    return _pc(order, lambda x, y, given: d_separated(dag, x, y, given))


def analyse_facts(facts: Facts) -> PremiseAnalysis:
    """PC plus a faithfulness certificate: one member's d-separations must equal the stated facts exactly.

    PC recovers the class of any DAG faithful to the facts, so a mismatch proves that no DAG is.
    """
    cpdag = pc_cpdag(facts)
    members = tuple(consistent_extensions(cpdag))
    if independence_facts(members[0], facts.variables).statements() != facts.statements():
        raise UnfaithfulFactsError("no DAG has exactly the stated independencies")
    return PremiseAnalysis(facts, cpdag, members)


@functools.lru_cache(maxsize=4096)
def analyse_premise(premise: str) -> PremiseAnalysis:
    """Parse and analyse a premise text (cached: a split reuses few premises across many rows)."""
    return analyse_facts(parse_premise(premise))


def entailed(analysis: PremiseAnalysis, query: Query) -> bool:
    """True iff the query holds in every DAG of the class."""
    return all(holds(member, query) for member in analysis.members)


@dataclass(frozen=True)
class OracleLabel:
    """The oracle's verdict on one row: a 0/1 label, or None with the reason."""

    label: int | None
    problem: str | None = None
    query: Query | None = None


def label_text(text: str) -> OracleLabel:
    """Label a Corr2Cause ``input`` cell; unfaithful premises get ``label=None`` and a ``problem``."""
    premise, hypothesis = split_input(text)
    try:
        analysis = analyse_premise(premise)
    except UnfaithfulFactsError as error:
        return OracleLabel(None, f"unfaithful premise: {error}")
    query = parse_hypothesis(hypothesis, analysis.facts.variables)
    return OracleLabel(int(entailed(analysis, query)), None, query)
