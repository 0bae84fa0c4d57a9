"""The turn-2 probes: what each one changes, that its note says so, determinism, validity of the swaps."""

from __future__ import annotations

import random

import networkx as nx
import pytest

from cpdagthink.causal.dag import independence_facts
from cpdagthink.causal.instance import Instance
from cpdagthink.causal.oracle import PDAG, consistent_extensions, cpdag_of_dag, pc_cpdag
from cpdagthink.causal.premise import pair, verbalise_premise
from cpdagthink.method.interventions import (
    NOTHING,
    PROBES,
    adjacencies,
    class_key,
    describe_diff,
    swap_valid_cpdag_same_skeleton,
)
from cpdagthink.method.schema import CausalAnalysis

VARIABLES = ("A", "B", "C", "D", "E", "F")
# CPDAG: the v-structure A -> C <- B, C -> D forced by Meek's R1, A - E and E - F undirected.
DAG_EDGES = [("A", "C"), ("B", "C"), ("C", "D"), ("E", "F"), ("A", "E")]


def dag_of(edges, variables=VARIABLES) -> nx.DiGraph:
    dag = nx.DiGraph()
    dag.add_nodes_from(variables)
    dag.add_edges_from(edges)
    return dag


def instance_of(dag: nx.DiGraph, hypothesis: str = "A directly causes C.", variables=VARIABLES) -> Instance:
    premise = verbalise_premise(independence_facts(dag, tuple(variables)))
    return Instance(id="t-0", premise=premise, hypothesis=hypothesis, num_variables=len(variables),
                    template="parent", label=1, split="t", source="constructed")


@pytest.fixture(scope="module")
def analysis() -> CausalAnalysis:
    built = CausalAnalysis(
        variables=list(VARIABLES),
        skeleton=[("A", "C"), ("A", "E"), ("B", "C"), ("C", "D"), ("E", "F")],
        separating_sets=[
            {"pair": ("A", "B"), "separating_set": []},
            {"pair": ("A", "D"), "separating_set": ["C"]},
            {"pair": ("A", "F"), "separating_set": ["E"]},
            {"pair": ("B", "D"), "separating_set": ["C"]},
            {"pair": ("B", "E"), "separating_set": []},
            {"pair": ("B", "F"), "separating_set": []},
            {"pair": ("C", "E"), "separating_set": ["A"]},
            {"pair": ("C", "F"), "separating_set": ["A"]},
            {"pair": ("D", "E"), "separating_set": ["A"]},
            {"pair": ("D", "F"), "separating_set": ["A"]},
        ],
        v_structures=[("A", "C", "B")],
        directed_edges=[("A", "C"), ("B", "C"), ("C", "D")],
        undirected_edges=[("A", "E"), ("E", "F")],
    )
    assert class_key(built) == class_key(CausalAnalysis.from_cpdag(cpdag_of_dag(dag_of(DAG_EDGES), VARIABLES)))  # a real CPDAG
    return built


@pytest.fixture(scope="module")
def instance() -> Instance:
    return instance_of(dag_of(DAG_EDGES))


def statuses(a: CausalAnalysis) -> dict:
    out = {pair(*e): ("d", tuple(e)) for e in a.directed_edges}
    out.update({pair(*e): ("u", None) for e in a.undirected_edges})
    return out


def is_valid_cpdag(a: CausalAnalysis) -> bool:
    """The object is the PC output of one of its own DAGs' d-separations (hence a valid CPDAG)."""
    graph = PDAG(tuple(a.variables), {tuple(e) for e in a.directed_edges}, {pair(*e) for e in a.undirected_edges})
    member = next(consistent_extensions(graph))
    rebuilt = CausalAnalysis.from_cpdag(pc_cpdag(independence_facts(member, tuple(a.variables))))
    return class_key(rebuilt) == class_key(a) and {tuple(v) for v in rebuilt.v_structures} == {tuple(v) for v in a.v_structures}


# ----------------------------------------------------------------------------------------- every probe


