"""OpenAI-compatible APIs: chat completions (the OpenAI API, a vLLM server, ``llama_cpp.server``) and the
OpenAI Responses API (reasoning models).

* Model profiles (:mod:`.profiles`) decide the request's shape: which API (``responses`` for the GPT-5 family
  and the o-series, chat completions for everything else; the ``api`` option overrides), ``max_tokens`` or
  ``max_completion_tokens``, whether temperature/top_p are sent (never to OpenAI reasoning models), and the
  reasoning control: ``reasoning_effort`` (``Request.thinking=False`` sends the family's off value, e.g.
  ``minimal``/``none``) or the chat template's ``enable_thinking`` (vLLM servers). Backend options override each rule.
* Responses API (:func:`responses_kwargs`): ``input`` items, flat function tools, ``reasoning={"effort": ...,
  "summary": "auto"}``, ``max_output_tokens``, ``store=False`` with ``include=["reasoning.encrypted_content"]``:
  the service keeps nothing, so turn 1's reasoning items travel back with turn 2 (the assistant message's
  ``reasoning_items``, before its ``function_call``/``function_call_output`` items). The reasoning summary is
  recorded as the turn's reasoning and the reasoning tokens are counted; ``meta["api"]`` says which API served.
  Only items with encrypted content are carried (nothing else can be resolved under ``store=False``), their
  summaries capped like every stored field; items the service cannot verify are dropped and the turn resent
  (:meth:`OpenAIBackend.complete`). An output item without a ``type`` is a malformed answer (the server's
  fault); a ``refusal`` is the answer's text, flagged ``meta["refusal"]``.
* Tools are sent as given (``strict`` with a strict-compatible schema where the profile says the service
  enforces it; ``meta["schema_enforced"]``); ``tool_choice`` ``"auto"``/``"required"``/``"none"`` pass through
  and any other string is a forced call of that function.
* Constraints: with ``regex_mode="vllm"`` the regex goes in ``extra_body={"structured_outputs": {"regex":
  ...}}``; when it constrains a tool's arguments it is wrapped in the family's envelope (Hermes
  ``<tool_call>`` or Mistral ``[TOOL_CALLS]``) so the server's tool parser still sees a call. vLLM cannot
  combine a *named* tool choice with ``structured_outputs``, so a forced tool choice is sent as ``"auto"``
  there (the regex forces the call anyway; ``meta["tool_choice_requested"]`` records it). With
  ``regex_mode="none"`` a constraint is enforced only where the API can: a strict or forced tool call or,
  without tools, a json_schema response format; ``meta["constraint"]`` says which, or ``"not enforced"``.
* Secrets (:func:`key_for`): each endpoint gets its own key, handed to its client only. A ``base_url`` with a
  password (``http://user:KEY@host``) sends that key to that URL only. Otherwise OpenAI's own host gets the
  variable ``api_key_env`` (``OPENAI_API_KEY`` when not named), and any other host gets a named ``api_key_env``
  only: the environment's OpenAI key never reaches a proxy or server it was not named for (a server with no key
  gets the placeholder :data:`NO_KEY`). URLs are recorded without credentials, and error bodies are stored with
  ``Authorization``/``api-key``/bearer values redacted.
* Failures: 408/409/425/429/5xx, connection errors and an HTTP 200 whose body is not a well-formed answer are
  retried ``retries`` times with capped exponential backoff and seeded jitter (``Retry-After`` honoured up to
  the cap), each retry on the next ``base_url``. ``timeout`` bounds each attempt as a whole (connecting,
  sending and every read together), so a server that trickles bytes cannot hold a request open; a request
  that times out is not retried: a server that did not answer once will not answer faster the second time,
  and a dead endpoint must fail within one ``timeout``. A request the service rejects (400/413/422) comes
  back as a rejected completion carrying the service's own message (``meta["rejected"]``);
  :meth:`OpenAIBackend.complete` raises :class:`ServiceRejected` instead.
* What is kept of an answer is capped (``max_stored_chars`` per field: text, reasoning, raw output, each tool
  call's arguments); ``meta["truncated"]`` gives the original length of each field cut.
* At most ``max_concurrency`` requests are in flight per backend, across concurrent batches too (so a runner
  may overlap batches to keep every slot busy); batches run on daemon threads and Ctrl-C stops waiting at once.
  A batch that stops on an error still hands back every completion that finished (:class:`PartialBatchError`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import json
import os
import queue
import random
import re
import threading
import time
from typing import Any, Callable, Iterator, Sequence
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

from ..credentials import check_url, is_secret_query_key, with_credentials
from ..method.chat import Completion, Request, ToolCall
from .base import Backend, BackendError, PartialBatchError, Provenance, RequestRejected
from .profiles import ModelProfile, check_effort, profile_for, with_overrides
from .toolcalls import chat_messages, envelope_regex, parse_tool_calls, split_reasoning

INSTALL_HINT = "pip install -e '.[api]'"
REGEX_MODES = ("none", "vllm")
# The request itself is at fault (e.g. longer than the context): record it on its instance, go on.
REJECTED_STATUS = {400, 413, 422}
RETRYABLE_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}
OPENAI_URL = "https://api.openai.com/v1"
OPENAI_HOST = "api.openai.com"
DEFAULT_KEY_ENV = "OPENAI_API_KEY"
# What a host without a key is sent: the client needs some string, servers without auth ignore it, and it is no secret.
NO_KEY = "no-key"
# Seconds one attempt may take when no ``timeout`` is given: a reasoning model at a paper-scale budget
# legitimately takes minutes; anything else that is silent for a minute is treated as dead.
TIMEOUT_REASONING_S = 600.0
TIMEOUT_CHAT_S = 60.0
# Characters kept per stored field of an answer (text, reasoning, raw output, a call's arguments): about 64k
# tokens, above any budget the paper uses, and far below what a runaway or hostile server can send.
MAX_STORED_CHARS = 256_000
# The keywords a ``strict`` function schema may use (the service's structured-outputs subset).
_STRICT_KEYWORDS = frozenset({
    "type", "properties", "required", "additionalProperties", "items", "enum", "const", "anyOf", "$defs", "$ref",
    "description", "pattern", "format", "minItems", "maxItems", "minimum", "maximum", "exclusiveMinimum",
    "exclusiveMaximum", "multipleOf"})

_SECRET_PATTERNS = (
    # header lines and JSON fields: Authorization / api-key / x-api-key, then the value
    re.compile(r"""(?i)(["']?(?:authorization|proxy-authorization|x-api-key|api[-_]key)["']?\s*[:=]\s*["']?)[^"',\s}]+(?:\s+[^"',\s}]+)?"""),
    re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{6,}"),
    re.compile(r"\bsk-[A-Za-z0-9_-]{8,}"),
    re.compile(r"(?i)(\b[a-z][a-z0-9+.-]*://)[^/@\s:]*:[^/@\s]*@"),  # URL userinfo
)


