"""The ``reference`` agent: a symbolic stand-in for a model, for plumbing checks and the upper-bound row.

Turn 1 (a tool is offered, may be called, and none was called yet): read the premise from the prompt and emit
the oracle's CPDAG as the tool call, under the field names the tool declares. Final turn: read the hypothesis
and answer from whatever graph the last tool result holds (so graph probes move it), or a last user message that
shows the object's fields (a design point's delivery), or from the premise when neither does, all by
:meth:`CausalAnalysis.answer`. Never the default.
"""

from __future__ import annotations

import json
import re
import time
from typing import Any

from ..causal.oracle import UnfaithfulFactsError, analyse_premise
from ..causal.premise import PremiseError
from ..method.chat import Completion, Request, ToolCall
from ..method.field_names import PAPER, neutral_json, renamed
from ..method.schema import TOOL_NAME, CausalAnalysis, GraphVerdict
from .base import Backend

_PREMISE = re.compile(r"(Premise:.*?)(?:\n\s*\n|\nHypothesis:|$)", re.S)
_HYPOTHESIS = re.compile(r"Hypothesis:[ \t]*([^\n]+)")


def _texts(request: Request) -> list[str]:
    return [m.get("content") or "" for m in request.messages]


def _neutral(request: Request) -> bool:
    """The tool declares the neutral field names (``field_a`` ...): the object is emitted under them."""
    return any("field_a" in t.get("function", {}).get("parameters", {}).get("properties", {}) for t in request.tools)


def _shown_to_the_user(request: Request) -> list[dict]:
    """A turn 2 that shows the recorded object's fields in a user message (a design point's delivery): that
    message (a prose arm's text shows no fields, and is answered from the premise)."""
    last = request.messages[-1]
    content = last.get("content") or ""
    return [last] if last.get("role") == "user" and ('{"variables"' in content or '{"field_a"' in content) else []


class ReferenceBackend(Backend):
    """The oracle behind the backend interface."""

    name = "reference"
    builds_cheaply = True
    symbolic = True

    @classmethod
    def model_title(cls, model: str | None) -> str:
        return "the symbolic reference agent, which reads the exact oracle's CPDAG"

    def identity(self) -> dict[str, Any]:
        return {"backend": "reference", "model": "pc-oracle", "revision": "exact"}

    def complete(self, request: Request) -> Completion:
        start = time.perf_counter()
        texts = _texts(request)
        tool_results = [m for m in request.messages if m.get("role") == "tool"]
        if request.tools and not tool_results and request.tool_choice != "none":
            completion = self._emit(texts, neutral=_neutral(request))
        else:
            completion = self._answer(texts, tool_results or _shown_to_the_user(request))
        completion.latency_s = time.perf_counter() - start
        return completion

    def _emit(self, texts: list[str], neutral: bool = False) -> Completion:
        premise = next((m.group(1).strip() for t in texts if (m := _PREMISE.search(t))), None)
        if premise is None:
            return Completion(text="I cannot find a premise to analyse.")
        analysis = CausalAnalysis.from_cpdag(analyse_premise(premise).cpdag)
        arguments = neutral_json(analysis) if neutral else analysis.model_dump_json()
        return Completion(text="", tool_calls=[ToolCall(TOOL_NAME, arguments)], raw=arguments, finish_reason="tool_calls")

    def _answer(self, texts: list[str], tool_results: list[dict]) -> Completion:
        hypothesis = next((m.group(1) for t in reversed(texts) if (m := _HYPOTHESIS.search(t))), None)
        if hypothesis is None:
            return Completion(text="I cannot find the hypothesis.")
        if tool_results:
            content = tool_results[-1]["content"]
            start = max(content.find('{"variables"'), content.find('{"field_a"'))
            try:
                analysis = CausalAnalysis.model_validate(renamed(json.JSONDecoder().raw_decode(content[start:])[0], PAPER))
            except (ValueError, IndexError) as error:
                return Completion(text=f"The recorded graph is unusable ({error}).\nAnswer: NO")
            verdict = analysis.answer(hypothesis)
        else:
            premise = next((m.group(1).strip() for t in texts if (m := _PREMISE.search(t))), "")
            try:
                verdict = CausalAnalysis.from_cpdag(analyse_premise(premise).cpdag).answer(hypothesis)
            except (UnfaithfulFactsError, PremiseError) as error:
                verdict = GraphVerdict(False, f"premise unusable: {error}")
        return Completion(text=f"{verdict.detail}.\nAnswer: {'YES' if verdict.holds else 'NO'}", finish_reason="stop")
