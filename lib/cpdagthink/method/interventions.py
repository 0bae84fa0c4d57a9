"""The turn-2 probes (paper §6, Table 3): replace the emitted CPDAG object, or drop the premise, before turn 2.
(Their scoring is :mod:`cpdagthink.analysis.probes`.)

Every probe is an :data:`~cpdagthink.method.conditions.Intervention`: ``probe(instance, emitted, rng) -> Turn2Input``.
It never mutates ``emitted``, draws only from ``rng`` (so one seed gives one result), and writes in
``Turn2Input.note`` (the run record's, never shown to the model) exactly what changed, as a field-by-field diff of the shown object against the emitted
one (:func:`describe_diff`), e.g. ``"scramble_skeleton: skeleton: removed A-C; added B-D | directed: ..."``.
When turn 1 gave no parsable object the probe returns ``Turn2Input(None, True, "nothing to intervene on")``;
``drop_premise`` still drops the premise then (``include_premise=False``) and its note says so.

What each probe does (the paper's destructive probes first, then two validity-preserving ones that address
its stated limitation that "a scrambled graph may no longer be a valid CPDAG"):

``scramble_full``
    A random object over the same variables: a random adjacency set with as many pairs as the emitted one;
    as many of them directed / undirected / skeleton-only as in the emitted object; the directed ones
    oriented along a random variable order (so the directed part is acyclic); v-structures *regenerated
    consistently with the random edges* (every x -> z <- y with x, y non-adjacent); separating sets
    regenerated consistently too (for each non-adjacent pair, its common neighbours that are not colliders
    between them, which is what PC would have used to leave those triples unoriented). No Meek closure, so
    the result is generally not a valid CPDAG.
``scramble_skeleton``
    A random adjacency set of the same size (the skeleton field is rewritten as every adjacent pair).
    Pairs kept keep their status; each removed pair is matched
    with one added pair (random matching) which inherits its status (directed -> directed with a random
    direction, undirected -> undirected, skeleton-only -> skeleton-only) and hands over its separating-set
    entry (minus the removed pair's own endpoints). V-structures are left as listed.
``scramble_v_structures``
    The listed v-structures are replaced by as many random triples X -> Z <- Y over the variables (distinct
    triples, any three distinct variables, not necessarily adjacent); every other field is left as it is.
    An object listing no v-structure is returned unchanged (the note says so).
``scramble_directed``
    Every directed edge is reversed (deterministic; ``rng`` is not used). Skeleton, undirected edges,
    v-structures and separating sets stay as listed.
``drop_premise``
    The object is unchanged; the premise is removed from turn 2 (``include_premise=False``).
``swap_valid_cpdag``
    The oracle's CPDAG (``oracle.cpdag_of_dag`` -> ``CausalAnalysis.from_cpdag``) of a
    random DAG over the same variables with as many edges as the emitted adjacency set (the nearest other
    size when no other class of that size exists), guaranteed to be a valid CPDAG that differs from the
    emitted object and from the reference CPDAG of the instance's premise.
``swap_valid_cpdag_same_skeleton``
    The CPDAG of a random acyclic orientation of the emitted adjacency set that differs from the emitted
    object and from the reference CPDAG. If no such class exists (a skeleton with no unshielded triple has
    exactly one class) the emitted object is returned unchanged and the note says why.
"""

from __future__ import annotations

import random
from itertools import combinations, permutations
from typing import Any, Iterable, Mapping, Sequence

import networkx as nx

from ..causal.instance import Instance
from ..causal.oracle import UnfaithfulFactsError, analyse_premise, cpdag_of_dag
from ..causal.premise import Pair, PremiseError, pair
from .conditions import Intervention, Turn2Input
from .schema import CausalAnalysis, SeparatingSet

NOTHING = "nothing to intervene on"
_ATTEMPTS = 60
_EXHAUSTIVE_MAX_VARIABLES = 8

# ------------------------------------------------------------------------------------- object helpers


def variables_of(analysis: CausalAnalysis) -> tuple[str, ...]:
    """The object's variables in its own order, duplicates dropped, plus any name only its edges use."""
    names = dict.fromkeys(analysis.variables)
    for edge in (*analysis.skeleton, *analysis.directed_edges, *analysis.undirected_edges, *analysis.v_structures):
        names.update(dict.fromkeys(edge))
    return tuple(names)


