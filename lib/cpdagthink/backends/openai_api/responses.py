"""Answers of OpenAI-compatible APIs read into a :class:`Completion`: chat completions
(:func:`completion_from_response`) and the Responses API (:func:`completion_from_responses`), then capped for
storage (:func:`cap_stored`).

* The reasoning (a server's ``reasoning_content``, a ``<think>`` block, or a Responses API reasoning summary)
  is the turn's reasoning, and the reasoning tokens are counted (``meta["reasoning_tokens"]``); the model
  snapshot that served is ``meta["served_model"]``.
* Responses API: only reasoning items with encrypted content are carried into the next turn (nothing else can
  be resolved under ``store=False``); an output item without a ``type`` is a malformed answer (the server's
  fault); a ``refusal`` is the answer's text, flagged ``meta["refusal"]``.
* What is kept of an answer is capped (per field: text, reasoning, raw output, each tool call's arguments,
  each carried reasoning item's summary); ``meta["truncated"]`` gives the original length of each field cut.

A body of the wrong shape raises one of :data:`SHAPE_ERRORS`; a reader wrapped in :func:`checked` raises
:class:`MalformedAnswer` instead, which says it is the server's fault.
"""

from __future__ import annotations

import dataclasses
import json
import threading
from typing import Any, Callable, TypeVar

from ...method.chat import Completion, ToolCall
from ..base import BackendError
from ..toolcalls import parse_tool_calls, split_reasoning

# Characters kept per stored field of an answer (text, reasoning, raw output, a call's arguments): about 64k
# tokens, above any budget the paper uses, and far below what a runaway or hostile server can send.
MAX_STORED_CHARS = 256_000
# What reading JSON of another shape than an answer raises.
SHAPE_ERRORS = (AttributeError, TypeError, ValueError, KeyError, IndexError)

T = TypeVar("T")


class MalformedAnswer(BackendError):
    """An HTTP 200 whose body is not an answer of the API (the server's fault); ``cause`` is what reading it raised."""

    def __init__(self, cause: Exception):
        self.cause = cause
        super().__init__(f"{type(cause).__name__}: {cause}")


def checked(read: Callable[..., T]) -> Callable[..., T]:
    """``read`` raising :class:`MalformedAnswer` where a body of another shape makes it raise one of
    :data:`SHAPE_ERRORS`."""

    def guarded(*args: Any) -> T:
        try:
            return read(*args)
        except SHAPE_ERRORS as exc:
            raise MalformedAnswer(exc) from exc

    return guarded


# The client builds its response types on first use (pydantic ``defer_build``), and that build is not
# thread-safe: two workers parsing their first answers at once can meet a half-built type ("BaseModel cannot
# be instantiated directly"). Reading an answer takes tens of microseconds, so answers are read one at a time.
_PARSE_LOCK = threading.Lock()


def typed(kind: Any, data: dict[str, Any]) -> Any:
    """An answer's JSON ``data`` as the client's type ``kind`` (``ChatCompletion``, ``Response``), built as the
    client builds the answers it reads: without validation (a field a service leaves out stays None), under one
    lock (see :data:`_PARSE_LOCK`)."""
    with _PARSE_LOCK:
        return kind.construct(**data)


def _field(obj: Any, name: str) -> Any:
    value = getattr(obj, name, None)
    if value is None:
        extra = getattr(obj, "model_extra", None) or {}
        value = extra.get(name)
    return value


def _usage_tokens(usage: Any, details: str, name: str) -> int | None:
    found = _field(usage, details) if usage is not None else None
    if found is None:
        return None
    value = found.get(name) if isinstance(found, dict) else _field(found, name)
    return None if value is None else int(value)


def _answer_meta(meta: dict[str, Any], response: Any, reasoning_tokens: int | None) -> dict[str, Any]:
    """``meta`` plus what the service reports about this answer: the model snapshot that served it, its
    fingerprint, the reasoning token count."""
    meta = dict(meta)
    for name in ("model", "system_fingerprint"):
        if getattr(response, name, None):
            meta["served_model" if name == "model" else name] = getattr(response, name)
    if reasoning_tokens is not None:
        meta["reasoning_tokens"] = reasoning_tokens
    return meta


