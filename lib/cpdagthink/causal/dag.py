"""Single-DAG facts: d-separation statements and the four Corr2Cause relations.

The oracle asks these questions of a few witness members of an equivalence class (and the tests of every
member), so they are written as plain reachability over ``networkx.DiGraph`` objects rather than path
enumeration.
"""

from __future__ import annotations

from itertools import combinations
from typing import Mapping

import networkx as nx

from .premise import Facts, Pair, Query, Relation, pair


def _reachable(graph: nx.DiGraph, start: str, blocked: str, reverse: bool = False) -> set[str]:
    """Nodes reached from ``start`` by directed paths (backwards if ``reverse``) that avoid ``blocked``."""
    step = graph.predecessors if reverse else graph.successors
    seen, stack = set(), [start]
    while stack:
        for nxt in step(stack.pop()):
            if nxt != blocked and nxt not in seen:
                seen.add(nxt)
                stack.append(nxt)
    return seen


def holds(dag: nx.DiGraph, query: Query) -> bool:
    """Whether ``query`` holds in one DAG (semantics: ``notes/corr2cause-semantics.md``).

    Collider and confounder need two directed paths that share only the third node C. Such C exists iff
    some C is reachable from X avoiding Y and from Y avoiding X (take the topologically first such C: two
    paths meeting earlier would meet at an earlier such node); confounders are the same on reversed edges.
    """
    x, y = query.x, query.y
    if query.relation is Relation.DIRECT_CAUSE:
        return dag.has_edge(x, y)
    if query.relation is Relation.INDIRECT_CAUSE:
        return any(z != y and y in nx.descendants(dag, z) for z in dag.successors(x))
    reverse = query.relation is Relation.CONFOUNDER
    common = _reachable(dag, x, y, reverse) & _reachable(dag, y, x, reverse)
    return bool(common - {x, y})


def d_separated(dag: nx.DiGraph, x: str, y: str, given: frozenset[str],
                ancestors: Mapping[str, set[str]] | None = None) -> bool:
    """Pearl's d-separation via the moralised ancestral graph (Lauritzen et al., 1990).

    ``ancestors`` (each node's ancestors in ``dag``) saves recomputing them when one DAG is asked many times.
    """
    relevant = {x, y} | set(given)
    for node in list(relevant):
        relevant |= ancestors[node] if ancestors is not None else nx.ancestors(dag, node)
    moral: dict[str, set[str]] = {n: set() for n in relevant}
    for child in relevant:
        parents = [p for p in dag.predecessors(child)]
        for p in parents:
            moral[p].add(child)
            moral[child].add(p)
        for a, b in combinations(parents, 2):
            moral[a].add(b)
            moral[b].add(a)
    seen, stack = {x}, [x]
    while stack:
        for nxt in moral[stack.pop()]:
            if nxt == y:
                return False
            if nxt not in seen and nxt not in given:
                seen.add(nxt)
                stack.append(nxt)
    return True


def independence_facts(dag: nx.DiGraph, variables: tuple[str, ...] | None = None) -> Facts:
    """Every d-separation of ``dag`` as Corr2Cause facts: all pairs, every conditioning subset.

    Adjacent pairs are d-connected given any set, so only non-adjacent pairs have their 2^(n-2) conditioning
    sets tried.
    """
    variables = tuple(variables or sorted(dag.nodes))
    ancestors = {v: nx.ancestors(dag, v) for v in dag.nodes}
    independencies: dict[Pair, frozenset[frozenset[str]]] = {}
    correlations = set()
    for x, y in combinations(variables, 2):
        others = [v for v in variables if v not in (x, y)]
        sets = frozenset() if dag.has_edge(x, y) or dag.has_edge(y, x) else frozenset(
            frozenset(s)
            for k in range(len(others) + 1)
            for s in combinations(others, k)
            if d_separated(dag, x, y, frozenset(s), ancestors)
        )
        if sets:
            independencies[pair(x, y)] = sets
        if frozenset() not in sets:
            correlations.add(pair(x, y))
    return Facts(variables=variables, correlations=frozenset(correlations), independencies=independencies)


# Most v-structures any DAG on n nodes has, n = 0..8, found by exhaustive search (tests/test_dag.py repeats it).
# The optimum is layered, not bipartite: at n = 8, five sources pointing into A, B and C plus A -> C <- B give
# 10 + 10 + 11 = 31, one more than every "s sources into n - s sinks" graph (at most 30).
_MAX_V_STRUCTURES = (0, 0, 0, 1, 3, 6, 12, 20, 31)


def max_v_structures(n: int) -> int:
    """An upper bound on the v-structures of a DAG on ``n`` nodes: exact up to 8 nodes.

    Beyond the table it is the count of (collider, unordered pair of other nodes) triples, which no DAG
    exceeds. The schema bounds the emitted ``v_structures`` list by it, so a valid CPDAG always fits.
    """
    if n < 0:
        raise ValueError(f"a graph has at least 0 nodes, got {n}")
    if n < len(_MAX_V_STRUCTURES):
        return _MAX_V_STRUCTURES[n]
    return n * (n - 1) * (n - 2) // 2
