"""Hand-built instances and records in the runner's format, shared by the failure classification and view tests."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import networkx as nx

from cpdagthink.backends.base import Backend
from cpdagthink.backends.reference import ReferenceBackend
from cpdagthink.causal.dag import independence_facts
from cpdagthink.causal.instance import Instance
from cpdagthink.causal.oracle import analyse_premise, label_text
from cpdagthink.causal.premise import verbalise_premise
from cpdagthink.method.chat import Completion, Request
from cpdagthink.method.decoding import Decoding
from cpdagthink.method.schema import CausalAnalysis
from cpdagthink.run.records import InterventionRecord, RunRecord, TurnRecord
from conftest import configured

_ABSENT = object()


def instance(edges, hypothesis: str, variables: str, id_: str, label: int | None = None) -> Instance:
    dag = nx.DiGraph()
    dag.add_nodes_from(variables)
    dag.add_edges_from(edges)
    premise = verbalise_premise(independence_facts(dag, tuple(variables)))
    oracle = label_text(f"{premise}\nHypothesis: {hypothesis}").label
    return Instance(id=id_, premise=premise, hypothesis=hypothesis, num_variables=len(variables), template="parent",
                    label=oracle if label is None else label, split="t", source="constructed")


def reference(inst: Instance) -> dict:
    return CausalAnalysis.from_cpdag(analyse_premise(inst.premise).cpdag).model_dump(mode="json")


def record(inst: Instance, answer: str | None, *, parsed=_ABSENT, shown=_ABSENT, condition: str | None = None) -> RunRecord:
    """A record as the runner writes it: tool runs carry turn 1's parsed object and two turns."""
    tool = parsed is not _ABSENT
    text = "I thought about it." + (f"\nAnswer: {answer}" if answer else "")
    turn = lambda text, thinking: TurnRecord(messages_sha256="", request_sha256="", text=text, reasoning=thinking)
    emitted, error = None, None
    if tool and parsed is not None:
        try:
            emitted = CausalAnalysis.model_validate(parsed)
        except ValueError as invalid:  # the runner records an unparsable object as missing, with the reason
            error = str(invalid)
    return RunRecord(
        id=inst.id, content_sha256=inst.content_sha256,
        condition=condition or ("structured" if tool else "baseline_enhanced"),
        split=inst.split, num_variables=inst.num_variables, template=inst.template,
        turns=[turn("", "turn-1 thinking"), turn(text, "turn-2 thinking")] if tool else [turn(text, "turn-1 thinking")],
        tool_flow=tool, emitted=emitted, emitted_error=error,
        intervention=None if shown is _ABSENT else InterventionRecord(
            name="probe", note="probe", analysis=None if shown is None else CausalAnalysis.model_validate(shown)),
        answer=answer, gold_label=inst.label, oracle_label=label_text(inst.text).label,
    )


def mixed_runs() -> dict[str, list[RunRecord]]:
    """Two runs over :data:`INSTANCES`: a tool run with two errors and a one-turn run with two errors."""
    return {
        "structured": [record(COLLIDER, "NO", parsed=reversed_graph(COLLIDER)), record(CHAIN, "NO", parsed=reference(CHAIN)),
                       record(TAIL, "NO", parsed=reference(TAIL))],
        "baseline_enhanced": [record(COLLIDER, "NO"), record(CHAIN, "YES"), record(TAIL, "YES")],
    }


# A -> C <- B: one member, every edge directed; "A directly causes C" holds (label 1).
COLLIDER = instance([("A", "C"), ("B", "C")], "A directly causes C.", "ABC", "collider")
# A - B - C: three members; "A directly causes B" holds in one of them (label 0).
CHAIN = instance([("A", "B"), ("B", "C")], "A directly causes B.", "ABC", "chain")
# D - A -> B <- C: two members (D - A undirected); "A directly causes B" holds in both (label 1).
TAIL = instance([("D", "A"), ("A", "B"), ("C", "B")], "A directly causes B.", "ABCD", "tail")
INSTANCES = [COLLIDER, CHAIN, TAIL]


def reversed_graph(inst: Instance) -> dict:
    graph = reference(inst)
    graph["directed_edges"] = [[b, a] for a, b in graph["directed_edges"]]
    return graph


# A model that closes the Markdown code fence and then writes live markup; each payload sets ``window.pwned``
# when it runs. ``</script>``, ``<!--`` and a line separator would end or change a JSON data block.
HOSTILE = ('\n```\n\n<iframe src="javascript:parent.pwned=\'iframe\'"></iframe>\n'
           '<script>window.pwned = "script"</script>\n<img src="x" onerror="window.pwned = \'img\'">\n'
           '[click](javascript:window.pwned=1) </script><!-- \u2028 end')


def hostile_text(text: str) -> str:
    """``text`` with its YES/NO answer flipped and :data:`HOSTILE` appended."""
    return re.sub(r"Answer: (YES|NO)", lambda m: "Answer: " + ("NO" if m[1] == "YES" else "YES"), text) + HOSTILE


def hostile_server():
    """A :class:`reasoning_api_server.ReasoningAPIServer` whose model's visible text, on either API the profile
    chooses, is :func:`hostile_text` of what the server would write (a context manager, as the server is)."""
    from reasoning_api_server import ReasoningAPIServer

    class HostileServer(ReasoningAPIServer):
        def answer(self, path, body):
            code, payload = super().answer(path, body)
            texts = [c["message"] for c in payload.get("choices", [])] + [
                part for item in payload.get("output", []) if item.get("type") == "message" for part in item["content"]]
            for holder in texts if code == 200 else []:
                key = "content" if "content" in holder else "text"
                if holder.get(key):
                    holder[key] = hostile_text(holder[key])
            return code, payload

    return HostileServer()


class Hostile(Backend):
    """The reference agent with every YES/NO answer flipped (so every row is an error) and :data:`HOSTILE`
    appended to every text it writes; turn-1 tool calls pass unchanged."""

    def __init__(self) -> None:
        self.inner = ReferenceBackend()

    def identity(self) -> dict:
        return {"backend": "hostile"}

    def complete(self, request: Request) -> Completion:
        out = self.inner.complete(request)
        if out.tool_calls:
            return out
        return dataclasses.replace(out, text=hostile_text(out.text), raw="")


HOSTILE_CONDITIONS = ("structured", "baseline_enhanced", "twoturn_prose_pc")


def hostile_runs(folder: Path, instances: list[Instance], decoding: Decoding) -> dict[str, list[RunRecord]]:
    """Records of :data:`HOSTILE_CONDITIONS` written by the runner with :class:`Hostile` as the model."""
    from cpdagthink.run.runner import run_config

    return {c: run_config(configured(c, cache_dir=folder / "cache", decoding=decoding),
                          Hostile(), instances, folder / c, progress=False).records for c in HOSTILE_CONDITIONS}
