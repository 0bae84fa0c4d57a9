"""A loopback OpenAI-compatible server (chat completions, vLLM's ``structured_outputs``) whose answers carry known
effects of the design's factors, for chapter 07's end-to-end test.

It reads each request as a model would: turn 1 with a tool answers with the instance's reference CPDAG as a tool
call under the field names the tool declares; a prose turn 1 answers in text. Turn 2 is right or wrong with a
chance set by the cell the request shows it is in: the intermediate (a tool declared; a lightly structured
system prompt), the constraint (a regex at turn 1: the object then lists its variables in the premise's order,
without one in reverse, so turn 2 can tell), the field names (the tool's), the delivery (a tool message or not)
and the instruction (the decision rules present or not). Every cell draws from one difficulty per instance most
of the time, so the cells are correlated as paired answers are.
"""

from __future__ import annotations

import hashlib
import json
from http.server import BaseHTTPRequestHandler
from typing import Any, Callable

from loopback_server import LoopbackServer
from reasoning_api_server import send_json

from cpdagthink.causal.instance import Instance
from cpdagthink.causal.oracle import analyse_premise
from cpdagthink.method.design import Point
from cpdagthink.method.field_names import NEUTRAL
from cpdagthink.method.schema import TOOL_NAME, CausalAnalysis


def _uniform(*parts: str) -> float:
    return int(hashlib.sha256("|".join(parts).encode()).hexdigest()[:12], 16) / 16 ** 12


class PlantedServer(LoopbackServer):
    """``chance(point)``: the probability of a right answer in that cell; ``instances`` give the labels."""

    def __init__(self, instances: list[Instance], chance: Callable[[Point], float], shared: float = 0.7):
        self.labels = {(i.premise, i.hypothesis): i.label for i in instances}
        self.chance, self.shared = chance, shared
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                send_json(self, 200, server.answer(body))

        self.start(Handler)

    def answer(self, body: dict[str, Any]) -> dict[str, Any]:
        messages, tools = body["messages"], body.get("tools") or []
        instance = self._instance(messages)
        if len(messages) == 2:
            return _reply(text="Variables: ...") if not tools else self._emit(instance, tools, body)
        label = self.labels[instance]
        right = self._draw(instance, self._cell(messages, tools)) < 1
        return _reply(text=f"Answer: {'YES' if bool(label) == right else 'NO'}")

    def _instance(self, messages: list[dict[str, Any]]) -> tuple[str, str]:
        user = messages[1]["content"]
        premise = next(line for line in user.splitlines() if line.startswith("Premise:"))
        hypothesis = next(line for line in user.splitlines() if line.startswith("Hypothesis:"))
        return premise, hypothesis.removeprefix("Hypothesis: ")

    def _emit(self, instance: tuple[str, str], tools: list[dict[str, Any]], body: dict[str, Any]) -> dict[str, Any]:
        data = CausalAnalysis.from_cpdag(analyse_premise(instance[0]).cpdag).model_dump(mode="json")
        if "structured_outputs" not in body:
            data["variables"] = data["variables"][::-1]
        if "field_a" in tools[0]["function"]["parameters"]["properties"]:
            data = {NEUTRAL[k]: v for k, v in data.items()}
        return _reply(tool_call=json.dumps(data))

    def _cell(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Point:
        if not tools:
            light = "six headings" in messages[0]["content"]
            return Point("light_prose" if light else "free_prose", "none", "paper", "user", "e2")
        shown = messages[3]["content"]
        ordered = '"variables":["A"' in shown or '"field_a":["A"' in shown
        return Point(constraint="regex" if ordered else "none",
                     field_names="neutral" if "field_a" in json.dumps(tools) else "paper",
                     delivery="tool" if messages[3]["role"] == "tool" else "user",
                     instruction="e2" if "Direct causation" in shown else "bare")

    def _draw(self, instance: tuple[str, str], point: Point) -> float:
        """Below 1 means right: the instance's own difficulty (shared by every cell most of the time) against
        the cell's chance."""
        key = "|".join(instance)
        own = _uniform(key, "shared") if _uniform(key, point.name, "which") < self.shared else \
            _uniform(key, point.name)
        return own / self.chance(point)


def _reply(text: str = "", tool_call: str | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if tool_call is not None:
        message["tool_calls"] = [{"id": "call_0", "type": "function",
                                  "function": {"name": TOOL_NAME, "arguments": tool_call}}]
    return {"id": "planted", "object": "chat.completion", "created": 0, "model": "planted",
            "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if tool_call else "stop"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}