def public_url(url: str | None) -> str:
    """``url`` as it may be recorded: no user name or password, secret-looking query values redacted."""
    if url is None:
        return OPENAI_URL
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = host + (f":{parts.port}" if parts.port else "")
    query = urlencode([(k, "REDACTED" if is_secret_query_key(k) else v)
                       for k, v in parse_qsl(parts.query, keep_blank_values=True)])
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def key_variable(url: str | None, api_key_env: str | None = None) -> str | None:
    """The environment variable whose value is sent to ``url`` (None: OpenAI's default endpoint) when the URL
    holds no key of its own: ``api_key_env`` where the caller named one; else ``OPENAI_API_KEY`` for OpenAI's
    own host only (the environment's OpenAI key is meant for OpenAI), and None for any other host."""
    if api_key_env:
        return api_key_env
    return DEFAULT_KEY_ENV if url is None or urlsplit(url).hostname == OPENAI_HOST else None


def key_for(url: str | None, api_key_env: str | None = None) -> str | None:
    """The key sent to ``url``, or None where none is given: the URL's own password (percent-decoded), which
    goes to that URL only, else the value of :func:`key_variable`'s variable."""
    password = None if url is None else urlsplit(url).password
    if password:
        return unquote(password)
    variable = key_variable(url, api_key_env)
    return (os.environ.get(variable) or None) if variable else None


def public_url_for_client(url: str) -> str:
    """The URL the HTTP client gets: without user info (the password, if any, is sent as the bearer key;
    httpx would otherwise replace the bearer header with Basic auth)."""
    parts = urlsplit(url)
    netloc = parts.netloc.rpartition("@")[2]
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def redact(text: str, secrets: Sequence[str] = ()) -> str:
    """``text`` with credentials removed: known secret values, auth header values, bearer tokens, API-key
    shaped strings and URL passwords."""
    for secret in secrets:
        if secret and len(secret) >= 4:
            text = text.replace(secret, "REDACTED")
    for pattern in _SECRET_PATTERNS:
        text = pattern.sub(lambda m: (m.group(1) if m.groups() else "") + "REDACTED", text)
    return text


# The service's refusal of reasoning items it did not issue to this organisation.
_UNVERIFIABLE = re.compile(r"(?i)encrypted content .* could not be verified|invalid_encrypted_content")


def _carries_reasoning(request: Request) -> bool:
    return any(m.get("reasoning_items") for m in request.messages)


def without_reasoning_items(request: Request) -> Request:
    """``request`` with no reasoning items carried in its messages (each turn's text and calls kept)."""
    return dataclasses.replace(request, messages=tuple({k: v for k, v in m.items() if k != "reasoning_items"}
                                                       for m in request.messages))


class ServiceRejected(RequestRejected):
    """The service refused this request as invalid (HTTP 400/413/422). ``server_message`` is the service's
    own error text (redacted), ``status_code`` its HTTP status."""

    def __init__(self, url: str, status_code: int, server_message: str):
        self.url, self.status_code, self.server_message = url, status_code, server_message
        super().__init__(f"{url} rejected the request (HTTP {status_code}): {server_message}")


