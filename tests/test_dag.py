"""``dag.max_v_structures`` against an exhaustive search over every DAG up to eight nodes, and
``dag.independence_facts`` against networkx's d-separation."""

import random
from itertools import combinations

import networkx as nx
import pytest

from cpdagthink.causal.dag import independence_facts, max_v_structures


def v_structures(dag: nx.DiGraph) -> int:
    return sum(
        1
        for c in dag
        for a, b in combinations(dag.predecessors(c), 2)
        if not dag.has_edge(a, b) and not dag.has_edge(b, a)
    )


def exhaustive_max(n: int) -> int:
    """Most v-structures over every DAG on ``n`` nodes.

    Every DAG is a relabelling of one whose topological order is 0..n-1, so node j picks its parents among
    0..j-1. The last node's v-structures are the non-adjacent pairs of its parents, which only grow with
    the parent set, so it takes every earlier node and just the first n-1 parent sets are enumerated.
    """
    if n < 3:
        return 0
    last = n - 1
    adjacent = [[False] * last for _ in range(last)]
    best = 0

    def extend(j: int, found: int, edges: int) -> None:
        nonlocal best
        if j == last:
            best = max(best, found + last * (last - 1) // 2 - edges)
            return
        for mask in range(1 << j):
            parents = [i for i in range(j) if mask >> i & 1]
            open_pairs = sum(not adjacent[a][b] for a, b in combinations(parents, 2))
            for i in parents:
                adjacent[i][j] = adjacent[j][i] = True
            extend(j + 1, found + open_pairs, edges + len(parents))
            for i in parents:
                adjacent[i][j] = adjacent[j][i] = False

    extend(0, 0, 0)
    return best


@pytest.mark.parametrize("n", range(0, 9))
def test_the_table_is_the_exhaustive_maximum(n):
    assert max_v_structures(n) == exhaustive_max(n)


def test_the_search_agrees_with_networkx_on_every_labelled_dag_of_four_nodes():
    nodes = range(4)
    pairs = list(combinations(nodes, 2))
    best = 0
    for orientation in range(3 ** len(pairs)):  # each pair: absent, a -> b or b -> a
        dag = nx.DiGraph()
        dag.add_nodes_from(nodes)
        for k, (a, b) in enumerate(pairs):
            choice = orientation // 3**k % 3
            if choice:
                dag.add_edge(*((a, b) if choice == 1 else (b, a)))
        if nx.is_directed_acyclic_graph(dag):
            best = max(best, v_structures(dag))
    assert best == exhaustive_max(4) == 3


def test_the_eight_node_optimum_is_layered():
    dag = nx.DiGraph([(s, t) for s in "PQRST" for t in "ABC"] + [("A", "C"), ("B", "C")])
    assert v_structures(dag) == max_v_structures(8) == 31
    bipartite = max((8 - s) * s * (s - 1) // 2 for s in range(9))
    assert bipartite == 30


def test_beyond_the_table_every_collider_and_pair_counts_once():
    assert max_v_structures(9) == 9 * 28
    with pytest.raises(ValueError):
        max_v_structures(-1)


def test_independence_facts_match_networkx_on_random_dags():
    """Adjacent pairs are skipped and ancestors computed once: the facts are still every d-separation."""
    rng = random.Random(4)
    for _ in range(30):
        names = "ABCDEF"[: rng.randint(2, 6)]
        dag = nx.DiGraph()
        dag.add_nodes_from(names)
        dag.add_edges_from((a, b) for a, b in combinations(names, 2) if rng.random() < 0.4)
        facts = independence_facts(dag, tuple(names))
        for x, y in combinations(names, 2):
            others = [v for v in names if v not in (x, y)]
            separating = {frozenset(s) for k in range(len(others) + 1) for s in combinations(others, k)
                          if nx.is_d_separator(dag, {x}, {y}, set(s))}
            assert facts.independencies.get(frozenset((x, y)), frozenset()) == separating
            assert (frozenset((x, y)) in facts.correlations) == (frozenset() not in separating)