def _ordered(p: Iterable[str], order: Mapping[str, int]) -> tuple[str, str]:
    ends = sorted(p, key=lambda v: (order.get(v, len(order)), v))
    return ends[0], ends[-1]  # a model may emit a self-loop (A, A), whose pair has one member


def adjacencies(analysis: CausalAnalysis) -> list[Pair]:
    """Every adjacent pair the object states anywhere (skeleton, directed or undirected), first mention first."""
    seen: dict[Pair, None] = {}
    for a, b in (*analysis.skeleton, *analysis.directed_edges, *analysis.undirected_edges):
        if a != b:
            seen.setdefault(pair(a, b), None)
    return list(seen)


def edge_status(analysis: CausalAnalysis) -> dict[Pair, tuple[str, tuple[str, str] | None]]:
    """Each adjacent pair's status: ``("directed", (tail, head))`` (first listed direction wins),
    ``("undirected", None)``, or ``("skeleton", None)`` for a pair listed only in the skeleton field."""
    status: dict[Pair, tuple[str, tuple[str, str] | None]] = {}
    for a, b in analysis.directed_edges:
        if a != b:
            status.setdefault(pair(a, b), ("directed", (a, b)))
    for a, b in analysis.undirected_edges:
        if a != b:
            status.setdefault(pair(a, b), ("undirected", None))
    for p in adjacencies(analysis):
        status.setdefault(p, ("skeleton", None))
    return status


def _v_key(triple: Sequence[str]) -> tuple[Pair, str]:
    x, z, y = triple
    return pair(x, y), z


def _sepset_items(analysis: CausalAnalysis) -> set[tuple[Pair, frozenset[str]]]:
    return {(pair(*s.pair), frozenset(s.separating_set)) for s in analysis.separating_sets}


def class_key(analysis: CausalAnalysis) -> tuple[frozenset, frozenset, frozenset]:
    """What identifies the graph an object describes: adjacencies, directed arcs, undirected pairs."""
    return (
        frozenset(adjacencies(analysis)),
        frozenset(tuple(e) for e in analysis.directed_edges),
        frozenset(pair(*e) for e in analysis.undirected_edges),
    )


def _build(variables: tuple[str, ...], status: Mapping[Pair, tuple[str, tuple[str, str] | None]],
           sepsets: Mapping[Pair, Iterable[str]], v_structures: Sequence[Sequence[str]]) -> CausalAnalysis:
    """An object from per-pair statuses, with every list sorted by the variable order."""
    order = {v: i for i, v in enumerate(variables)}
    rank = lambda e: tuple(order[v] for v in e)  # noqa: E731
    return CausalAnalysis(
        variables=list(variables),
        skeleton=sorted((_ordered(p, order) for p in status), key=rank),
        separating_sets=[
            SeparatingSet(pair=_ordered(p, order), separating_set=sorted(s, key=order.__getitem__))
            for p, s in sorted(sepsets.items(), key=lambda i: rank(_ordered(i[0], order)))
        ],
        v_structures=[tuple(t) for t in v_structures],
        directed_edges=sorted((e for kind, e in status.values() if kind == "directed"), key=rank),
        undirected_edges=sorted((_ordered(p, order) for p, (kind, _) in status.items() if kind == "undirected"), key=rank),
    )


# ------------------------------------------------------------------------------------------------ diff


def diff_analyses(old: CausalAnalysis, new: CausalAnalysis) -> dict[str, tuple[list[str], list[str]]]:
    """Field-by-field set difference ``{field: (removed, added)}``, items written as in notes; only fields
    that changed are present. Order within a list and duplicates are not changes."""
    order = {v: i for i, v in enumerate(variables_of(old) + tuple(v for v in variables_of(new) if v not in variables_of(old)))}

    def p(x: Pair) -> str:
        return "-".join(_ordered(x, order))

    def v(k: tuple[Pair, str]) -> str:
        a, b = _ordered(k[0], order)
        return f"{a}->{k[1]}<-{b}"

    def s(item: tuple[Pair, frozenset[str]]) -> str:
        a, b = _ordered(item[0], order)
        return f"sep({a},{b})={{{','.join(sorted(item[1], key=lambda u: (order.get(u, 99), u)))}}}"

    def sort_key(text: str) -> list:
        return [(order.get(c, 99), c) for c in text]

    fields = {
        "variables": (set(old.variables), set(new.variables), str),
        "skeleton": (set(adjacencies(old)), set(adjacencies(new)), p),
        "directed": ({tuple(e) for e in old.directed_edges}, {tuple(e) for e in new.directed_edges}, lambda e: f"{e[0]}->{e[1]}"),
        "undirected": ({pair(*e) for e in old.undirected_edges}, {pair(*e) for e in new.undirected_edges}, p),
        "v-structures": ({_v_key(t) for t in old.v_structures}, {_v_key(t) for t in new.v_structures}, v),
        "separating sets": (_sepset_items(old), _sepset_items(new), s),
    }
    out = {}
    for name, (before, after, show) in fields.items():
        removed = sorted((show(x) for x in before - after), key=sort_key)
        added = sorted((show(x) for x in after - before), key=sort_key)
        if removed or added:
            out[name] = (removed, added)
    return out


