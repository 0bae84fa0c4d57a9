"""Corr2Cause-format instances from any DAG, the paper's stress families, and surface perturbations.

Every generated instance carries a ``source`` naming the family, the seed and the graph, so a generated split
is never mistaken for one of the hub's (e.g. the hub's Paraphrase-OOD split).
"""

from __future__ import annotations

import csv
import hashlib
import json
import random
from dataclasses import dataclass
from importlib.resources.abc import Traversable
from itertools import combinations, permutations
from pathlib import Path
from string import ascii_uppercase

import networkx as nx

from ..causal.dag import independence_facts
from ..causal.instance import Instance
from ..causal.oracle import analyse_facts, entailed
from ..causal.premise import (
    HYPOTHESIS_WORDINGS,
    Facts,
    Query,
    Relation,
    parse_hypothesis,
    paraphrase_hypothesis,
    parse_premise,
    verbalise_hypothesis,
    verbalise_premise,
)
from ..paths import GRAPHS, OUTPUTS_ROOT
from .data import load_split, read_csv

FAMILIES = ("random7", "alarm7", "asia8", "refactor", "paraphrase")
COLUMNS = ("input", "label", "num_variables", "template", "source")


@dataclass(frozen=True)
class StressSize:
    """How many graphs and hypotheses per graph a stress family draws by default, and the paper's N for it
    (App. C, Table 7; None where the paper does not state it)."""

    graphs: int
    per_graph: int
    paper_n: int | None = None


# ASIA8 is the one ASIA graph, drawn at the paper's N=40; the paper states no N for the n=7 families, so they
# draw ten graphs of twenty hypotheses each (half positive where the class entails enough).
STRESS_SIZES = {
    "random7": StressSize(graphs=10, per_graph=20),
    "alarm7": StressSize(graphs=10, per_graph=20),
    "asia8": StressSize(graphs=1, per_graph=40, paper_n=40),
}


@dataclass(frozen=True)
class GeneratedInstance:
    """One generated Corr2Cause instance as a CSV row of the hub's format (its ``input`` cell whole) plus
    ``source``; :func:`~cpdagthink.run.data.read_csv` reads it back as an :class:`Instance`."""

    input: str
    label: int
    num_variables: int
    template: str
    source: str


def template_name(query: Query, wording: int, variables: tuple[str, ...]) -> str:
    """The hub's template column: direct causes split by declaration order, indirect ones by wording."""
    if query.relation is Relation.DIRECT_CAUSE:
        return "parent" if variables.index(query.x) < variables.index(query.y) else "child"
    if query.relation is Relation.INDIRECT_CAUSE:
        return "non-parent ancestor" if wording == 0 else "non-child descendant"
    return "has_collider" if query.relation is Relation.COLLIDER else "has_confounder"


def read_edges(path: str | Path | Traversable) -> nx.DiGraph:
    """Read a ``PARENT CHILD`` edge list (``#`` comments allowed): a file, or one the package ships."""
    graph = nx.DiGraph()
    for line in (Path(path) if isinstance(path, str) else path).read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            parent, child = line.split()
            graph.add_edge(parent, child)
    return graph


def letter_dag(dag: nx.DiGraph) -> tuple[nx.DiGraph, str]:
    """Rename nodes to A, B, C, ... along a topological order, as Corr2Cause's generator does; also return
    the legend (``A=asia,B=smoke,...``) that the instances' ``source`` records."""
    order = list(nx.lexicographical_topological_sort(dag))
    names = dict(zip(order, ascii_uppercase))
    legend = ",".join(f"{letter}={node}" for node, letter in names.items())
    return nx.relabel_nodes(dag, names), legend


def all_queries(variables: tuple[str, ...], rng: random.Random) -> list[tuple[Query, int]]:
    """Every hypothesis over the variables with a hub wording: direct and indirect causes for each ordered
    pair (the indirect wording drawn at random), colliders and confounders for each unordered pair."""
    queries = []
    for x, y in permutations(variables, 2):
        queries.append((Query(Relation.DIRECT_CAUSE, x, y), 0))
        queries.append((Query(Relation.INDIRECT_CAUSE, x, y), rng.randrange(2)))
    for x, y in combinations(variables, 2):
        queries.append((Query(Relation.COLLIDER, x, y), 0))
        queries.append((Query(Relation.CONFOUNDER, x, y), 0))
    return queries


