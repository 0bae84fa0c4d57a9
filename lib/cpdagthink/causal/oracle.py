"""The PC algorithm with the premise as its independence oracle, and exact equivalence-class queries.

Steps (each a small function): skeleton and separating sets, v-structures, Meek's rules -> CPDAG. A
hypothesis is entailed iff it holds in every DAG of the class, and that is decided on the CPDAG itself
(:func:`entailed_by_cpdag`: an arc for direct causes, polynomially many witness members for the other three
relations), so labelling a premise costs polynomial time in its variables, however large its class. The
faithfulness certificate uses one member (:func:`one_extension`).

The class can still be listed member by member (:func:`consistent_extensions`, never the 2^|E| orientations
of the skeleton): pick an undirected edge, orient it each way, close under Meek's rules, recurse. By Meek
(1995, Thm. 2-4) every branch ends in a distinct member and none is a dead end, so the cost is linear in the
class size, which is exponential in the largest undirected (chordal) component: diagnostics and tests only.

The module is longer than the others because its one job needs the whole chain in one place: the label is
exact only if the skeleton, the orientation rules, the class's members and the entailment queries agree on one
:class:`PDAG` and one Meek closure, and a reader checks that against Meek (1995) reading them together.
"""

from __future__ import annotations

import copy
import functools
from dataclasses import dataclass, field
from itertools import combinations
from typing import Callable, Iterable, Iterator, Mapping, Sequence

import networkx as nx

from ..errors import CpdagthinkError
from .dag import d_separated, holds, independence_facts
from .premise import (Facts, Pair, PremiseError, Query, Relation, pair, parse_hypothesis, parse_premise,
                      split_input)


# Whether x and y are independent given a conditioning set: a premise's stated facts, or a DAG's d-separation.
Independence = Callable[[str, str, frozenset[str]], bool]


class UnfaithfulFactsError(CpdagthinkError, ValueError):
    """No DAG has exactly these (in)dependencies: the premise cannot be labelled."""


@dataclass
class PDAG:
    """A partially directed graph: directed arcs ``(a, b)`` meaning a -> b, and undirected pairs.

    Change it only through :meth:`orient`: it keeps per-node indexes so that Meek's rules cost a lookup, not a
    scan of every edge.
    """

    variables: tuple[str, ...]
    directed: set[tuple[str, str]] = field(default_factory=set)
    undirected: set[Pair] = field(default_factory=set)

    def __post_init__(self) -> None:
        nodes = set(self.variables) | {v for e in self.directed for v in e} | {v for p in self.undirected for v in p}
        self._parents: dict[str, set[str]] = {v: set() for v in nodes}
        self._children: dict[str, set[str]] = {v: set() for v in nodes}
        self._neighbours: dict[str, set[str]] = {v: set() for v in nodes}
        for a, b in self.directed:
            self._parents[b].add(a)
            self._children[a].add(b)
        for p in self.undirected:
            if len(p) == 2:  # an emitted self-loop (A, A) is a one-member pair: kept, but no one's neighbour
                a, b = p
                self._neighbours[a].add(b)
                self._neighbours[b].add(a)

    def copy(self) -> "PDAG":
        twin = copy.copy(self)  # the indexes are copied, not rebuilt from the edges
        twin.directed, twin.undirected = set(self.directed), set(self.undirected)
        twin._parents, twin._children, twin._neighbours = (
            {v: set(s) for v, s in index.items()} for index in (self._parents, self._children, self._neighbours))
        return twin

    def adjacent(self, a: str, b: str) -> bool:
        return b in self._parents.get(a, ()) or b in self._children.get(a, ()) or b in self._neighbours.get(a, ())

    def orient(self, a: str, b: str) -> None:
        """Turn the undirected edge a - b into a -> b; orienting against an arc is a contradiction."""
        if (b, a) in self.directed:
            raise UnfaithfulFactsError(f"conflicting orientations of {a} - {b}")
        self.undirected.discard(pair(a, b))
        self._neighbours.setdefault(a, set()).discard(b)
        self._neighbours.setdefault(b, set()).discard(a)
        self.directed.add((a, b))
        self._children.setdefault(a, set()).add(b)
        self._parents.setdefault(b, set()).add(a)

    def undirected_neighbours(self, a: str) -> set[str]:
        return set(self._neighbours.get(a, ()))

    def parents(self, a: str) -> set[str]:
        return set(self._parents.get(a, ()))

    def children(self, a: str) -> set[str]:
        return set(self._children.get(a, ()))

    def arcs_acyclic(self) -> bool:
        """Whether the directed arcs contain no cycle (Kahn's algorithm on the kept indexes)."""
        waiting = {v: len(ps) for v, ps in self._parents.items()}
        ready = [v for v, n in waiting.items() if n == 0]
        for v in ready:  # grows while it is read
            for child in self._children.get(v, ()):
                waiting[child] -= 1
                if waiting[child] == 0:
                    ready.append(child)
        return len(ready) == len(waiting)

    def to_dag(self) -> nx.DiGraph:
        if self.undirected:
            raise ValueError("graph still has undirected edges")
        if not self.arcs_acyclic():
            raise UnfaithfulFactsError("the directed edges contain a cycle")
        dag = nx.DiGraph()
        dag.add_nodes_from(self.variables)
        dag.add_edges_from(self.directed)
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