def completion_from_response(response: Any, latency_s: float, meta: dict[str, Any]) -> Completion:
    """A :class:`Completion` from an OpenAI ``ChatCompletion`` object (reasoning token count, when the
    service reports one, in ``meta["reasoning_tokens"]``)."""
    if not getattr(response, "choices", None):
        raise ValueError("no choices")
    choice = response.choices[0]
    message = choice.message
    text, calls, reasoning, content = _message_parts(message)
    usage = getattr(response, "usage", None)
    try:
        raw = json.dumps(message.model_dump(exclude_none=True), ensure_ascii=False)
    except Exception:  # noqa: BLE001
        raw = content
    meta = _answer_meta(meta, response, _usage_tokens(usage, "completion_tokens_details", "reasoning_tokens"))
    refusal = getattr(message, "refusal", None)
    if refusal and not text and not calls:
        text, meta["refusal"] = str(refusal).strip(), True  # the model declined: shown in its own words
    return Completion(
        text=text,
        tool_calls=calls,
        reasoning=reasoning,
        raw=raw,
        prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
        completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
        latency_s=latency_s,
        finish_reason=choice.finish_reason,
        meta=meta,
    )


def _message_parts(message: Any) -> tuple[str, list[ToolCall], str | None, str]:
    """A chat completion message's text, tool calls, reasoning, and its content once the reasoning is split off."""
    content = message.content or ""
    reasoning = _field(message, "reasoning_content") or _field(message, "reasoning")
    calls = [
        ToolCall(name=tc.function.name, arguments=tc.function.arguments or "")
        for tc in (message.tool_calls or [])
        if getattr(tc, "function", None) is not None
    ]
    if reasoning is None and "</think>" in content:
        reasoning, content = split_reasoning(content)
    text = content.strip()
    if not calls and ("<tool_call>" in content or "[TOOL_CALLS]" in content):
        text, calls = parse_tool_calls(content)  # a server without a tool parser returns the raw envelope
    return text, calls, reasoning, content


@dataclasses.dataclass
class _Output:
    """What the output items of a Responses API answer hold, gathered item by item."""

    texts: list[str] = dataclasses.field(default_factory=list)
    refusals: list[str] = dataclasses.field(default_factory=list)
    summaries: list[str] = dataclasses.field(default_factory=list)
    calls: list[ToolCall] = dataclasses.field(default_factory=list)
    carried: list[dict[str, Any]] = dataclasses.field(default_factory=list)  # reasoning items to send back
    raw: list[dict[str, Any]] = dataclasses.field(default_factory=list)  # every item, encrypted content left out
    uncarried: int = 0

    def add(self, item: Any) -> None:
        if not getattr(item, "type", None):
            raise ValueError("an output item without a type")
        dumped = item.model_dump(exclude_none=True)
        self.raw.append({k: v for k, v in dumped.items() if k != "encrypted_content"})
        if item.type == "reasoning":
            self._add_reasoning(item, dumped)
        elif item.type == "function_call":
            self.calls.append(ToolCall(name=item.name, arguments=item.arguments or ""))
        elif item.type == "message":
            self.texts += [part.text for part in item.content if part.type == "output_text"]
            self.refusals += [part.refusal for part in item.content if part.type == "refusal"]

    def _add_reasoning(self, item: Any, dumped: dict[str, Any]) -> None:
        self.summaries += [part.text for part in item.summary or ()]
        if dumped.get("encrypted_content"):
            self.carried.append(dumped)
        else:  # with store=False the service keeps nothing an id could name: sent back, it refuses turn 2
            self.uncarried += 1


