"""The CPDAG validator: hand-made objects of every violation kind, the exact certificate against brute force
(every mixed graph on four nodes), every reference CPDAG of the real split and of the stress families,
and random DAGs with one-edit mutations."""

from __future__ import annotations

import random
from itertools import combinations, product

import networkx as nx
import pytest

from analyses import make
from cpdagthink.causal.dag import independence_facts
from cpdagthink.causal.oracle import analyse_premise, cpdag_of_dag, pc_cpdag
from cpdagthink.causal.premise import pair, split_input
from cpdagthink.method.schema import CausalAnalysis, SeparatingSet
from cpdagthink.method.validate import (
    REFERENCES,
    Violation,
    ViolationKind as K,
    cpdag_certificate,
    is_cpdag,
    is_valid,
    violation_counts,
    violation_kinds,
    violations,
)
from cpdagthink.run.data import read_csv
from cpdagthink.run.generate import generate, random_dag



def reference(dag: nx.DiGraph, variables=None) -> CausalAnalysis:
    return CausalAnalysis.from_cpdag(pc_cpdag(independence_facts(dag, variables)))


COLLIDER = nx.DiGraph([("A", "C"), ("B", "C"), ("C", "D")])  # A -> C <- B, C -> D
COLLIDER_FACTS = independence_facts(COLLIDER, ("A", "B", "C", "D"))


# --------------------------------------------------------------------------------- hand-made objects

VALID = {
    "collider with a tail": reference(COLLIDER),
    "no edges": make("AB", sepsets=[(("A", "B"), [])]),
    "undirected chain": make("ABC", undirected=[("A", "B"), ("B", "C")], sepsets=[(("A", "C"), ["B"])]),
    "triangle": make("ABC", undirected=[("A", "B"), ("B", "C"), ("A", "C")]),
}

INVALID = {
    "undeclared name": (make("AB", undirected=[("A", "X")]), {K.UNKNOWN_VARIABLE}),
    "declared twice": (make("AAB", undirected=[("A", "B")]), {K.UNKNOWN_VARIABLE}),
    "skeleton lists an extra edge": (
        make("ABC", undirected=[("A", "B")], skeleton=[("A", "B"), ("A", "C")]), {K.SKELETON_MISMATCH}),
    "skeleton misses an edge": (
        make("ABC", undirected=[("A", "B"), ("B", "C")], skeleton=[("A", "B")]), {K.SKELETON_MISMATCH}),
    "self-loop": (make("AB", directed=[("A", "A")]), {K.SKELETON_MISMATCH, K.NOT_A_CPDAG}),
    "directed and undirected": (
        make("AB", directed=[("A", "B")], undirected=[("A", "B")]), {K.DIRECTED_AND_UNDIRECTED, K.NOT_A_CPDAG}),
    "directed both ways": (
        make("AB", directed=[("A", "B"), ("B", "A")]), {K.DIRECTED_AND_UNDIRECTED, K.NOT_A_CPDAG}),
    "directed cycle": (
        make("ABC", directed=[("A", "B"), ("B", "C"), ("C", "A")]), {K.DIRECTED_CYCLE, K.NOT_A_CPDAG}),
    "unlisted collider": (
        make("ABC", directed=[("A", "C"), ("B", "C")], sepsets=[(("A", "B"), [])]), {K.V_STRUCTURE_CONTRADICTS_EDGES}),
    "listed collider on undirected edges": (
        make("ABC", undirected=[("A", "C"), ("B", "C")], v=[("A", "C", "B")]), {K.V_STRUCTURE_CONTRADICTS_EDGES}),
    "shielded v-structure": (
        make("ABC", directed=[("A", "C"), ("B", "C")], undirected=[("A", "B")], v=[("A", "C", "B")]),
        {K.V_STRUCTURE_CONTRADICTS_EDGES, K.NOT_A_CPDAG}),
    "collider inside its sepset": (
        make("ABC", directed=[("A", "C"), ("B", "C")], v=[("A", "C", "B")], sepsets=[(("A", "B"), ["C"])]),
        {K.V_STRUCTURE_CONTRADICTS_SEPSET}),
    "non-collider outside its sepset": (
        make("ABC", undirected=[("A", "C"), ("B", "C")], sepsets=[(("A", "B"), [])]), {K.V_STRUCTURE_CONTRADICTS_SEPSET}),
    "sepset of an adjacent pair": (
        make("AB", undirected=[("A", "B")], sepsets=[(("A", "B"), [])]), {K.V_STRUCTURE_CONTRADICTS_SEPSET}),
    "not Meek-closed (R1)": (
        make("ABCD", directed=[("A", "C"), ("B", "C")], undirected=[("C", "D")], v=[("A", "C", "B")]),
        {K.NOT_MEEK_CLOSED, K.NOT_A_CPDAG}),
    "not Meek-closed (R2)": (
        make("ABC", directed=[("A", "B"), ("B", "C")], undirected=[("A", "C")]), {K.NOT_MEEK_CLOSED, K.NOT_A_CPDAG}),
    "chordless undirected square": (
        make("ABCD", undirected=[("A", "B"), ("B", "C"), ("C", "D"), ("A", "D")]), {K.NON_CHORDAL_COMPONENT, K.NOT_A_CPDAG}),
    "unprotected arc": (make("AB", directed=[("A", "B")]), {K.NOT_A_CPDAG}),
    "fully directed chain": (make("ABC", directed=[("A", "B"), ("B", "C")]), {K.NOT_A_CPDAG}),
}