def _separating_set(p: Pair, neighbours: Mapping[str, set[str]], size: int, independent: Independence,
                    stated: Callable[[Pair], Iterable[frozenset[str]]] | None) -> frozenset[str] | None:
    """The first set of ``size`` variables among the current ``neighbours`` of one end of ``p`` (the lesser
    end's first) that separates it, as :func:`learn_skeleton` searches; None when no such set does."""
    x, y = sorted(p)
    for a, b in ((x, y), (y, x)):
        allowed = neighbours[a] - {b}
        if stated is None:
            tried = (frozenset(s) for s in combinations(sorted(allowed), size))
            found = next((s for s in tried if independent(x, y, s)), None)
        else:
            fitting = [s for s in stated(p) if len(s) == size and s <= allowed]
            found = min(fitting, key=sorted, default=None)
        if found is not None:
            return found
    return None


def learn_skeleton(
    variables: tuple[str, ...], independent: Independence,
    stated: Callable[[Pair], Iterable[frozenset[str]]] | None = None,
) -> tuple[set[Pair], dict[Pair, frozenset[str]]]:
    """PC's adjacency search (Spirtes, Glymour & Scheines 2000, §5.4.2; order-independent 'stable' form,
    Colombo & Maathuis 2014): remove x - y at the first conditioning size where some subset of x's or y's
    current neighbours separates them, recording that set.

    With ``stated`` (every separating set of a pair, as a premise lists them) the search reads those sets
    instead of trying every subset of the neighbours: the first subset PC would try that separates is the
    lexicographically least stated one of the right size inside the neighbours, so the result is identical and
    the cost is linear in the premise instead of exponential in the degree.
    """
    edges = {pair(x, y) for x, y in combinations(variables, 2)}
    sepsets: dict[Pair, frozenset[str]] = {}
    size = 0
    while True:
        neighbours = {v: {u for p in edges if v in p for u in p if u != v} for v in variables}
        if not any(len(n) - 1 >= size for n in neighbours.values()):
            return edges, sepsets
        removed = set()
        for p in sorted(edges, key=sorted):
            found = _separating_set(p, neighbours, size, independent, stated)
            if found is not None:
                sepsets[p] = found
                removed.add(p)
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


def meek_step(g: PDAG) -> tuple[str, str] | None:
    """The first undirected edge a - b (in sorted order) that one of Meek's rules R1-R4 orients as a -> b
    (Meek 1995), or None when no rule applies: one step of :func:`apply_meek_rules`."""
    parents, children, undirected, adjacent = g._parents, g._children, g._neighbours, g.adjacent
    for p in sorted(g.undirected, key=sorted):
        for a, b in (tuple(sorted(p)), tuple(sorted(p, reverse=True))):
            # R1: c -> a - b with c, b non-adjacent.
            if any(not adjacent(c, b) for c in parents[a]):
                return a, b
            # R2: a -> c -> b.
            if not children[a].isdisjoint(parents[b]):
                return a, b
            # R3: a - c -> b and a - d -> b with c, d non-adjacent.
            tails = sorted(undirected[a] & parents[b])
            if any(not adjacent(c, d) for c, d in combinations(tails, 2)):
                return a, b
            # R4: a - d -> c -> b with a adjacent to c and d, b non-adjacent to d.
            for c in parents[b]:
                if adjacent(a, c):
                    if any(d in undirected[a] and not adjacent(d, b) for d in parents[c]):
                        return a, b
    return None


def apply_meek_rules(g: PDAG) -> PDAG:
    """Close a pattern under Meek's rules, in place; returns it for chaining."""
    while (arc := meek_step(g)) is not None:
        g.orient(*arc)
    if not g.arcs_acyclic():
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