def describe_diff(old: CausalAnalysis, new: CausalAnalysis) -> str:
    """``"skeleton: removed A-C; added B-D | directed: removed A->C; added D->B"``, or ``"no change"``."""
    parts = []
    for name, (removed, added) in diff_analyses(old, new).items():
        bits = ([f"removed {', '.join(removed)}"] if removed else []) + ([f"added {', '.join(added)}"] if added else [])
        parts.append(f"{name}: {'; '.join(bits)}")
    return " | ".join(parts) or "no change"


def _result(name: str, emitted: CausalAnalysis, shown: CausalAnalysis, detail: str = "") -> Turn2Input:
    head = f"{name} ({detail})" if detail else name
    return Turn2Input(shown, True, f"{head}: {describe_diff(emitted, shown)}")


# ------------------------------------------------------------------------------------ destructive probes


def _all_pairs(variables: tuple[str, ...]) -> list[Pair]:
    return [pair(a, b) for a, b in combinations(variables, 2)]


def _random_pairs(variables: tuple[str, ...], k: int, avoid: set[Pair], rng: random.Random) -> set[Pair]:
    """``k`` random pairs, a set different from ``avoid`` whenever another set of that size exists."""
    pool = _all_pairs(variables)
    k = min(k, len(pool))
    chosen = set(rng.sample(pool, k))
    if 0 < k < len(pool):
        while chosen == avoid:
            chosen = set(rng.sample(pool, k))
    return chosen


def scramble_full(instance: Instance, emitted: CausalAnalysis | None, rng: random.Random) -> Turn2Input:
    """A random object with the emitted object's edge counts (module docstring)."""
    if emitted is None:
        return Turn2Input(None, True, NOTHING)
    variables = variables_of(emitted)
    old_status = edge_status(emitted)
    kinds = sorted(kind for kind, _ in old_status.values())  # the multiset of statuses, in a fixed order
    for _ in range(_ATTEMPTS):
        pairs = sorted(_random_pairs(variables, len(kinds), set(old_status), rng), key=sorted)
        rng.shuffle(pairs)
        rank = {v: i for i, v in enumerate(rng.sample(variables, len(variables)))}
        status = {}
        for p, kind in zip(pairs, kinds):
            a, b = sorted(p, key=rank.__getitem__)
            status[p] = (kind, (a, b) if kind == "directed" else None)
        shown = _consistent_extras(variables, status)
        if class_key(shown) != class_key(emitted) or len(variables) < 2:
            break
    counts = {k: kinds.count(k) for k in ("directed", "undirected", "skeleton")}
    detail = (f"random skeleton of {len(kinds)} pairs: {counts['directed']} directed, {counts['undirected']} undirected"
              + (f", {counts['skeleton']} skeleton-only" if counts["skeleton"] else "")
              + "; v-structures and separating sets regenerated from the random edges")
    return _result("scramble_full", emitted, shown, detail)


def _consistent_extras(variables: tuple[str, ...], status: Mapping[Pair, tuple[str, Any]]) -> CausalAnalysis:
    """Complete per-pair statuses with the v-structures and separating sets they imply (PC's reading)."""
    order = {v: i for i, v in enumerate(variables)}
    arcs = {e for kind, e in status.values() if kind == "directed"}
    neighbours = {v: {u for p in status if v in p for u in p if u != v} for v in variables}
    v_structures = []
    sepsets = {}
    for x, y in combinations(variables, 2):
        if pair(x, y) in status:
            continue
        colliders = sorted((z for z in neighbours[x] & neighbours[y] if (x, z) in arcs and (y, z) in arcs),
                           key=order.__getitem__)
        v_structures += [(x, z, y) for z in colliders]
        sepsets[pair(x, y)] = (neighbours[x] & neighbours[y]) - set(colliders)
    v_structures.sort(key=lambda t: (order[t[1]], order[t[0]], order[t[2]]))
    return _build(variables, status, sepsets, v_structures)