FACTS_CASES = {
    "the premise's own CPDAG": (reference(COLLIDER), set()),
    "another DAG's CPDAG": (make("ABCD", undirected=[("A", "C"), ("B", "C"), ("C", "D")]), {K.FACTS_CLASS}),
    "an edge missing": (
        make("ABCD", directed=[("A", "C"), ("B", "C")], v=[("A", "C", "B")]), {K.FACTS_SKELETON, K.FACTS_CLASS}),
    "an extra edge": (
        make("ABCD", undirected=[("A", "B"), ("A", "C"), ("B", "C"), ("C", "D")]), {K.FACTS_SKELETON, K.FACTS_CLASS}),
    "an unstated sepset": (
        reference(COLLIDER).model_copy(update={"separating_sets": [SeparatingSet(pair=("A", "B"), separating_set=["D"])]}),
        {K.FACTS_SEPSET}),
}


@pytest.mark.parametrize("name", sorted(VALID))
def test_valid_objects_yield_nothing(name):
    assert list(violations(VALID[name])) == []
    assert is_valid(VALID[name]) and is_cpdag(VALID[name])


@pytest.mark.parametrize("name", sorted(INVALID))
def test_invalid_objects_yield_exactly_their_kinds(name):
    analysis, kinds = INVALID[name]
    found = list(violations(analysis))
    assert {v.kind for v in found} == kinds, [str(v) for v in found]
    assert all(isinstance(v, Violation) and v.detail for v in found)
    assert not is_valid(analysis)


@pytest.mark.parametrize("name", sorted(FACTS_CASES))
def test_premise_checks(name):
    analysis, kinds = FACTS_CASES[name]
    assert violation_kinds(analysis, COLLIDER_FACTS) == kinds
    assert is_valid(analysis)  # each is a consistent CPDAG; only the premise check objects
    assert is_valid(analysis, COLLIDER_FACTS) == (not kinds)


def test_every_kind_is_exercised_and_documented():
    exercised = set().union(*(k for _, k in INVALID.values()), *(k for _, k in FACTS_CASES.values()))
    assert exercised == set(K)
    assert set(REFERENCES) == set(K) and all(k.reference for k in K)


def test_premise_with_other_variables_is_an_unknown_variable():
    dag = COLLIDER.copy()
    dag.add_node("E")
    assert violation_kinds(reference(COLLIDER), independence_facts(dag, ("A", "B", "C", "D", "E"))) == {K.UNKNOWN_VARIABLE}