def completion_from_responses(response: Any, latency_s: float, meta: dict[str, Any]) -> Completion:
    """A :class:`Completion` from a Responses API ``Response``: message text, function calls, the reasoning
    summary as the reasoning, the reasoning items (with their encrypted content) to carry into the next
    turn, and the reasoning token count in ``meta["reasoning_tokens"]``. Raises ValueError, AttributeError or
    TypeError on a body of the wrong shape."""
    output = response.output
    if not isinstance(output, list):
        raise ValueError("no output list")
    if response.status == "failed":
        raise ValueError(f"status failed: {response.error}")
    found = _Output()
    for item in output:
        found.add(item)
    finish = _finish_reason(response, found.calls)
    usage = response.usage
    meta = _answer_meta(meta, response, _usage_tokens(usage, "output_tokens_details", "reasoning_tokens"))
    if found.uncarried:
        meta["reasoning_items_not_carried"] = f"{found.uncarried} without encrypted content"
    if found.refusals and not found.texts:
        meta["refusal"] = True  # the model declined: its words are the answer's text, shown as they are
    return Completion(
        text="".join(found.texts or found.refusals).strip(),
        tool_calls=found.calls,
        reasoning="\n\n".join(found.summaries) or None,
        raw=json.dumps(found.raw, ensure_ascii=False),
        prompt_tokens=int(getattr(usage, "input_tokens", 0) or 0),
        completion_tokens=int(getattr(usage, "output_tokens", 0) or 0),
        latency_s=latency_s,
        finish_reason=finish,
        meta=meta,
        reasoning_items=found.carried,
    )


def _finish_reason(response: Any, calls: list[ToolCall]) -> str:
    """Why a Responses API answer ended, in chat completions' words."""
    reason = getattr(response.incomplete_details, "reason", None) if response.status == "incomplete" else None
    finish = {"max_output_tokens": "length", "content_filter": "content_filter"}.get(reason or "", reason)
    return finish or ("tool_calls" if calls else "stop")


def _capped_reasoning_item(item: dict[str, Any], limit: int, name: str, cut: dict[str, int]) -> dict[str, Any] | None:
    """A reasoning item as it is cached and carried into the next turn: its summary cut to ``limit`` characters
    in all (the service reads the encrypted content, not the summary); None for an item whose encrypted content
    alone is over ``limit``, which cannot be cut and is not carried. Each cut goes into ``cut``."""
    encrypted = str(item.get("encrypted_content") or "")
    if len(encrypted) > limit:
        cut[f"{name}.encrypted_content"] = len(encrypted)
        return None
    parts, left = [], limit
    total = sum(len(str(p.get("text", ""))) for p in item.get("summary") or ())
    for part in item.get("summary") or ():
        text = str(part.get("text", ""))[:left]
        left -= len(text)
        parts.append({**part, "text": text})
    if total > limit:
        cut[f"{name}.summary"] = total
        return {**item, "summary": parts}
    return item


def cap_stored(completion: Completion, limit: int) -> Completion:
    """``completion`` with each stored field (text, reasoning, raw output, each call's arguments, each reasoning
    item's summary) cut to ``limit`` characters; ``meta["truncated"]`` names each field cut with its original
    length. A reasoning item's summary is what it carries into the next turn too."""
    cut: dict[str, int] = {}

    def cap(name: str, text: str | None) -> str | None:
        if text is not None and len(text) > limit:
            cut[name] = len(text)
            return text[:limit]
        return text

    completion.text = cap("text", completion.text) or ""
    completion.reasoning = cap("reasoning", completion.reasoning)
    completion.raw = cap("raw", completion.raw) or ""
    completion.tool_calls = [ToolCall(c.name[:limit], cap(f"tool_calls[{i}].arguments", c.arguments) or "")
                             for i, c in enumerate(completion.tool_calls)]
    completion.reasoning_items = [capped for i, item in enumerate(completion.reasoning_items)
                                  if (capped := _capped_reasoning_item(item, limit, f"reasoning_items[{i}]", cut))]
    if cut:
        completion.meta["truncated"] = cut
    return completion
