"""Hand-made CausalAnalysis objects for the validator and audit tests."""

from __future__ import annotations

from cpdagthink.method.schema import CausalAnalysis, SeparatingSet
from cpdagthink.run.records import RunRecord, TurnRecord


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


def run_record(rid: str = "x", *, answer: str | None = "NO", emitted: CausalAnalysis | None = None,
               tool_flow: bool | None = None, turns=None, **fields) -> RunRecord:
    """A run record with harmless defaults, for tests that score or classify records by hand."""
    tool = emitted is not None if tool_flow is None else tool_flow
    base = {"id": rid, "content_sha256": "0" * 64, "condition": "structured", "split": "test", "num_variables": 4,
            "template": "parent", "gold_label": 0, "oracle_label": 0}
    default_turns = [TurnRecord(messages_sha256="", request_sha256="", text=f"Answer: {answer}" if answer else "")]
    return RunRecord(**{**base, **fields}, answer=answer, emitted=emitted, tool_flow=tool,
                     turns=default_turns if turns is None else turns)