def test_details_name_the_offending_edges():
    (cycle,) = [v for v in violations(INVALID["directed cycle"][0]) if v.kind is K.DIRECTED_CYCLE]
    assert all(arc in cycle.detail for arc in ("A->B", "B->C", "C->A"))
    (meek,) = [v for v in violations(INVALID["not Meek-closed (R1)"][0]) if v.kind is K.NOT_MEEK_CLOSED]
    assert "C->D" in meek.detail
    (collider,) = violations(INVALID["unlisted collider"][0])
    assert "A->C<-B" in collider.detail and str(collider).startswith("v_structure_contradicts_edges")


def test_violation_counts_count_objects_once_per_kind():
    counts = violation_counts([INVALID["directed cycle"][0], INVALID["unprotected arc"][0], VALID["triangle"]])
    assert counts == {K.DIRECTED_CYCLE: 1, K.NOT_A_CPDAG: 2}


# ------------------------------------------------------------------ the certificate against brute force


def _v_structures(dag: nx.DiGraph) -> frozenset:
    return frozenset((pair(a, b), z) for z in dag for a, b in combinations(dag.predecessors(z), 2)
                     if not dag.has_edge(a, b) and not dag.has_edge(b, a))


def brute_force_cpdags(nodes, skeleton) -> set[tuple[frozenset, frozenset]]:
    """Every CPDAG on a skeleton, without Meek's rules: group the acyclic orientations by v-structures
    (Verma & Pearl 1990); an edge is directed iff every member of its class orients it the same way."""
    classes: dict[frozenset, list[nx.DiGraph]] = {}
    for flips in product((False, True), repeat=len(skeleton)):
        dag = nx.DiGraph()
        dag.add_nodes_from(nodes)
        dag.add_edges_from((b, a) if f else (a, b) for (a, b), f in zip(skeleton, flips))
        if nx.is_directed_acyclic_graph(dag):
            classes.setdefault(_v_structures(dag), []).append(dag)
    found = set()
    for members in classes.values():
        directed = frozenset(e for e in members[0].edges if all(m.has_edge(*e) for m in members))
        undirected = frozenset(pair(*e) for e in members[0].edges if e not in directed)
        found.add((directed, undirected))
    return found


def test_certificate_is_exact_on_every_mixed_graph_of_four_nodes():
    nodes, pairs = "ABCD", list(combinations("ABCD", 2))
    checked = cpdags = 0
    for chosen in product((False, True), repeat=len(pairs)):
        skeleton = [p for p, c in zip(pairs, chosen) if c]
        truth = brute_force_cpdags(nodes, skeleton)
        for marks in product("<>-", repeat=len(skeleton)):
            directed = frozenset((a, b) if m == ">" else (b, a) for (a, b), m in zip(skeleton, marks) if m != "-")
            undirected = frozenset(pair(a, b) for (a, b), m in zip(skeleton, marks) if m == "-")
            expected = (directed, undirected) in truth
            assert (cpdag_certificate(directed, undirected, nodes) is not None) == expected, (directed, undirected)
            checked, cpdags = checked + 1, cpdags + expected
    assert checked == 4 ** 6 and cpdags == sum(len(brute_force_cpdags(nodes, [p for p, c in zip(pairs, ch) if c]))
                                               for ch in product((False, True), repeat=len(pairs)))


def test_certificate_witness_is_a_member():
    witness = cpdag_certificate([("A", "C"), ("B", "C"), ("C", "D")], [], "ABCD")
    assert witness is not None and set(witness.edges) == set(COLLIDER.edges)
    assert cpdag_certificate([("A", "B")], [], "AB") is None


# ------------------------------------------------------------------------------ reference CPDAGs pass