@pytest.mark.parametrize("name", list(PROBES))
def test_probe_is_deterministic_keeps_variables_and_reports_the_diff(name, analysis, instance):
    before = analysis.model_copy(deep=True)
    for seed in range(4):
        first = PROBES[name](instance, analysis, random.Random(seed))
        second = PROBES[name](instance, analysis, random.Random(seed))
        assert first == second
        assert analysis == before  # never mutated
        assert first.analysis.variables == analysis.variables
        assert first.note.startswith(name)
        diff = describe_diff(analysis, first.analysis)
        assert first.note.endswith(diff) or "unchanged" in first.note


@pytest.mark.parametrize("name", list(PROBES))
def test_nothing_to_intervene_on(name, instance):
    given = PROBES[name](instance, None, random.Random(0))
    assert given.analysis is None
    if name == "drop_premise":
        assert given.include_premise is False and "premise removed" in given.note
    else:
        assert given.include_premise is True and given.note == NOTHING


def test_random_probes_depend_on_the_seed(analysis, instance):
    for name in ("scramble_full", "scramble_skeleton", "scramble_v_structures", "swap_valid_cpdag"):
        shown = {PROBES[name](instance, analysis, random.Random(seed)).analysis.model_dump_json() for seed in range(8)}
        assert len(shown) > 1, name


# ---------------------------------------------------------------------------------------- each probe


def test_scramble_skeleton_moves_pairs_and_carries_their_status(analysis, instance):
    for seed in range(6):
        given = PROBES["scramble_skeleton"](instance, analysis, random.Random(seed))
        new, old = given.analysis, analysis
        before, after = set(adjacencies(old)), set(adjacencies(new))
        assert len(after) == len(before) and after != before
        removed = sorted("-".join(sorted(p)) for p in before - after)
        added = sorted("-".join(sorted(p)) for p in after - before)
        assert f"skeleton: removed {', '.join(removed)}; added {', '.join(added)}" in given.note
        kept = before & after
        assert {p: s for p, s in statuses(new).items() if p in kept} == {p: s for p, s in statuses(old).items() if p in kept}
        assert (len(new.directed_edges), len(new.undirected_edges)) == (len(old.directed_edges), len(old.undirected_edges))
        assert new.v_structures == old.v_structures
        sepset_pairs = {pair(*s.pair) for s in new.separating_sets}
        assert not sepset_pairs & after  # separating sets only for non-adjacent pairs
        assert all(not set(s.pair) & set(s.separating_set) for s in new.separating_sets)


def test_scramble_v_structures_changes_only_the_v_structures(analysis, instance):
    given = PROBES["scramble_v_structures"](instance, analysis, random.Random(3))
    new = given.analysis
    assert len(new.v_structures) == len(analysis.v_structures)
    assert new.model_copy(update={"v_structures": analysis.v_structures}) == analysis
    (x, z, y), = new.v_structures
    assert len({x, y, z}) == 3 and {frozenset((x, y)), z} != {frozenset(("A", "B")), "C"}
    assert "v-structures: removed A->C<-B; added" in given.note and f"{z}<-" in given.note
    assert "skeleton" not in given.note and "directed" not in given.note
    empty = analysis.model_copy(update={"v_structures": []})
    same = PROBES["scramble_v_structures"](instance, empty, random.Random(0))
    assert same.analysis == empty and "none listed" in same.note


def test_scramble_directed_reverses_every_arc(analysis, instance):
    given = PROBES["scramble_directed"](instance, analysis, random.Random(0))
    assert set(map(tuple, given.analysis.directed_edges)) == {("C", "A"), ("C", "B"), ("D", "C")}
    assert given.note == ("scramble_directed (reversed all 3 directed edge(s)): directed: removed A->C, B->C, C->D; "
                          "added C->A, C->B, D->C")
    assert given.analysis.model_copy(update={"directed_edges": analysis.directed_edges}) == analysis