# The most variables a premise may declare (Corr2Cause has at most 6). Labels are polynomial in the variables;
# what is not is the faithfulness certificate, which tries all 2^(n-2) conditioning sets of each non-adjacent
# pair, as the premise itself lists them. At 10 variables the worst premises (an empty or a chain graph, a
# megabyte of text) still take under a second (benchmarks/oracle.py); past the bound a row is refused.
MAX_VARIABLES = 10


class OversizedPremiseError(UnfaithfulFactsError):
    """A premise with more variables than :data:`MAX_VARIABLES`, refused before any analysis.

    A subclass of :class:`UnfaithfulFactsError` so that every caller that records an unusable premise as the
    row's problem (and goes on) does the same for this one.
    """


@dataclass(frozen=True)
class PremiseAnalysis:
    """Everything the oracle knows about one premise. Labels need only the CPDAG; the members of the class
    are enumerated on first use of :attr:`members` (diagnostics and tests), never for a label."""

    facts: Facts
    cpdag: CPDAG

    @functools.cached_property
    def members(self) -> tuple[nx.DiGraph, ...]:
        """Every DAG of the class (exponential in the largest chain component: diagnostics only)."""
        return tuple(consistent_extensions(self.cpdag))


def _pc(variables: tuple[str, ...], independent: Independence,
        stated: Callable[[Pair], Iterable[frozenset[str]]] | None = None) -> CPDAG:
    skeleton, sepsets = learn_skeleton(variables, independent, stated)
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
    return _pc(facts.variables, facts.independent, lambda p: facts.independencies.get(p, frozenset()))


def cpdag_of_dag(dag: nx.DiGraph, variables: Sequence[str] = ()) -> CPDAG:
    """The CPDAG of a DAG: PC with the DAG's own d-separations as its independence oracle.

    Exact, since a DAG is faithful to its own d-separations, and the separating sets are the ones PC records
    for a premise with those facts. Each test is asked of the DAG directly, so only the tests PC needs are
    run (never every pair and conditioning set). ``variables`` fixes the order of the result's variables;
    nodes of ``dag`` missing from it follow, sorted.
    """
    order = tuple(variables) + tuple(sorted(set(dag.nodes) - set(variables)))
    return _pc(order, lambda x, y, given: d_separated(dag, x, y, given))


def one_extension(graph: CPDAG | PDAG) -> nx.DiGraph:
    """One DAG of the class: orient the least undirected edge tail-first, Meek-close, repeat.

    Polynomial: at most one orientation per edge, each followed by a closure. It never needs to backtrack,
    because orienting any undirected edge of a CPDAG, or of a CPDAG with orientations added and Meek-closed,
    either way and closing again always leaves a graph with a consistent extension (Meek 1995, Thm. 4). It is
    the first member :func:`consistent_extensions` yields.
    """
    g = apply_meek_rules(graph.pdag() if isinstance(graph, CPDAG) else graph.copy())
    while g.undirected:
        a, b = sorted(min(g.undirected, key=sorted))
        g.orient(a, b)
        apply_meek_rules(g)
    return g.to_dag()


def is_cpdag(graph: PDAG) -> bool:
    """Whether ``graph`` is the CPDAG of some DAG, in polynomial time: one extension's CPDAG (its skeleton and
    v-structures, Meek-closed: Meek 1995; Chickering 1995) must be ``graph`` itself. If ``graph`` is a
    CPDAG, :func:`one_extension` is one of its members; if not, no DAG's CPDAG equals it."""
    try:
        member = one_extension(graph)
    except (UnfaithfulFactsError, ValueError):
        return False
    pattern = PDAG(graph.variables, undirected={pair(a, b) for a, b in member.edges})
    for (ends, collider) in _dag_v_structures(member):
        for end in ends:
            pattern.orient(end, collider)
    closed = apply_meek_rules(pattern)
    return closed.directed == graph.directed and closed.undirected == graph.undirected


def analyse_facts(facts: Facts) -> PremiseAnalysis:
    """PC plus a faithfulness certificate: one member's d-separations must equal the stated facts exactly.

    PC recovers the class of any DAG faithful to the facts, so a mismatch proves that no DAG is. The member is
    :func:`one_extension`, so the certificate never lists the class. Raises :class:`OversizedPremiseError`
    past :data:`MAX_VARIABLES` and :class:`UnfaithfulFactsError` when no DAG has exactly the stated facts.
    """
    if len(facts.variables) > MAX_VARIABLES:
        raise OversizedPremiseError(
            f"{len(facts.variables)} variables, more than the oracle's bound of {MAX_VARIABLES}")
    cpdag = pc_cpdag(facts)
    if independence_facts(one_extension(cpdag), facts.variables).statements() != facts.statements():
        raise UnfaithfulFactsError("no DAG has exactly the stated independencies")
    return PremiseAnalysis(facts, cpdag)