def test_every_reference_cpdag_of_the_real_split_is_valid(test_csv):
    premises = {i.premise for i in read_csv(test_csv, split="test")}
    assert len(premises) > 1
    for premise in premises:
        analysis = analyse_premise(premise)
        emitted = CausalAnalysis.from_cpdag(analysis.cpdag)
        assert list(violations(emitted, analysis.facts)) == [], premise


@pytest.mark.parametrize("family", ["random7", "alarm7", "asia8"])
def test_every_reference_cpdag_of_the_stress_families_is_valid(family):
    rows = generate(family, seed=0, graphs=5, per_graph=4)
    premises = {split_input(r.input)[0] for r in rows}
    assert premises
    for premise in premises:
        analysis = analyse_premise(premise)
        assert list(violations(CausalAnalysis.from_cpdag(analysis.cpdag), analysis.facts)) == [], premise


# ------------------------------------------------------------------------------ random DAGs, mutations


def _mutations(analysis: CausalAnalysis, rng: random.Random) -> dict[str, CausalAnalysis]:
    out = {}
    directed = list(analysis.directed_edges)
    if directed:
        a, b = edge = rng.choice(directed)
        rest = [e for e in directed if e != edge]
        out["flip"] = analysis.model_copy(update={"directed_edges": rest + [(b, a)]})
        out["undirect"] = analysis.model_copy(update={"directed_edges": rest,
                                                      "undirected_edges": list(analysis.undirected_edges) + [edge]})
    if analysis.v_structures:
        dropped = rng.choice(analysis.v_structures)
        out["drop_v"] = analysis.model_copy(update={"v_structures": [v for v in analysis.v_structures if v != dropped]})
    return out


def test_random_dags_pass_and_one_edit_mutations_are_caught():
    """A mutated graph may be another DAG's CPDAG (then NOT_A_CPDAG must stay silent), but its stale
    v-structure list still betrays it: two CPDAGs with one skeleton and one set of v-structures are the same
    CPDAG (Verma & Pearl 1990), so every one-edit mutation yields some violation."""
    rng = random.Random(7)
    seen = {"flip": 0, "undirect": 0, "drop_v": 0}
    still_cpdag = {"flip": 0, "undirect": 0, "drop_v": 0}
    for _ in range(100):
        dag = random_dag(rng.randint(4, 7), rng.choice([0.3, 0.5]), rng)
        cpdag = pc_cpdag(independence_facts(dag))
        analysis = CausalAnalysis.from_cpdag(cpdag)
        assert list(violations(analysis)) == []
        recomputed = cpdag_of_dag(dag)
        assert (recomputed.directed, recomputed.undirected) == (cpdag.directed, cpdag.undirected)
        for name, mutated in _mutations(analysis, rng).items():
            kinds = violation_kinds(mutated)
            edges_are_cpdag = is_cpdag(mutated)
            seen[name] += 1
            still_cpdag[name] += edges_are_cpdag
            assert kinds, name
            assert (K.NOT_A_CPDAG in kinds) == (not edges_are_cpdag)
            if edges_are_cpdag:
                assert K.V_STRUCTURE_CONTRADICTS_EDGES in kinds
    assert min(seen.values()) >= 20, seen
    assert still_cpdag["drop_v"] == seen["drop_v"] and still_cpdag["flip"] > 0  # both branches exercised


def test_the_declared_once_rule_is_the_projects_reading_not_the_papers():
    """Appendix F.1 lists the schema's fields; "declared once" is this project's consistency rule."""
    text = K.UNKNOWN_VARIABLE.reference
    assert "this project's reading" in text and "(schema, appendix F.1)" not in text


def test_a_name_the_premise_lacks_is_an_unknown_variable_given_the_premise_variables():
    emitted = make("ABCE", directed=[("A", "C"), ("B", "C")], v=[("A", "C", "B")])
    assert violation_kinds(emitted) == set()  # self-consistent on its own names
    found = list(violations(emitted, variables=("A", "B", "C", "D")))
    assert [v.kind for v in found] == [K.UNKNOWN_VARIABLE] and "premise's {A, B, C, D}" in found[0].detail