def test_scramble_full_keeps_counts_and_regenerates_consistent_fields(analysis, instance):
    for seed in range(6):
        new = PROBES["scramble_full"](instance, analysis, random.Random(seed)).analysis
        adjacent = set(adjacencies(new))
        assert len(adjacent) == 5 and adjacent != set(adjacencies(analysis))
        assert (len(new.directed_edges), len(new.undirected_edges)) == (3, 2)
        assert nx.is_directed_acyclic_graph(nx.DiGraph([tuple(e) for e in new.directed_edges]))
        arcs = {tuple(e) for e in new.directed_edges}
        expected = {(frozenset((x, y)), z) for x, z in arcs for y, z2 in arcs
                    if z2 == z and x != y and pair(x, y) not in adjacent}
        assert {(frozenset((x, y)), z) for x, z, y in new.v_structures} == expected
        for s in new.separating_sets:
            x, y = s.pair
            assert pair(x, y) not in adjacent
            assert not {(frozenset((x, y)), z) for z in s.separating_set} & expected


def test_drop_premise_keeps_the_object(analysis, instance):
    given = PROBES["drop_premise"](instance, analysis, random.Random(0))
    assert given.analysis is analysis and given.include_premise is False and "premise removed" in given.note


def test_swap_valid_cpdag_is_a_different_valid_cpdag_of_the_same_size(analysis, instance):
    for seed in range(8):
        given = PROBES["swap_valid_cpdag"](instance, analysis, random.Random(seed))
        new = given.analysis
        assert is_valid_cpdag(new)
        assert class_key(new) != class_key(analysis)
        assert len(adjacencies(new)) == len(adjacencies(analysis))
        assert "CPDAG of random DAG" in given.note


def test_swap_valid_cpdag_avoids_the_reference_when_the_emitted_object_is_wrong(instance, analysis):
    wrong = analysis.model_copy(update={"directed_edges": [], "undirected_edges": [], "skeleton": [], "v_structures": []})
    for seed in range(5):
        new = PROBES["swap_valid_cpdag"](instance, wrong, random.Random(seed)).analysis
        assert is_valid_cpdag(new) and class_key(new) not in {class_key(wrong), class_key(analysis)}


def test_swap_same_skeleton_changes_the_class_not_the_skeleton(analysis, instance):
    for seed in range(8):
        given = PROBES["swap_valid_cpdag_same_skeleton"](instance, analysis, random.Random(seed))
        new = given.analysis
        assert is_valid_cpdag(new)
        assert set(adjacencies(new)) == set(adjacencies(analysis))
        assert class_key(new) != class_key(analysis)
        assert "skeleton:" not in given.note and "CPDAG of the orientation" in given.note


def test_swap_same_skeleton_says_so_when_no_other_class_exists():
    triangle = CausalAnalysis.from_cpdag(cpdag_of_dag(dag_of([("A", "B"), ("B", "C"), ("A", "C")], ("A", "B", "C")), ("A", "B", "C")))
    inst = instance_of(dag_of([("A", "B"), ("B", "C"), ("A", "C")], ("A", "B", "C")), variables=("A", "B", "C"))
    given = swap_valid_cpdag_same_skeleton(inst, triangle, random.Random(0))
    assert given.analysis is triangle and "no different class exists" in given.note
    # A path A - B - C has two classes: the chain class (the reference here) and the collider.
    chain = dag_of([("A", "B"), ("B", "C")], ("A", "B", "C"))
    emitted = CausalAnalysis.from_cpdag(cpdag_of_dag(chain, ("A", "B", "C")))
    given = swap_valid_cpdag_same_skeleton(instance_of(chain, variables=("A", "B", "C")), emitted, random.Random(0))
    assert given.analysis.v_structures == [("A", "B", "C")]


def test_a_self_loop_in_an_emitted_object_is_described_not_a_crash():
    """Seen on the default model: an edge (A, A) in the object made the probe's note crash the chapter."""
    from analyses import make

    from cpdagthink.method.interventions import describe_diff

    looped = make("ABC", directed=[("A", "B")], undirected=[("A", "A")])
    assert "removed A-A" in describe_diff(looped, make("ABC", directed=[("A", "B")]))
