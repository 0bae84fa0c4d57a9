"""The one interface every backend implements: chat messages in, a completion with usage and latency out.

A :class:`Request` is plain data (OpenAI-style message dicts), so it hashes into the run cache and crosses
process boundaries unchanged. A :class:`Constraint` is the schema-derived regex of appendix F.2; when it
names a tool, it constrains that tool call's *arguments* and each backend wraps it in its own tool-call
syntax (Hermes ``<tool_call>`` for chat templates, the API's tool calling for OpenAI-compatible servers).
"""

from __future__ import annotations

import hashlib
import json
from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass, field
from typing import Any, Sequence
from ..errors import CpdagthinkError



class BackendError(CpdagthinkError, RuntimeError):
    """A backend could not serve a request (missing package, unreachable endpoint, bad model file)."""


class RequestRejected(BackendError):
    """This one request cannot be served as it is (too long for the context, refused as invalid by the
    server) while others can: the runner records it on its instance and goes on."""


class PartialBatchError(BackendError):
    """A batch stopped on an error after some of its requests were served. ``completions`` holds, in request
    order, each finished completion (None where a request failed or never started), so the caller can keep
    what was paid for before it stops; the message is the first error's."""

    def __init__(self, error: BaseException, completions: list["Completion | None"]):
        self.completions = completions
        super().__init__(str(error))


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
        return asdict(self)

    def cache_key(self, backend_identity: dict[str, Any]) -> str:
        """Content address of this call: backend and model identity plus every decoding input."""
        payload = json.dumps({"backend": backend_identity, "request": self.to_json()}, sort_keys=True)
        return hashlib.sha256(payload.encode()).hexdigest()


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
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Completion":
        data = dict(data)
        data["tool_calls"] = [ToolCall(**c) for c in data.get("tool_calls", [])]
        return cls(**data)


@dataclass(frozen=True)
class Provenance:
    """Where a backend's model came from, as a run's metadata records it (paper App. J). None: not known
    to this backend, or not applicable (e.g. the symbolic reference agent has no weights)."""

    model_revision: str | None = None  # the resolved commit hash, or ``sha256:...`` of a weights file
    tokenizer_revision: str | None = None  # the same for the tokenizer (a GGUF file carries its own)
    model_package: str | None = None  # the pip package a local model file was installed from, ``name==version``
    api: str | None = None  # the API a service was called through, and where


class Backend(ABC):
    """A model behind one interface. ``identity()`` names the exact model (and revision or sha256).

    Capabilities are typed attributes, so the runner never reads them out of ``identity()``:
    ``thinking_supported`` (False: the runner sends ``thinking=False`` so one request is one cache entry),
    ``preferred_chunk_size`` (instances per batched call when a run does not choose one).
    """

    name: str = "backend"
    thinking_supported: bool = False
    preferred_chunk_size: int = 1

    @abstractmethod
    def identity(self) -> dict[str, Any]:
        """Backend, model, revision or file hash, and fixed settings: what makes two calls comparable."""

    def provenance(self) -> Provenance:
        """The model's resolved revisions and the API used, for run metadata (never part of the cache key)."""
        return Provenance()

    @abstractmethod
    def complete(self, request: Request) -> Completion:
        """Serve one request."""

    def complete_batch(self, requests: Sequence[Request]) -> list[Completion]:
        """Serve many requests; backends with real batching (vLLM, concurrent APIs) override this."""
        return [self.complete(r) for r in requests]

    def close(self) -> None:
        """Release the model or connections (no-op by default)."""
