"""A chat request and what comes back: the plain data a condition builds and reads, and every backend serves.

A :class:`Request` is plain data (OpenAI-style message dicts), so it hashes into the run cache and crosses
process boundaries unchanged. A :class:`Constraint` is the schema-derived regex of appendix F.2; when it
names a tool, it constrains that tool call's *arguments* and each backend wraps it in its own tool-call
syntax (Hermes ``<tool_call>`` for chat templates, the API's tool calling for OpenAI-compatible servers).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field, fields
from typing import Any


@dataclass(frozen=True)
class Constraint:
    """A regular-language constraint on the output, or on the arguments of the tool named ``tool``."""

    regex: str
    tool: str | None = None
    # Optional: the JSON schema the regex was derived from, for APIs that take a schema instead of a regex
    # (OpenAI ``response_format``). Backends that can apply ``regex`` ignore it.
    json_schema: dict[str, Any] | None = None


@dataclass(frozen=True)
class Request:
    """One chat completion request. ``tool_choice`` is ``"auto"``, ``"required"``, a tool name, or None."""

    messages: tuple[dict[str, Any], ...]
    tools: tuple[dict[str, Any], ...] = ()
    tool_choice: str | None = None
    constraint: Constraint | None = None
    thinking: bool = True
    max_tokens: int = 1024
    # Sampling: temperature 0 is greedy; top_k 0 and top_p 1 and min_p 0 switch those filters off.
    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = 0
    min_p: float = 0.0
    seed: int = 0

    def to_json(self) -> dict[str, Any]:
        """The request as JSON data: a new top-level dict whose messages and tools are the request's own
        (not deep-copied: a request is hashed two or three times per call, and its tools hold the whole schema)."""
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        data["constraint"] = asdict(self.constraint) if self.constraint else None
        return data

    def cache_key(self, backend_identity: dict[str, Any]) -> str:
        """Content address of this call: the identity of what computes it (backend, model, revision, build,
        decoder, profile; never where it is reached) and every input of the request, which its run contributes
        (the condition's messages, its decoding with the seed): the sha256 of
        ``json.dumps({"backend": backend_identity, "request": self.to_json()}, sort_keys=True)``."""
        return self.cache_keys([backend_identity])[0]

    def cache_keys(self, backend_identities: list[dict[str, Any]]) -> list[str]:
        """:meth:`cache_key` under each of ``backend_identities``, the request serialized once for all (it holds
        the tools' whole schema). The payload is put together as ``json.dumps`` writes it: with sorted keys,
        ``"backend"`` before ``"request"``, each separated as its defaults do."""
        request = json.dumps(self.to_json(), sort_keys=True)
        return [hashlib.sha256(f'{{"backend": {json.dumps(i, sort_keys=True)}, "request": {request}}}'.encode())
                .hexdigest() for i in backend_identities]


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: str  # raw JSON text, exactly as emitted (parsing is the caller's job, errors are recorded)


@dataclass
class Completion:
    """What came back: visible text, reasoning if any, tool calls, the raw output, usage and latency."""

    text: str
    tool_calls: list[ToolCall] = field(default_factory=list)
    reasoning: str | None = None
    raw: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    finish_reason: str | None = None
    # Backend-specific facts about this call (served model snapshot, attempts, unsupported flags such as
    # ``{"thinking": "unsupported"}``); plain JSON, never secrets.
    meta: dict[str, Any] = field(default_factory=dict)
    # Items the service needs back with this turn's output in the next request (the Responses API's
    # reasoning items with their encrypted content): cached with the call, never written to a record.
    reasoning_items: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """The completion as JSON data: a new top-level dict whose tool calls are new dicts and whose other values
        are the completion's own (not deep-copied: it is serialized once per call, as it is cached)."""
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        data["tool_calls"] = [{"name": c.name, "arguments": c.arguments} for c in self.tool_calls]
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Completion":
        data = dict(data)
        data["tool_calls"] = [ToolCall(**c) for c in data.get("tool_calls", [])]
        return cls(**data)