def scramble_skeleton(instance: Instance, emitted: CausalAnalysis | None, rng: random.Random) -> Turn2Input:
    """A random adjacency set of the same size; statuses and separating sets move with the pairs."""
    if emitted is None:
        return Turn2Input(None, True, NOTHING)
    variables = variables_of(emitted)
    status = edge_status(emitted)
    new = _random_pairs(variables, len(status), set(status), rng)
    removed = sorted(set(status) - new, key=sorted)
    added = sorted(new - set(status), key=sorted)
    rng.shuffle(added)
    sepsets = {pair(*s.pair): frozenset(s.separating_set) for s in emitted.separating_sets}  # last entry wins
    for old, fresh in zip(removed, added):
        kind, arc = status.pop(old)
        a, b = sorted(fresh)
        if kind == "directed" and rng.random() < 0.5:
            a, b = b, a
        status[fresh] = (kind, (a, b) if kind == "directed" else None)
        handed = sepsets.pop(fresh, None)
        if handed is not None:
            sepsets[old] = handed - old
    shown = _build(variables, status, sepsets, [])
    shown = shown.model_copy(update={"v_structures": list(emitted.v_structures)})
    return _result("scramble_skeleton", emitted, shown, f"random adjacency set of {len(new)} pairs")


def scramble_v_structures(instance: Instance, emitted: CausalAnalysis | None, rng: random.Random) -> Turn2Input:
    """As many random triples X -> Z <- Y as listed v-structures; nothing else changes."""
    if emitted is None:
        return Turn2Input(None, True, NOTHING)
    variables = variables_of(emitted)
    count = len(emitted.v_structures)
    if count == 0:
        return Turn2Input(emitted, True, "scramble_v_structures: none listed, object unchanged")
    pool = [(x, z, y) for x, y in combinations(variables, 2) for z in variables if z not in (x, y)]
    count = min(count, len(pool))
    old = {_v_key(t) for t in emitted.v_structures}
    chosen = rng.sample(pool, count)
    if count < len(pool):
        while {_v_key(t) for t in chosen} == old:
            chosen = rng.sample(pool, count)
    shown = emitted.model_copy(update={"v_structures": chosen})
    return _result("scramble_v_structures", emitted, shown, f"{count} random triple(s)")


def scramble_directed(instance: Instance, emitted: CausalAnalysis | None, rng: random.Random) -> Turn2Input:
    """Every directed edge reversed; nothing else changes (``rng`` unused: the probe is deterministic)."""
    if emitted is None:
        return Turn2Input(None, True, NOTHING)
    if not emitted.directed_edges:
        return Turn2Input(emitted, True, "scramble_directed: no directed edge listed, object unchanged")
    shown = emitted.model_copy(update={"directed_edges": [(b, a) for a, b in emitted.directed_edges]})
    return _result("scramble_directed", emitted, shown, f"reversed all {len(emitted.directed_edges)} directed edge(s)")


def drop_premise(instance: Instance, emitted: CausalAnalysis | None, rng: random.Random) -> Turn2Input:
    """The emitted object as is, without the premise in turn 2."""
    if emitted is None:
        return Turn2Input(None, False, "premise removed from turn 2 (no parsed object to show)")
    return Turn2Input(emitted, False, "drop_premise: premise removed from turn 2; object unchanged")


# ------------------------------------------------------------------------------- validity-preserving probes


def _reference_key(instance: Instance, variables: tuple[str, ...]) -> tuple | None:
    try:
        cpdag = analyse_premise(instance.premise).cpdag
    except (UnfaithfulFactsError, PremiseError):
        return None
    if set(cpdag.variables) != set(variables):
        return None
    return class_key(CausalAnalysis.from_cpdag(cpdag))


def _oriented(variables: tuple[str, ...], pairs: Iterable[Pair], rank: Mapping[str, int]) -> nx.DiGraph:
    dag = nx.DiGraph()
    dag.add_nodes_from(variables)
    dag.add_edges_from(tuple(sorted(p, key=rank.__getitem__)) for p in pairs)
    return dag


def _arcs(dag: nx.DiGraph) -> str:
    return ", ".join(f"{a}->{b}" for a, b in sorted(dag.edges))