def tool_choice_param(choice: str | None, *, flat: bool = False) -> Any:
    """``tool_choice`` as the API takes it: a mode, or a forced function (nested for chat completions, flat for
    the Responses API)."""
    if choice is None or choice in ("auto", "required", "none"):
        return choice
    return {"type": "function", "name": choice} if flat else {"type": "function", "function": {"name": choice}}


def strict_schema(schema: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """``schema`` made acceptable to the service's ``strict`` function tools, and what that loosened.

    Every object lists all its properties as required (an optional one is sent as nullable) and allows no
    others; tuple positions (``prefixItems``) become ``items`` (exact when every position takes the same
    schema, as the CausalAnalysis pairs and triples do); keywords outside the strict subset are dropped."""
    loosened: list[str] = []

    def walk(node: Any, path: str) -> Any:
        if isinstance(node, list):
            return [walk(v, path) for v in node]
        if not isinstance(node, dict):
            return node
        out: dict[str, Any] = {}
        for key, value in node.items():
            if key in ("properties", "$defs"):
                out[key] = {name: walk(v, f"{path}/{key}/{name}") for name, v in value.items()}
            elif key in _STRICT_KEYWORDS:
                out[key] = walk(value, f"{path}/{key}")
            elif key != "prefixItems":
                loosened.append(f"{path or '/'}: {key} dropped")
        if "prefixItems" in node:
            positions = walk(node["prefixItems"], f"{path}/prefixItems")
            distinct = [p for i, p in enumerate(positions) if p not in positions[:i]]
            out["items"] = distinct[0] if len(distinct) == 1 else {"anyOf": distinct}
            if len(distinct) > 1:
                loosened.append(f"{path or '/'}: tuple positions merged into one item schema")
        if out.get("type") == "object" or "properties" in out:
            properties = out.setdefault("properties", {})
            for name in [n for n in properties if n not in node.get("required", ())]:
                properties[name] = {"anyOf": [properties[name], {"type": "null"}]}
                loosened.append(f"{path}/properties/{name}: optional, sent as nullable")
            out["required"] = list(properties)
            out["additionalProperties"] = False
        return out

    strict = walk(schema, "")
    return strict, list(dict.fromkeys(loosened))  # each loosening once, however many branches share it


def _add_tools(kwargs: dict[str, Any], note: dict[str, Any], request: Request, profile: ModelProfile, *,
               flat: bool) -> str | None:
    """Put the request's tools into ``kwargs`` as the API takes them (chat: nested under ``function``; Responses:
    flat), ``strict`` with a strict-compatible schema where the service enforces it, and say so in ``note``.
    Returns the tool choice to send (None without tools)."""
    if not request.tools:
        return None
    tools, loosened = [], []
    for tool in request.tools:
        fn = dict(tool.get("function", tool))
        if profile.strict_tools:
            fn["parameters"], changes = strict_schema(fn.get("parameters") or {"type": "object", "properties": {}})
            fn["strict"] = True
            loosened += [f"{fn.get('name')}: {c}" for c in changes]
        elif flat:
            fn["strict"] = False  # the Responses API makes function tools strict unless told otherwise
        tools.append({"type": "function", **fn} if flat else {**tool, "function": fn})
    kwargs["tools"] = tools
    note["schema_enforced"] = profile.strict_tools
    if loosened:
        note["schema_loosened"] = loosened
    return request.tool_choice


def _effort(request: Request, profile: ModelProfile, reasoning_effort: str | None) -> str | None:
    """The reasoning effort to send: the family's off value on a thinking-off request, else the chosen one."""
    if profile.reasoning_control != "reasoning_effort":
        return None
    return profile.effort_off if (not request.thinking and profile.effort_off) else reasoning_effort


def _sampling(request: Request, profile: ModelProfile, vllm_server: bool) -> tuple[dict[str, Any], dict[str, Any], list[str]]:
    """(top-level sampling kwargs, vLLM extra_body sampling, settings not sent)."""
    top: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    not_sent: list[str] = []
    if profile.sampling:
        top["temperature"] = request.temperature
        if request.top_p != 1.0:
            top["top_p"] = request.top_p
    else:  # the family takes only the API's default (1); anything else is rejected with HTTP 400
        not_sent += [f"{k}={v}" for k, v in (("temperature", request.temperature), ("top_p", request.top_p)) if v != 1.0]
    for name, value, off in (("top_k", request.top_k, 0), ("min_p", request.min_p, 0.0)):
        if value == off:
            continue
        if vllm_server and profile.sampling:
            extra[name] = value
        else:
            not_sent.append(f"{name}={value}")
    return top, extra, not_sent


def chat_kwargs(
    request: Request,
    model: str,
    *,
    profile: ModelProfile | None = None,
    regex_mode: str = "none",
    reasoning_effort: str | None = None,
    send_seed: bool = True,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The ``chat.completions.create`` keyword arguments for ``request`` and a note of what was enforced
    and sent. ``profile`` defaults to the model's (:func:`profiles.profile_for`). Pure: tests check the
    exact payload."""
    if regex_mode not in REGEX_MODES:
        raise ValueError(f"regex_mode must be one of {REGEX_MODES}, got {regex_mode!r}")
    profile = profile or profile_for(model)
    vllm_server = regex_mode == "vllm"
    kwargs: dict[str, Any] = {
        "model": model,
        "messages": chat_messages(request.messages, arguments_as="str"),
        profile.token_param: request.max_tokens,
    }
    sampling, extra, not_sent = _sampling(request, profile, vllm_server)
    kwargs.update(sampling)
    if send_seed:
        kwargs["seed"] = request.seed
    note: dict[str, Any] = {"api": "chat"}
    if not_sent:
        note["sampling_not_sent"] = not_sent
    choice = _add_tools(kwargs, note, request, profile, flat=False)
    c = request.constraint
    if c is not None:
        if vllm_server:
            if c.tool and request.tools:
                regex = envelope_regex(c.tool, c.regex, style=profile.tool_envelope)
                if choice not in (None, "auto"):
                    note["tool_choice_requested"] = choice
                    choice = "auto"  # vLLM: a named tool choice cannot be combined with structured_outputs
                note["constraint"] = f"regex ({profile.tool_envelope} envelope)"
                note["schema_enforced"] = True
            else:
                regex = c.regex
                note["constraint"] = "regex"
            extra["structured_outputs"] = {"regex": regex}
        elif c.json_schema is not None and not request.tools:
            kwargs["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": c.tool or "output", "schema": c.json_schema, "strict": True},
            }
            note["constraint"] = "response_format json_schema"
        else:
            note["constraint"] = _tool_constraint(request, choice, profile)
    if choice is not None:
        kwargs["tool_choice"] = tool_choice_param(choice)
        note["tool_choice_sent"] = choice
    effort = _effort(request, profile, reasoning_effort)
    if effort is not None:
        kwargs["reasoning_effort"] = effort
        note["reasoning_effort_sent"] = effort
    if profile.reasoning_control == "chat_template_kwargs":
        extra["chat_template_kwargs"] = {"enable_thinking": bool(request.thinking)}
    if extra:
        kwargs["extra_body"] = extra
    return kwargs, note


def _tool_constraint(request: Request, choice: str | None, profile: ModelProfile) -> str:
    """How an API without regex support enforces a constraint on a tool's arguments, if at all."""
    if not (request.constraint and request.constraint.tool and request.tools):
        return "not enforced"
    forced = choice not in (None, "auto", "none")
    if profile.strict_tools:
        return "tool schema (strict function tool" + (", forced call)" if forced else ")")
    return "tool schema (forced tool call)" if forced else "not enforced"


def response_input(messages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Chat messages as Responses API ``input`` items: messages stay messages, an assistant's tool calls become
    ``function_call`` items preceded by the reasoning items that produced them, tool results become
    ``function_call_output`` items (call ids as the messages carry them)."""
    items: list[dict[str, Any]] = []
    for message in chat_messages(messages, arguments_as="str"):
        role = message["role"]
        if role == "assistant":
            items += [dict(item) for item in message.get("reasoning_items", ())]
            if message["content"]:
                items.append({"role": "assistant", "content": message["content"]})
            items += [{"type": "function_call", "call_id": call["id"], "name": call["function"]["name"],
                       "arguments": call["function"]["arguments"]} for call in message.get("tool_calls", ())]
        elif role == "tool":
            items.append({"type": "function_call_output", "call_id": message["tool_call_id"],
                          "output": message["content"]})
        else:
            items.append({"role": role, "content": message["content"]})
    return items


def responses_kwargs(
    request: Request,
    model: str,
    *,
    profile: ModelProfile | None = None,
    reasoning_effort: str | None = None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The ``responses.create`` keyword arguments for ``request`` and a note of what was enforced and sent.
    Nothing is stored by the service (``store=False``); a reasoning family's reasoning comes back encrypted
    (``include``) with a summary, so the next turn can carry it. Pure: tests check the exact payload."""
    profile = profile or profile_for(model)
    kwargs: dict[str, Any] = {"model": model, "input": response_input(request.messages),
                              "max_output_tokens": request.max_tokens, "store": False}
    sampling, _, not_sent = _sampling(request, profile, vllm_server=False)
    kwargs.update(sampling)
    note: dict[str, Any] = {"api": "responses", "sampling_not_sent": [*not_sent, f"seed={request.seed}"]}  # no seed here
    choice = _add_tools(kwargs, note, request, profile, flat=True)
    c = request.constraint
    if c is not None:
        if c.json_schema is not None and not request.tools:
            kwargs["text"] = {"format": {"type": "json_schema", "name": c.tool or "output", "schema": c.json_schema,
                                         "strict": True}}
            note["constraint"] = "text format json_schema"
        else:
            note["constraint"] = _tool_constraint(request, choice, profile)
    if choice is not None:
        kwargs["tool_choice"] = tool_choice_param(choice, flat=True)
        note["tool_choice_sent"] = choice
    if profile.reasoning_control == "reasoning_effort":
        effort = _effort(request, profile, reasoning_effort)
        reasoning: dict[str, Any] = {}
        if effort is not None:
            reasoning["effort"] = note["reasoning_effort_sent"] = effort
        if (effort or profile.default_effort) != "none":
            reasoning["summary"] = "auto"
        if reasoning:
            kwargs["reasoning"] = reasoning
        kwargs["include"] = ["reasoning.encrypted_content"]
    return kwargs, note


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
    texts, refusals, summaries, calls, carried, raw = [], [], [], [], [], []
    uncarried = 0
    for item in output:
        if not getattr(item, "type", None):
            raise ValueError("an output item without a type")
        dumped = item.model_dump(exclude_none=True)
        raw.append({k: v for k, v in dumped.items() if k != "encrypted_content"})
        if item.type == "reasoning":
            summaries += [part.text for part in item.summary or ()]
            if dumped.get("encrypted_content"):
                carried.append(dumped)
            else:  # with store=False the service keeps nothing an id could name: sent back, it refuses turn 2
                uncarried += 1
        elif item.type == "function_call":
            calls.append(ToolCall(name=item.name, arguments=item.arguments or ""))
        elif item.type == "message":
            texts += [part.text for part in item.content if part.type == "output_text"]
            refusals += [part.refusal for part in item.content if part.type == "refusal"]
    reason = getattr(response.incomplete_details, "reason", None) if response.status == "incomplete" else None
    finish = {"max_output_tokens": "length", "content_filter": "content_filter"}.get(reason or "", reason)
    usage = response.usage
    meta = _answer_meta(meta, response, _usage_tokens(usage, "output_tokens_details", "reasoning_tokens"))
    if uncarried:
        meta["reasoning_items_not_carried"] = f"{uncarried} without encrypted content"
    if refusals and not texts:
        meta["refusal"] = True  # the model declined: its words are the answer's text, shown as they are
    return Completion(
        text="".join(texts or refusals).strip(),
        tool_calls=calls,
        reasoning="\n\n".join(summaries) or None,
        raw=json.dumps(raw, ensure_ascii=False),
        prompt_tokens=int(getattr(usage, "input_tokens", 0) or 0),
        completion_tokens=int(getattr(usage, "output_tokens", 0) or 0),
        latency_s=latency_s,
        finish_reason=finish or ("tool_calls" if calls else "stop"),
        meta=meta,
        reasoning_items=carried,
    )


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


# The client builds its response types on first use (pydantic ``defer_build``), and that build is not
# thread-safe: two workers parsing their first answers at once can meet a half-built type ("BaseModel cannot
# be instantiated directly"). Parsing takes microseconds, so answers are parsed one at a time.
_PARSE_LOCK = threading.Lock()


def _parsed(raw: Any) -> Any:
    """The client's typed object for a raw response (see :data:`_PARSE_LOCK`)."""
    with _PARSE_LOCK:
        return raw.parse()


class _Deadline(threading.local):
    """When the request running on this thread must be done (None: no request is bounded here)."""

    at: float | None = None


_DEADLINE = _Deadline()


@contextlib.contextmanager
def bounded(seconds: float) -> Iterator[None]:
    """Bound every network operation of the requests made inside the block, on this thread, to end within
    ``seconds`` in total (see :func:`bounded_http_client`)."""
    _DEADLINE.at = time.monotonic() + seconds
    try:
        yield
    finally:
        _DEADLINE.at = None


def bounded_http_client(timeout: float) -> Any:
    """An ``httpx.Client`` whose connections honour :func:`bounded`: each connect, read and write gets only
    the time left of its request, and none once it is spent. The client's own timeouts bound each operation
    alone, so a server that sends a byte a second would otherwise hold a request open for ever."""
    import httpcore
    import httpx

    def left(timeout: float | None, error: type[Exception]) -> float | None:
        if _DEADLINE.at is None:
            return timeout
        remaining = _DEADLINE.at - time.monotonic()
        if remaining <= 0:
            raise error("the request's whole time is spent")
        return remaining if timeout is None else min(timeout, remaining)

    class Stream(httpcore.NetworkStream):
        def __init__(self, inner: httpcore.NetworkStream):
            self._inner = inner

        def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
            return self._inner.read(max_bytes, left(timeout, httpcore.ReadTimeout))

        def write(self, buffer: bytes, timeout: float | None = None) -> None:
            self._inner.write(buffer, left(timeout, httpcore.WriteTimeout))

        def close(self) -> None:
            self._inner.close()

        def start_tls(self, ssl_context: Any, server_hostname: str | None = None,
                      timeout: float | None = None) -> httpcore.NetworkStream:
            return Stream(self._inner.start_tls(ssl_context, server_hostname, left(timeout, httpcore.ConnectTimeout)))

        def get_extra_info(self, info: str) -> Any:
            return self._inner.get_extra_info(info)

    class Network(httpcore.NetworkBackend):
        def __init__(self, inner: httpcore.NetworkBackend):
            self._inner = inner

        def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                        socket_options: Any = None) -> httpcore.NetworkStream:
            return Stream(self._inner.connect_tcp(host, port, left(timeout, httpcore.ConnectTimeout), local_address,
                                                  socket_options))

        def connect_unix_socket(self, path: str, timeout: float | None = None,
                                socket_options: Any = None) -> httpcore.NetworkStream:
            return Stream(self._inner.connect_unix_socket(path, left(timeout, httpcore.ConnectTimeout), socket_options))

        def sleep(self, seconds: float) -> None:
            self._inner.sleep(seconds)

    client = httpx.Client(timeout=timeout, follow_redirects=True)
    # httpx builds its connection pools (direct, and through the environment's proxies) without a way to pass
    # a network backend: wrap the ones it made.
    for transport in (client._transport, *client._mounts.values()):
        pool = getattr(transport, "_pool", None)
        if pool is not None:
            pool._network_backend = Network(pool._network_backend)
    return client


def run_concurrently(fn: Callable[[Any], Any], items: Sequence[Any], workers: int, stop: threading.Event) -> list[Any]:
    """``fn`` over ``items`` on at most ``workers`` daemon threads: for each item, in order, its result or the
    exception it raised, or None for an item never started (the first exception stops further items from
    starting; the running ones finish, so nothing already paid for is dropped).

    The caller's thread waits in short steps, so Ctrl-C interrupts it at once; it then sets ``stop`` (workers
    check it between attempts) and, the threads being daemons, never waits for a request in flight.
    """
    todo: queue.SimpleQueue[int] = queue.SimpleQueue()
    for i in range(len(items)):
        todo.put(i)
    outcomes: list[Any] = [None] * len(items)
    failed = threading.Event()
    finished = threading.Semaphore(0)

    def work() -> None:
        while not stop.is_set() and not failed.is_set():
            try:
                i = todo.get_nowait()
            except queue.Empty:
                break
            try:
                outcomes[i] = fn(items[i])
            except BaseException as error:  # noqa: BLE001 - handed to the caller's thread
                outcomes[i] = error
                failed.set()
        finished.release()

    threads = [threading.Thread(target=work, daemon=True, name=f"openai-worker-{n}")
               for n in range(min(workers, len(items)))]
    for thread in threads:
        thread.start()
    try:
        for _ in threads:
            while not finished.acquire(timeout=0.1):
                pass
    except BaseException:
        stop.set()
        raise
    return outcomes


class OpenAIBackend(Backend):
    """Chat completions or the Responses API over HTTP. ``base_url``: None (api.openai.com), one URL, or a
    list (round-robin).

    Options beyond the connection: ``api`` (``chat`` | ``responses``; default by profile),
    ``token_param`` (``max_tokens`` | ``max_completion_tokens``), ``thinking_param`` (``none`` |
    ``reasoning_effort`` | ``chat_template_kwargs``), ``reasoning_effort`` (sent on thinking requests),
    ``send_sampling`` (send temperature/top_p even where the profile says not to), ``timeout`` (seconds one
    attempt may take in all; default by profile: 600 for reasoning families, else 60), ``retries``,
    ``max_stored_chars`` (kept per field of an answer); ``revision`` and ``reasoning_parser`` record what the
    server was started with; ``api_key_env`` names the variable whose key is sent (:func:`key_variable`).
    """

    name = "openai"
    preferred_chunk_size = 64

    def __init__(
        self,
        model: str,
        base_url: str | Sequence[str] | None = None,
        *,
        api_key_env: str | None = None,
        max_concurrency: int = 5,
        retries: int = 4,
        timeout: float | None = None,
        backoff_base: float = 1.0,
        backoff_max: float = 30.0,
        jitter_seed: int = 0,
        regex_mode: str = "none",
        token_param: str | None = None,
        thinking_param: str | None = None,
        reasoning_effort: str | None = None,
        send_sampling: bool | None = None,
        reasoning_parser: str | None = None,
        revision: str | None = None,
        send_seed: bool = True,
        api: str | None = None,
        max_stored_chars: int = MAX_STORED_CHARS,
    ):
        try:
            import openai
        except ImportError as exc:
            raise BackendError(f"the openai client is not installed; install with: {INSTALL_HINT}") from exc
        if regex_mode not in REGEX_MODES:
            raise ValueError(f"regex_mode must be one of {REGEX_MODES}, got {regex_mode!r}")
        if timeout is not None and not timeout > 0:
            raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
        if int(retries) < 0:
            raise ValueError(f"retries must be 0 or more, got {retries!r}")
        if int(max_stored_chars) < 1:
            raise ValueError(f"max_stored_chars must be at least 1, got {max_stored_chars!r}")
        self.model = model
        urls: list[str | None] = [None] if base_url is None else [base_url] if isinstance(base_url, str) else list(base_url)
        urls = [None if u is None else with_credentials(u) for u in urls]  # the key a front door stripped (credentials)
        if not urls:
            raise ValueError("base_url list is empty")
        for url in urls:
            if url is not None:
                check_url(url)
        self.base_urls = [public_url(u) for u in urls]
        self.regex_mode = regex_mode
        if thinking_param is None and regex_mode == "vllm" and profile_for(model).thinking == "unknown":
            thinking_param = "chat_template_kwargs"  # an unknown model on a vLLM server: the template's switch
        self.profile = with_overrides(profile_for(model), token_param=token_param, reasoning_control=thinking_param,
                                      reasoning_parser=reasoning_parser, sampling=send_sampling,
                                      api=api or ("chat" if regex_mode == "vllm" else None))
        if self.profile.api == "responses" and regex_mode == "vllm":
            raise ValueError("regex_mode 'vllm' sends the regex through chat completions: use api 'chat' with it")
        check_effort(self.profile, reasoning_effort)
        self.reasoning_effort = reasoning_effort
        # The switch changes what is sent only where the family has an off switch; elsewhere the runner
        # sends thinking=False so one request is one cache entry.
        self.thinking_supported = self.profile.off_switch is not None
        self.revision = revision
        self.api_key_env = api_key_env
        keys = [key_for(u, api_key_env) for u in urls]
        for url, key in zip(urls, keys):
            variable = key_variable(url, api_key_env)
            if key is None and variable:
                raise BackendError(f"{public_url(url)} needs a key in the environment variable {variable}, which "
                                   "is unset or empty")
        self._secrets = tuple(k for k in keys if k)
        slow = self.profile.thinking in ("switchable", "always_on")
        self.timeout = float(timeout) if timeout is not None else (TIMEOUT_REASONING_S if slow else TIMEOUT_CHAT_S)
        self._clients = [
            openai.OpenAI(api_key=key or NO_KEY, base_url=None if u is None else public_url_for_client(u),
                          max_retries=0, timeout=self.timeout, http_client=bounded_http_client(self.timeout))
            for u, key in zip(urls, keys)
        ]
        del keys
        self._openai = openai
        self.max_concurrency = max(1, int(max_concurrency))
        self._slots = threading.BoundedSemaphore(self.max_concurrency)  # requests in flight, all batches
        self.retries = int(retries)
        self.backoff_base = backoff_base
        self.backoff_max = backoff_max
        self.send_seed = send_seed
        self.max_stored_chars = int(max_stored_chars)
        self._rr = itertools.cycle(range(len(urls)))
        self._lock = threading.Lock()
        self._rng = random.Random(jitter_seed)
        self._stop = threading.Event()
        self.served_model: str | None = None
        self.attempts = 0  # total HTTP attempts made (for tests and cost accounting)

    def provenance(self) -> Provenance:
        """The revision asked for (a service resolves its own: each response's ``model`` is recorded as the
        served snapshot) and the API with its public endpoints."""
        where = ", ".join(self.base_urls)
        api = "Responses API" if self.profile.api == "responses" else "Chat Completions API"
        return Provenance(model_revision=self.revision, api=f"OpenAI-compatible {api} at {where}")

    def identity(self) -> dict[str, Any]:
        """What computes: the model as requests name it to the server, the revision asked for, the API, regex mode,
        profile and effort. Never where it is reached: the endpoint that served each call is provenance, in the
        call's ``meta["base_url"]``, so replicas and aliases of one server are one model."""
        p = self.profile
        # The snapshot a server reports is recorded per call (Completion.meta["served_model"]), not here:
        # identity() keys the cache and must not change once responses arrive.
        return {
            "backend": "openai",
            "api": p.api,
            "model": self.model,
            "revision": self.revision,
            "regex_mode": self.regex_mode,
            "profile": {"family": p.family, "token_param": p.token_param, "sampling": p.sampling,
                        "reasoning_control": p.reasoning_control, "effort_off": p.effort_off,
                        "tool_envelope": p.tool_envelope, "reasoning_parser": p.reasoning_parser,
                        "strict_tools": p.strict_tools},
            "reasoning_effort": self.reasoning_effort,
        }

    def _next_client(self) -> tuple[Any, str]:
        with self._lock:
            i = next(self._rr)
        return self._clients[i], self.base_urls[i]

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        with self._lock:
            jitter = self._rng.random()
        delay = min(self.backoff_max, self.backoff_base * (2**attempt)) * (0.5 + 0.5 * jitter)
        if retry_after is not None:
            delay = max(delay, min(retry_after, self.backoff_max))
        return delay

    def _retry_after(self, exc: Exception) -> float | None:
        try:
            header = exc.response.headers.get("retry-after")  # type: ignore[attr-defined]
            return float(header) if header is not None else None
        except (AttributeError, ValueError):
            return None

    def _server_message(self, exc: Any) -> str:
        body = getattr(exc, "body", None)
        if isinstance(body, dict) and body.get("message"):
            text = str(body["message"])
        elif body is not None:
            text = body if isinstance(body, str) else json.dumps(body)
        else:
            text = getattr(getattr(exc, "response", None), "text", "") or str(exc)
        return redact(text, self._secrets)[:2000]

    def _describe(self, exc: Exception) -> str:
        return redact(f"{type(exc).__name__}: {exc}", self._secrets)[:300]

    def _call(self, request: Request) -> tuple[Callable[[Any], Any], Callable[..., Completion], dict[str, Any]]:
        """(send on a client, parse the response, note) for ``request`` on this backend's API."""
        if self.profile.api == "responses":
            kwargs, note = responses_kwargs(request, self.model, profile=self.profile,
                                            reasoning_effort=self.reasoning_effort)
            return (lambda client: _parsed(client.responses.with_raw_response.create(**kwargs))), \
                completion_from_responses, note
        kwargs, note = chat_kwargs(request, self.model, profile=self.profile, regex_mode=self.regex_mode,
                                   reasoning_effort=self.reasoning_effort, send_seed=self.send_seed)
        return (lambda client: _parsed(client.chat.completions.with_raw_response.create(**kwargs))), \
            completion_from_response, note

    def complete(self, request: Request) -> Completion:
        """One request; raises :class:`ServiceRejected` when the service refuses it as invalid. A request whose
        carried reasoning items the service cannot verify (made under another organisation's key, e.g. a cache
        replayed elsewhere) is sent once more without them; ``meta["reasoning_items_dropped"]`` gives the
        service's message, so the answer says it was made without the model's earlier reasoning."""
        try:
            return self._complete_once(request)
        except ServiceRejected as rejection:
            if not (_UNVERIFIABLE.search(rejection.server_message) and _carries_reasoning(request)):
                raise
            refused = f"HTTP {rejection.status_code}: {rejection.server_message}"
        completion = self._complete_once(without_reasoning_items(request))
        completion.meta["reasoning_items_dropped"] = refused
        return completion

    def _complete_once(self, request: Request) -> Completion:
        send, parse, note = self._call(request)
        o = self._openai
        errors: list[str] = []
        urls_tried: list[str] = []
        first = time.perf_counter()
        for attempt in range(self.retries + 1):
            client, url = self._next_client()
            urls_tried.append(url)
            with self._lock:
                self.attempts += 1
            retry_after = None
            try:
                with self._slots, bounded(self.timeout):
                    start = time.perf_counter()
                    response = send(client)
            except o.APITimeoutError as exc:
                raise BackendError(f"{url} did not answer within {self.timeout:g} s (timeout; not retried: pass "
                                   "a larger timeout for slow models)") from exc
            except o.APIStatusError as exc:
                if exc.status_code in REJECTED_STATUS:
                    raise ServiceRejected(url, exc.status_code, self._server_message(exc)) from exc
                errors.append(f"{url}: HTTP {exc.status_code}: {self._server_message(exc)}"[:300])
                if exc.status_code not in RETRYABLE_STATUS:
                    raise BackendError(f"request to {url} failed (not retryable): {errors[-1]}") from exc
                retry_after = self._retry_after(exc)
            except o.APIConnectionError as exc:
                errors.append(f"{url}: {self._describe(exc)}")
            except (o.APIResponseValidationError, json.JSONDecodeError) as exc:  # the body is not JSON at all
                errors.append(self._malformed(url, exc))
            else:
                latency = time.perf_counter() - start
                meta = dict(note, attempts=attempt + 1, base_url=url)
                if attempt:
                    meta["wall_s"] = round(time.perf_counter() - first, 3)
                try:
                    completion = parse(response, latency, meta)
                except (AttributeError, TypeError, ValueError, KeyError, IndexError) as exc:  # JSON of another shape
                    errors.append(self._malformed(url, exc))
                else:
                    if completion.meta.get("served_model"):
                        self.served_model = completion.meta["served_model"]
                    return cap_stored(completion, self.max_stored_chars)
            if attempt < self.retries and self._stop.wait(self._delay(attempt, retry_after)):
                raise BackendError("stopped (interrupted)")
        raise BackendError(
            f"endpoint {', '.join(sorted(set(urls_tried)))} unreachable or failing after "
            f"{self.retries + 1} attempts; last error: {errors[-1] if errors else 'none'}"
        )

    def _malformed(self, url: str, exc: Exception) -> str:
        """The server's fault, said as such: an HTTP 200 whose body is not an answer of this API."""
        return f"{url}: HTTP 200 but the body is not a well-formed answer ({self._describe(exc)})"[:300]

    def _complete_or_rejected(self, request: Request) -> Completion:
        try:
            return self.complete(request)
        except ServiceRejected as rejection:
            return Completion(text="", meta={"rejected": f"HTTP {rejection.status_code}: {rejection.server_message}",
                                             "rejected_status": rejection.status_code, "base_url": rejection.url,
                                             "api": self.profile.api})

    def complete_batch(self, requests: Sequence[Request]) -> list[Completion]:
        """Concurrent requests (at most ``max_concurrency`` in flight), results in request order. A request
        the service rejects comes back with ``meta["rejected"]`` (the service's message), not raised. A
        request that fails stops the batch: :class:`PartialBatchError` carries every completion that finished."""
        self._stop.clear()
        outcomes = run_concurrently(self._complete_or_rejected, list(requests), self.max_concurrency, self._stop)
        failures = [o for o in outcomes if isinstance(o, BaseException)]
        if failures:
            raise PartialBatchError(failures[0], [o if isinstance(o, Completion) else None for o in outcomes]) \
                from failures[0]
        return outcomes

    def close(self) -> None:
        self._stop.set()
        for client in self._clients:
            try:
                client.close()
            except Exception:  # noqa: BLE001
                pass

