"""Hand-made CausalAnalysis objects for the validator and audit tests."""

from __future__ import annotations

from cpdagthink.schema import CausalAnalysis, SeparatingSet


def make(variables, *, directed=(), undirected=(), v=(), sepsets=(), skeleton=None) -> CausalAnalysis:
    """An object whose skeleton defaults to its edges (so only the intended fields disagree)."""
    edges = list(directed) + list(undirected)
    return CausalAnalysis(
        variables=list(variables),
        skeleton=[tuple(e) for e in (edges if skeleton is None else skeleton)],
        separating_sets=[SeparatingSet(pair=p, separating_set=list(s)) for p, s in sepsets],
        v_structures=[tuple(t) for t in v],
        directed_edges=[tuple(e) for e in directed],
        undirected_edges=[tuple(e) for e in undirected],
    )