def swap_valid_cpdag(instance: Instance, emitted: CausalAnalysis | None, rng: random.Random) -> Turn2Input:
    """The CPDAG of another random DAG over the same variables (module docstring)."""
    if emitted is None:
        return Turn2Input(None, True, NOTHING)
    variables = variables_of(emitted)
    forbidden = {class_key(emitted), _reference_key(instance, variables)}
    pool = _all_pairs(variables)
    wanted = min(len(adjacencies(emitted)), len(pool))
    sizes = sorted(range(len(pool) + 1), key=lambda m: (abs(m - wanted), m))
    for size in sizes:
        for _ in range(_ATTEMPTS if size == wanted else 10):
            rank = {v: i for i, v in enumerate(rng.sample(variables, len(variables)))}
            dag = _oriented(variables, rng.sample(pool, size), rank)
            shown = CausalAnalysis.from_cpdag(cpdag_of_dag(dag, variables))
            if class_key(shown) not in forbidden:
                detail = f"CPDAG of random DAG {_arcs(dag) or '(no edges)'}; {size} edge(s), emitted had {wanted}"
                return _result("swap_valid_cpdag", emitted, shown, detail)
    return Turn2Input(emitted, True, "swap_valid_cpdag: no other valid CPDAG over these variables, object unchanged")


def _colliders(dag: nx.DiGraph) -> frozenset[tuple[Pair, str]]:
    return frozenset(
        (pair(x, y), z) for z in dag for x, y in combinations(sorted(dag.predecessors(z)), 2) if not dag.has_edge(x, y)
        and not dag.has_edge(y, x)
    )


def swap_valid_cpdag_same_skeleton(instance: Instance, emitted: CausalAnalysis | None, rng: random.Random) -> Turn2Input:
    """The CPDAG of a random acyclic orientation of the emitted skeleton, of another class (module docstring)."""
    name = "swap_valid_cpdag_same_skeleton"
    if emitted is None:
        return Turn2Input(None, True, NOTHING)
    variables = variables_of(emitted)
    skeleton = sorted(adjacencies(emitted), key=sorted)
    forbidden = {class_key(emitted), _reference_key(instance, variables)}
    neighbours = {v: {u for p in skeleton if v in p for u in p if u != v} for v in variables}
    unshielded = any(pair(x, y) not in set(skeleton) for z in variables for x, y in combinations(sorted(neighbours[z]), 2))
    if not unshielded:
        return Turn2Input(emitted, True, f"{name}: no different class exists (the skeleton has no unshielded triple, "
                                         "so it has exactly one Markov equivalence class); object unchanged")
    tried: set[frozenset] = set()

    def attempt(order: Sequence[str]) -> Turn2Input | None:
        dag = _oriented(variables, skeleton, {v: i for i, v in enumerate(order)})
        key = _colliders(dag)  # same skeleton + same v-structures <=> same class (Verma & Pearl 1990)
        if key in tried:
            return None
        tried.add(key)
        shown = CausalAnalysis.from_cpdag(cpdag_of_dag(dag, variables))
        if class_key(shown) in forbidden:
            return None
        return _result(name, emitted, shown, f"CPDAG of the orientation {_arcs(dag) or '(no edges)'}")

    for _ in range(_ATTEMPTS):
        if found := attempt(rng.sample(variables, len(variables))):
            return found
    if len(variables) <= _EXHAUSTIVE_MAX_VARIABLES:
        for order in permutations(variables):  # every acyclic orientation is induced by some order
            if found := attempt(order):
                return found
        why = "every class with this skeleton is the emitted object's or the reference's"
    else:
        why = f"none found in {_ATTEMPTS} random orientations"
    return Turn2Input(emitted, True, f"{name}: no different class exists ({why}); object unchanged")


PROBES: dict[str, Intervention] = {
    "scramble_full": scramble_full,
    "scramble_skeleton": scramble_skeleton,
    "scramble_v_structures": scramble_v_structures,
    "scramble_directed": scramble_directed,
    "drop_premise": drop_premise,
    "swap_valid_cpdag": swap_valid_cpdag,
    "swap_valid_cpdag_same_skeleton": swap_valid_cpdag_same_skeleton,
}


def get_probe(name: str) -> Intervention:
    if name not in PROBES:
        raise ValueError(f"unknown probe {name!r}; choose one of {', '.join(PROBES)}")
    return PROBES[name]