@functools.lru_cache(maxsize=4096)
def analyse_premise(premise: str) -> PremiseAnalysis:
    """Parse and analyse a premise text (cached: a split reuses few premises across many rows)."""
    return analyse_facts(parse_premise(premise))


# ------------------------------------------------------------------ hypotheses decided on the CPDAG itself


def _v_structures(parents: Callable[[str], set[str]], adjacent: Callable[[str, str], bool],
                  nodes: Iterable[str]) -> frozenset[tuple[Pair, str]]:
    return frozenset((pair(a, b), c) for c in nodes for a, b in combinations(sorted(parents(c)), 2)
                     if not adjacent(a, b))


def _dag_v_structures(dag: nx.DiGraph) -> frozenset[tuple[Pair, str]]:
    return _v_structures(lambda c: set(dag.predecessors(c)), lambda a, b: dag.has_edge(a, b) or dag.has_edge(b, a),
                         dag.nodes)


def _heads(graph: PDAG, node: str) -> list[frozenset[str]]:
    """``node`` takes none of its undirected neighbours as parents: it heads its chain component."""
    return [frozenset()]


def _maximal_parents(graph: PDAG, node: str) -> list[frozenset[str]]:
    """Each maximal clique of ``node``'s undirected neighbours as its undirected parents. A member's undirected
    parents of a node form a clique (else a new v-structure; Maathuis, Kalisch & Bühlmann 2009, Lemma 3.1),
    and a chordal neighbourhood has at most as many maximal cliques as nodes (Fulkerson & Gross 1965)."""
    around = graph.undirected_neighbours(node)
    among = nx.Graph()
    among.add_nodes_from(around)
    among.add_edges_from(tuple(p) for p in graph.undirected if p <= around)
    return [frozenset(c) for c in nx.find_cliques(among)] if around else [frozenset()]


def _configured(graph: PDAG, node: str, parents: frozenset[str]) -> PDAG | None:
    """``graph`` with ``node``'s undirected edges oriented from ``parents`` into it and out to the rest,
    Meek-closed; None when the closure contradicts itself."""
    out = graph.copy()
    try:
        for other in sorted(out.undirected_neighbours(node)):
            out.orient(*((other, node) if other in parents else (node, other)))
        return apply_meek_rules(out)
    except UnfaithfulFactsError:
        return None


ParentChoices = Callable[[PDAG, str], list[frozenset[str]]]


def witnesses(cpdag: PDAG, choices: Sequence[tuple[str, ParentChoices]]) -> list[nx.DiGraph]:
    """Members of the class in which each named node takes one of its offered undirected parent sets: one per
    combination that some member has, completed by :func:`one_extension` and checked to be a member (Verma &
    Pearl 1990: an orientation of the CPDAG's skeleton with its v-structures). When no offer of a node fits
    the earlier choices, that node is left to the completion. At most n^len(choices) members, each built in
    polynomial time, whatever the class size; never none for a CPDAG, so a relation is never true for want of
    members.
    """

    v_structures = _v_structures(cpdag.parents, cpdag.adjacent, cpdag.variables)

    def extend(graph: PDAG, rest: Sequence[tuple[str, ParentChoices]]) -> list[nx.DiGraph]:
        if not rest:
            member = one_extension(graph)
            return [member] if _dag_v_structures(member) == v_structures else []
        (node, offer), later = rest[0], rest[1:]
        found = []
        if graph.undirected_neighbours(node):
            for parents in offer(graph, node):
                if (configured := _configured(graph, node, parents)) is not None:
                    found += extend(configured, later)
        return found or extend(graph, later)

    return extend(cpdag, choices)


