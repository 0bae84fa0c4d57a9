"""Benchmark: label the whole Corr2Cause test split in-process, against brute-force enumeration.

Prints the oracle's wall-clock for 1162 rows from a cold cache (every premise parsed, PC run and certified
once; rows then share their premise's analysis) and the same labels computed by brute force (every acyclic
orientation of the skeleton with the same v-structures, relations by simple path enumeration), measured in the
same run. Target: the oracle under 1 s on this 2-core machine.

Then the rows whose classes are too large to enumerate: every pair of 8, 9 and 10 variables
correlated (one undirected component, n! DAGs), and the two 10-variable premises with the most text (no edge
at all, and a chain), each labelled for all four relations from a cold cache: wall-clock and peak memory
(tracemalloc, in a second pass so that tracing does not slow the timed one). Target: under 1 s per row.

    CORR2CAUSE_CSV=../shared/corr2cause/test.csv .venv/bin/python benchmarks/oracle.py
"""

from __future__ import annotations

import sys
import time
import tracemalloc
from itertools import combinations, product
from math import factorial
from pathlib import Path

import networkx as nx

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from test_oracle import brute_force_truths  # noqa: E402  (the tests' independent brute force)

from cpdagthink.causal.dag import independence_facts  # noqa: E402
from cpdagthink.causal.oracle import analyse_premise, label_text  # noqa: E402
from cpdagthink.causal.premise import (Facts, Query, Relation, pair, parse_hypothesis, parse_premise,  # noqa: E402
                                verbalise_hypothesis, verbalise_premise)
from cpdagthink.run.data import load_split  # noqa: E402


def brute_force_class(facts) -> list[nx.DiGraph]:
    """Every acyclic orientation of the skeleton whose colliders are exactly the unshielded triples whose
    middle node is in no separating set (read straight off the facts, not from the oracle)."""
    adjacent = {frozenset(p) for p in combinations(facts.variables, 2) if not facts.independencies.get(frozenset(p))}
    triples = [(x, z, y) for z in facts.variables for x, y in combinations(facts.variables, 2)
               if z not in (x, y) and {frozenset((x, z)), frozenset((y, z))} <= adjacent and frozenset((x, y)) not in adjacent]
    colliders = {t for t in triples if all(t[1] not in s for s in facts.independencies[frozenset((t[0], t[2]))])}
    edges = [tuple(sorted(p)) for p in adjacent]
    members = []
    for flips in product((0, 1), repeat=len(edges)):
        g = nx.DiGraph()
        g.add_nodes_from(facts.variables)
        g.add_edges_from((b, a) if f else (a, b) for (a, b), f in zip(edges, flips))
        if nx.is_directed_acyclic_graph(g) and {t for t in triples if g.has_edge(t[0], t[1]) and g.has_edge(t[2], t[1])} == colliders:
            members.append(g)
    return members


def brute_force_label(premise: str, hypothesis: str, cache: dict) -> int:
    if premise not in cache:
        facts = parse_premise(premise)
        cache[premise] = (facts, brute_force_class(facts))
    facts, members = cache[premise]
    query = parse_hypothesis(hypothesis, facts.variables)
    return int(all(query in brute_force_truths(m, [query]) for m in members))


def large_premises() -> list[tuple[str, str]]:
    """(description, premise text) of the rows the enumerating oracle could not label."""
    rows = []
    for n in (8, 9, 10):
        names = tuple("ABCDEFGHIJ"[:n])
        everything = Facts(names, frozenset(pair(a, b) for a, b in combinations(names, 2)), {})
        rows.append((f"{n} variables, every pair correlated ({factorial(n)} DAGs)", verbalise_premise(everything)))
    names = tuple("ABCDEFGHIJ")
    for shape, edges in (("no edge", []), ("a chain", list(zip(names, names[1:])))):
        dag = nx.DiGraph(edges)
        dag.add_nodes_from(names)
        rows.append((f"10 variables, {shape} (1 DAG)", verbalise_premise(independence_facts(dag, names))))
    return rows


def label_all_relations(premise: str) -> list[int | None]:
    analyse_premise.cache_clear()
    return [label_text(f"{premise} Hypothesis: {verbalise_hypothesis(Query(r, 'B', 'A'))}").label for r in Relation]


def large_rows() -> None:
    print("rows too large to enumerate: four rows each (one per relation, sharing the premise), cold cache:")
    for description, premise in large_premises():
        start = time.perf_counter()
        labels = label_all_relations(premise)
        seconds = time.perf_counter() - start
        tracemalloc.start()
        label_all_relations(premise)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        print(f"  {description}: premise {len(premise) / 1e3:.0f} kB, labels {labels}, {seconds:.3f} s, "
              f"peak {peak / 2**20:.1f} MiB  target < 1 s: {'met' if seconds < 1 else 'MISSED'}")


def main() -> None:
    instances = load_split("test")
    analyse_premise.cache_clear()
    start = time.perf_counter()
    labels = [label_text(i.text).label for i in instances]
    oracle_s = time.perf_counter() - start
    warm_start = time.perf_counter()
    [label_text(i.text).label for i in instances]
    warm_s = time.perf_counter() - warm_start

    cache: dict = {}
    start = time.perf_counter()
    brute = [brute_force_label(i.premise, i.hypothesis, cache) for i in instances]
    brute_s = time.perf_counter() - start
    assert brute == labels, "brute force and oracle disagree"

    print(f"rows: {len(instances)}, distinct premises: {analyse_premise.cache_info().currsize}")
    print(f"oracle, cold cache: {oracle_s:.3f} s ({oracle_s / len(instances) * 1e3:.3f} ms/row)  target < 1 s: "
          f"{'met' if oracle_s < 1 else 'MISSED'}")
    print(f"oracle, warm cache: {warm_s:.3f} s")
    print(f"brute-force enumeration (same rows, same run): {brute_s:.3f} s")
    print(f"speed-up of the oracle over brute force: {brute_s / oracle_s:.1f}x")
    large_rows()


if __name__ == "__main__":
    main()