def instances_from_dag(dag: nx.DiGraph, per_graph: int, rng: random.Random, source: str) -> list[GeneratedInstance]:
    """Verbalise a DAG's d-separations as a premise and draw ``per_graph`` labelled hypotheses, half of
    them positive where the class entails enough (labels come from the oracle)."""
    facts = independence_facts(dag, tuple(sorted(dag.nodes)))
    analysis = analyse_facts(facts)
    premise = verbalise_premise(facts)
    labelled = [(q, w, int(entailed(analysis, q))) for q, w in all_queries(facts.variables, rng)]
    positives = [item for item in labelled if item[2]]
    negatives = [item for item in labelled if not item[2]]
    take_pos = min(len(positives), per_graph // 2)
    take_neg = min(len(negatives), per_graph - take_pos)
    take_pos = min(len(positives), per_graph - take_neg)
    chosen = rng.sample(positives, take_pos) + rng.sample(negatives, take_neg)
    rng.shuffle(chosen)
    return [
        GeneratedInstance(
            input=f"{premise}\nHypothesis: {verbalise_hypothesis(q, w)}",
            label=label,
            num_variables=len(facts.variables),
            template=template_name(q, w, facts.variables),
            source=source,
        )
        for q, w, label in chosen
    ]


def random_dag(n: int, edge_probability: float, rng: random.Random) -> nx.DiGraph:
    """A weakly connected random DAG over A, B, ... (edges only from earlier to later letters)."""
    names = ascii_uppercase[:n]
    while True:
        dag = nx.DiGraph()
        dag.add_nodes_from(names)
        dag.add_edges_from((a, b) for a, b in combinations(names, 2) if rng.random() < edge_probability)
        if nx.is_weakly_connected(dag):
            return dag


def connected_induced_subgraph(graph: nx.DiGraph, size: int, rng: random.Random) -> nx.DiGraph:
    """Grow a random connected node set of ``size`` from a random seed node; return its induced subgraph."""
    undirected = graph.to_undirected(as_view=True)
    nodes = {rng.choice(sorted(graph.nodes))}
    while len(nodes) < size:
        frontier = sorted({m for n in nodes for m in undirected[n]} - nodes)
        nodes.add(rng.choice(frontier))
    return graph.subgraph(nodes).copy()


def stress_family(family: str, graphs: int, per_graph: int, seed: int,
                  graphs_dir: Traversable = GRAPHS) -> list[GeneratedInstance]:
    """The instances of one larger-graph stress family: ``random7``, ``alarm7`` or ``asia8`` (paper §4.3, app. C)."""
    rng = random.Random(seed)
    instances: list[GeneratedInstance] = []
    if family == "asia8":
        dag, legend = letter_dag(read_edges(graphs_dir / "asia.edges"))
        return instances_from_dag(dag, per_graph, rng, f"generated:asia8 seed={seed} ASIA (Lauritzen & Spiegelhalter 1988) {legend}")
    seen: set[frozenset] = set()
    alarm = read_edges(graphs_dir / "alarm.edges") if family == "alarm7" else None
    attempts = 0
    while len(seen) < graphs:
        attempts += 1
        if attempts > 100 * graphs:
            raise RuntimeError(f"could not draw {graphs} distinct {family} graphs")
        if alarm is not None:
            sub = connected_induced_subgraph(alarm, 7, rng)
            key = frozenset(sub.nodes)
            dag, legend = letter_dag(sub)
            source = f"generated:alarm7 seed={seed} ALARM (Beinlich et al. 1989) induced subgraph {legend}"
        elif family == "random7":
            dag = random_dag(7, 0.35, rng)
            key = frozenset(dag.edges)
            source = f"generated:random7 seed={seed} edges={sorted(dag.edges)}"
        else:
            raise ValueError(f"unknown stress family {family!r}; choose one of {FAMILIES}")
        if key in seen:
            continue
        seen.add(key)
        instances.extend(instances_from_dag(dag, per_graph, rng, source))
    return instances


# ----------------------------------------------------------------------------------------- perturbations


def rename(facts: Facts, mapping: dict[str, str]) -> Facts:
    """The same facts over renamed variables (declaration order kept position by position)."""
    return Facts(
        variables=tuple(mapping[v] for v in facts.variables),
        correlations=frozenset(frozenset(mapping[v] for v in p) for p in facts.correlations),
        independencies={
            frozenset(mapping[v] for v in p): frozenset(frozenset(mapping[v] for v in s) for s in sets)
            for p, sets in facts.independencies.items()
        },
    )


def refactor_instance(instance: Instance, rng: random.Random, seed: int) -> GeneratedInstance:
    """Rename every variable to a different letter drawn at random (breaks the alphabetical-order shortcut)."""
    facts, hypothesis = parse_premise(instance.premise), instance.hypothesis
    pool = [c for c in ascii_uppercase if c not in facts.variables]
    if len(pool) < len(facts.variables):
        raise ValueError(f"{instance.id}: too many variables to rename with unused letters")
    mapping = dict(zip(facts.variables, rng.sample(pool, len(facts.variables))))
    query = parse_hypothesis(hypothesis, facts.variables)
    renamed_query = Query(query.relation, mapping[query.x], mapping[query.y])
    wording = _hub_wording_index(hypothesis, query)
    return GeneratedInstance(
        input=f"{verbalise_premise(rename(facts, mapping))}\nHypothesis: {verbalise_hypothesis(renamed_query, wording)}",
        label=instance.label,
        num_variables=instance.num_variables,
        template=instance.template,
        source=f"generated:refactor seed={seed} from {instance.id} map={mapping}",
    )


def _hub_wording_index(hypothesis: str, query: Query) -> int:
    for index, wording in enumerate(HYPOTHESIS_WORDINGS[query.relation]):
        if verbalise_hypothesis(query, index) == hypothesis.strip():
            return index
    raise ValueError(f"hypothesis not in a known wording: {hypothesis!r}")


def paraphrase_instance(instance: Instance, rng: random.Random, seed: int) -> GeneratedInstance:
    """Reword the hypothesis as the Corr2Cause generator words its Paraphrase-OOD split (one template per
    relation, so no draw is made; ``rng`` is taken for a uniform call with :func:`refactor_instance`)."""
    query = parse_hypothesis(instance.hypothesis)
    return GeneratedInstance(
        input=f"{instance.premise}\nHypothesis: {paraphrase_hypothesis(query)}",
        label=instance.label,
        num_variables=instance.num_variables,
        template=instance.template,
        source=f"generated:paraphrase seed={seed} from {instance.id} (Corr2Cause generator's paraphrase templates)",
    )


def perturb(instances: list[Instance], family: str, seed: int) -> list[GeneratedInstance]:
    """Apply ``refactor`` or ``paraphrase`` to every instance, deterministically for a seed."""
    rng = random.Random(seed)
    make = {"refactor": refactor_instance, "paraphrase": paraphrase_instance}.get(family)
    if make is None:
        raise ValueError(f"unknown perturbation {family!r}; choose refactor or paraphrase")
    return [make(instance, rng, seed) for instance in instances]


def stress_size(family: str, graphs: int | None = None, per_graph: int | None = None) -> StressSize:
    """A stress family's size: the values given, the family's default (:data:`STRESS_SIZES`) for the rest."""
    if family not in STRESS_SIZES:
        raise ValueError(f"unknown stress family {family!r}; choose one of {', '.join(STRESS_SIZES)}")
    default = STRESS_SIZES[family]
    return StressSize(default.graphs if graphs is None else graphs,
                      default.per_graph if per_graph is None else per_graph, default.paper_n)


def generate(family: str, *, seed: int = 0, graphs: int | None = None, per_graph: int | None = None,
             data: str | Path | None = None) -> list[GeneratedInstance]:
    """One entry point for every family (``data`` is the source CSV of the two perturbations; a stress
    family's ``graphs`` and ``per_graph`` default to its :data:`STRESS_SIZES`)."""
    if family in ("refactor", "paraphrase"):
        if data is None:
            raise ValueError(f"--family {family} perturbs an existing split: pass --data PATH")
        instances = read_csv(data)
        if not instances:
            raise ValueError(f"{data} holds no rows (a header only): family {family} would write no rows")
        return perturb(instances, family, seed)
    size = stress_size(family, graphs, per_graph)
    graphs, per_graph = size.graphs, size.per_graph
    for flag, value in (("--graphs", graphs), ("--per-graph", per_graph)):
        if value < 1:
            raise ValueError(f"{flag} must be at least 1 (got {value}): family {family} would write no rows")
    return stress_family(family, graphs, per_graph, seed)


def write_instances(instances: list[GeneratedInstance], path: str | Path) -> Path:
    """Write instances as a Corr2Cause-format CSV (plus the ``source`` column)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS)
        writer.writeheader()
        for instance in instances:
            writer.writerow(instance.__dict__)
    return path


def generated_split(family: str, seed: int = 0) -> Path:
    """A perturbed copy of the test split (``paraphrase`` or ``refactor``), written once under outputs/generated
    (named by the wordings it was written with, so a copy made with other templates is never reused)."""
    wordings = hashlib.sha256(json.dumps({r.value: w for r, w in HYPOTHESIS_WORDINGS.items()}).encode()).hexdigest()[:8]
    path = OUTPUTS_ROOT / "generated" / f"{family}-of-test-seed{seed}-w{wordings}.csv"
    if not path.is_file():
        write_instances(perturb(load_split("test"), family, seed), path)
    return path


def stress_csv(family: str, graphs: int | None, per_graph: int | None, seed: int) -> Path:
    """A generated stress set (``random7``, ``alarm7``, ``asia8``; None: the family's default size), written
    once under outputs/generated."""
    size = stress_size(family, graphs, per_graph)
    graphs, per_graph = size.graphs, size.per_graph
    path = OUTPUTS_ROOT / "generated" / f"{family}-g{graphs}-k{per_graph}-seed{seed}.csv"
    if not path.is_file():
        write_instances(generate(family, seed=seed, graphs=graphs, per_graph=per_graph), path)
    return path