def entailed_by_cpdag(cpdag: CPDAG | PDAG, query: Query) -> bool:
    """True iff ``query`` holds in every DAG of the class of the CPDAG ``cpdag``, without listing the class.

    - direct cause x -> y: iff the CPDAG has the arc x -> y (arcs are compelled, undirected edges reversible:
      Meek 1995; Andersson, Madigan & Perlman 1997, Thm. 4.1).
    - indirect cause (a directed path of two or more edges): iff it holds in the :func:`witnesses` where x's
      undirected parents are a maximal clique of its undirected neighbours and y heads its chain component.
      Between non-adjacent nodes this is ancestry, for which the known criterion is a directed path, or two
      uncovered possibly directed paths leaving x through non-adjacent neighbours (Zhang 2006; Roumpelaki et
      al. 2016; Perković et al. 2017); the tests check the two agree.
    - common cause: iff it holds in the member where x heads its chain component, and y its own.
    - common effect: iff it holds in the members where x, then y, has a maximal clique of undirected parents.

    The proofs (the book's page "The oracle") rest on the independent orientation of chain components (Andersson et
    al. 1997), their shared outside parents, and covered-edge reversal (Chickering 1995, Lemma 1); for a
    common effect of two nodes in one chain component the argument is a sketch, checked against the listed
    class in the tests. Every NO is shown by a member, so an error could only be a YES.
    """
    graph = cpdag.pdag() if isinstance(cpdag, CPDAG) else cpdag
    x, y = query.x, query.y
    if query.relation is Relation.DIRECT_CAUSE:
        return (x, y) in graph.directed
    if not graph.undirected:  # a class of one
        return holds(graph.to_dag(), query)
    choices: dict[Relation, list[tuple[str, ParentChoices]]] = {
        Relation.INDIRECT_CAUSE: [(x, _maximal_parents), (y, _heads)],
        Relation.CONFOUNDER: [(x, _heads), (y, _heads)],
        Relation.COLLIDER: [(x, _maximal_parents), (y, _maximal_parents)],
    }
    return all(holds(member, query) for member in witnesses(graph, choices[query.relation]))


def entailed(analysis: PremiseAnalysis, query: Query) -> bool:
    """True iff the query holds in every DAG of the premise's class (:func:`entailed_by_cpdag`)."""
    return entailed_by_cpdag(analysis.cpdag, query)


@dataclass(frozen=True)
class OracleLabel:
    """The oracle's verdict on one row: a 0/1 label, or None with the reason."""

    label: int | None
    problem: str | None = None
    query: Query | None = None

    @property
    def gap(self) -> str | None:
        """Why there is no label, in words a page can count by (None: there is one): ``no DAG satisfies the
        premise``, ``premise too large for the oracle``, ``text the oracle cannot read`` or ``no verdict``."""
        if self.label is not None:
            return None
        for start, words in GAPS.items():
            if (self.problem or "").startswith(start):
                return words
        return "no verdict"


REFUSED, UNFAITHFUL, UNREADABLE = "premise refused", "unfaithful premise", "unreadable"  # problems start so
GAPS = {UNFAITHFUL: "no DAG satisfies the premise", REFUSED: "premise too large for the oracle",
        UNREADABLE: "text the oracle cannot read"}


def label_text(text: str) -> OracleLabel:
    r"""Label a Corr2Cause ``input`` cell; unfaithful or oversized premises get ``label=None`` and a ``problem``.

    A collider A -> C <- B, the only DAG with these facts:

    >>> premise = ("Premise: Suppose there is a closed system of 3 variables, A, B and C. All the statistical "
    ...            "relations among these 3 variables are as follows: A correlates with C. B correlates with C. "
    ...            "However, A is independent of B.")
    >>> label_text(premise + "\nHypothesis: A directly causes C.").label
    1
    >>> label_text(premise + "\nHypothesis: C directly causes A.").label
    0
    >>> collider = "There exists at least one collider (i.e., common effect) of A and B."
    >>> label_text(premise + "\nHypothesis: " + collider).label
    1

    No DAG makes A and B independent both alone and given their common effect:

    >>> verdict = label_text(premise + " A and B are independent given C.\nHypothesis: A directly causes C.")
    >>> verdict.label, verdict.gap
    (None, 'no DAG satisfies the premise')
    >>> verdict.problem
    'unfaithful premise: no DAG has exactly the stated independencies'
    """
    premise, hypothesis = split_input(text)
    try:
        analysis = analyse_premise(premise)
    except OversizedPremiseError as error:
        return OracleLabel(None, f"{REFUSED}: {error}")
    except UnfaithfulFactsError as error:
        return OracleLabel(None, f"{UNFAITHFUL}: {error}")
    query = parse_hypothesis(hypothesis, analysis.facts.variables)
    return OracleLabel(int(entailed(analysis, query)), None, query)



@functools.lru_cache(maxsize=8192)
def readable_label(text: str) -> OracleLabel:
    """:func:`label_text` for any ``input`` cell: text the oracle cannot read (a premise or hypothesis in a
    wording it does not know) gets ``label=None`` too, its ``problem`` starting with :data:`UNREADABLE`, where
    :func:`label_text` raises. A row's verdict is asked by several pages, so it is kept (the text decides it)."""
    try:
        return label_text(text)
    except PremiseError as error:
        return OracleLabel(None, f"{UNREADABLE}: {error}")
