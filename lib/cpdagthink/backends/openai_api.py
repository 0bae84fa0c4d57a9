"""OpenAI-compatible chat completions: the OpenAI API, a vLLM server, or ``llama_cpp.server``.

* Tools are sent as given; ``tool_choice`` ``"auto"``/``"required"``/``"none"`` pass through and any other
  string is a forced call ``{"type": "function", "function": {"name": ...}}``.
* Constraints: with ``regex_mode="vllm"`` the regex goes in ``extra_body={"structured_outputs": {"regex":
  ...}}``; when it constrains a tool's arguments it is wrapped in the Hermes envelope so the server's tool
  parser (``--enable-auto-tool-choice --tool-call-parser hermes``) still sees a call. vLLM cannot combine a
  *named* tool choice with ``structured_outputs``, so a forced tool choice is sent as ``"auto"`` there (the
  regex forces the call anyway; ``meta["tool_choice_sent"]`` records it). With ``regex_mode="none"`` a
  constraint is enforced only where the API can: a forced tool call (the server constrains the arguments
  to the tool schema) or, without tools, ``response_format`` json_schema when ``Constraint.json_schema`` is
  set; ``meta["constraint"]`` says which, or ``"not enforced"``.
* The API key is read from the environment variable ``api_key_env`` at construction and handed to the
  client only; it never appears in :meth:`identity`, completions, or errors.
* Retries: 408/409/429/5xx, timeouts and connection errors, with capped exponential backoff and seeded
  jitter (``Retry-After`` honoured up to the cap); other 4xx fail at once. Several ``base_url`` values are
  served round-robin, one step per attempt, so a retry goes to the next server.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Sequence

from .base import Backend, BackendError, Completion, Request, RequestRejected, ToolCall
from .toolcalls import chat_messages, envelope_regex, parse_tool_calls, split_reasoning

INSTALL_HINT = "pip install -e '.[api]'"
REGEX_MODES = ("none", "vllm")
# The request itself is at fault (e.g. longer than the context): record it on its instance, go on.
REJECTED_STATUS = {400, 413, 422}
RETRYABLE_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}


def tool_choice_param(choice: str | None) -> Any:
    if choice is None or choice in ("auto", "required", "none"):
        return choice
    return {"type": "function", "function": {"name": choice}}


def chat_kwargs(
    request: Request,
    model: str,
    *,
    regex_mode: str = "none",
    token_param: str = "max_tokens",
    thinking_param: str = "none",
    send_seed: bool = True,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The ``chat.completions.create`` keyword arguments for ``request`` and a note of what was enforced.

    Pure (no network): tests check the exact payload.
    """
    if regex_mode not in REGEX_MODES:
        raise ValueError(f"regex_mode must be one of {REGEX_MODES}, got {regex_mode!r}")
    kwargs: dict[str, Any] = {
        "model": model,
        "messages": chat_messages(request.messages, arguments_as="str"),
        "temperature": request.temperature,
        token_param: request.max_tokens,
    }
    if send_seed:
        kwargs["seed"] = request.seed
    note: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    choice = request.tool_choice if request.tools else None
    if request.tools:
        kwargs["tools"] = [dict(t) for t in request.tools]
    c = request.constraint
    if c is not None:
        if regex_mode == "vllm":
            if c.tool and request.tools:
                regex = envelope_regex(c.tool, c.regex)
                if choice not in (None, "auto"):
                    note["tool_choice_requested"] = choice
                    choice = "auto"  # vLLM: a named tool choice cannot be combined with structured_outputs
                note["constraint"] = "regex (hermes envelope)"
            else:
                regex = c.regex
                note["constraint"] = "regex"
            extra["structured_outputs"] = {"regex": regex}
        elif c.tool and request.tools and choice not in (None, "auto", "none"):
            note["constraint"] = "tool schema (forced tool call)"
        elif c.json_schema is not None and not request.tools:
            kwargs["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": c.tool or "output", "schema": c.json_schema, "strict": True},
            }
            note["constraint"] = "response_format json_schema"
        else:
            note["constraint"] = "not enforced"
    if choice is not None:
        kwargs["tool_choice"] = tool_choice_param(choice)
        note["tool_choice_sent"] = choice
    if thinking_param == "chat_template_kwargs":
        extra["chat_template_kwargs"] = {"enable_thinking": bool(request.thinking)}
    if extra:
        kwargs["extra_body"] = extra
    return kwargs, note


def _field(obj: Any, name: str) -> Any:
    value = getattr(obj, name, None)
    if value is None:
        extra = getattr(obj, "model_extra", None) or {}
        value = extra.get(name)
    return value


def completion_from_response(response: Any, latency_s: float, meta: dict[str, Any]) -> Completion:
    """A :class:`Completion` from an OpenAI ``ChatCompletion`` object."""
    if not getattr(response, "choices", None):
        raise BackendError(f"the server returned no choices: {response!r}"[:500])
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
    if not calls and "<tool_call>" in content:
        text, calls = parse_tool_calls(content)  # a server without a tool parser returns the raw envelope
    usage = getattr(response, "usage", None)
    try:
        raw = json.dumps(message.model_dump(exclude_none=True), ensure_ascii=False)
    except Exception:  # noqa: BLE001
        raw = content
    meta = dict(meta)
    if getattr(response, "model", None):
        meta["served_model"] = response.model
    if getattr(response, "system_fingerprint", None):
        meta["system_fingerprint"] = response.system_fingerprint
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


class OpenAIBackend(Backend):
    """Chat completions over HTTP. ``base_url``: None (api.openai.com), one URL, or a list (round-robin)."""

    name = "openai"
    # The server decides what a thinking switch does; requests carry it and the profile maps it.
    thinking_supported = True
    preferred_chunk_size = 64

    def __init__(
        self,
        model: str,
        base_url: str | Sequence[str] | None = None,
        *,
        api_key_env: str = "OPENAI_API_KEY",
        max_concurrency: int = 5,
        max_retries: int = 6,
        timeout: float = 120.0,
        backoff_base: float = 1.0,
        backoff_max: float = 30.0,
        jitter_seed: int = 0,
        regex_mode: str = "none",
        token_param: str = "max_tokens",
        thinking_param: str | None = None,
        send_seed: bool = True,
    ):
        try:
            import openai
        except ImportError as exc:
            raise BackendError(f"the openai client is not installed; install with: {INSTALL_HINT}") from exc
        if regex_mode not in REGEX_MODES:
            raise ValueError(f"regex_mode must be one of {REGEX_MODES}, got {regex_mode!r}")
        self.model = model
        if base_url is None:
            urls: list[str | None] = [None]
        elif isinstance(base_url, str):
            urls = [base_url]
        else:
            urls = list(base_url)
            if not urls:
                raise ValueError("base_url list is empty")
        self.base_urls = urls
        self.api_key_env = api_key_env
        key = os.environ.get(api_key_env)
        if not key:
            if urls == [None]:
                raise BackendError(f"the OpenAI API needs a key in the environment variable {api_key_env}")
            key = "EMPTY"  # local OpenAI-compatible servers accept any key
        self._clients = [
            openai.OpenAI(api_key=key, base_url=url, max_retries=0, timeout=timeout) for url in urls
        ]
        del key
        self._openai = openai
        self.max_concurrency = max(1, int(max_concurrency))
        self.max_retries = max(0, int(max_retries))
        self.timeout = timeout
        self.backoff_base = backoff_base
        self.backoff_max = backoff_max
        self.regex_mode = regex_mode
        self.token_param = token_param
        self.thinking_param = thinking_param or ("chat_template_kwargs" if regex_mode == "vllm" else "none")
        self.send_seed = send_seed
        self._rr = itertools.cycle(range(len(urls)))
        self._lock = threading.Lock()
        self._rng = random.Random(jitter_seed)
        self.served_model: str | None = None
        self.attempts = 0  # total HTTP attempts made (for tests and cost accounting)

    def identity(self) -> dict[str, Any]:
        ident: dict[str, Any] = {
            "backend": "openai",
            "model": self.model,
            "base_urls": [u or "https://api.openai.com/v1" for u in self.base_urls],
            "regex_mode": self.regex_mode,
            "thinking_param": self.thinking_param,
        }
        # The snapshot a server reports is recorded per call (Completion.meta["served_model"]), not here:
        # identity() keys the cache and must not change once responses arrive.
        return ident

    def _next_client(self) -> tuple[Any, str]:
        with self._lock:
            i = next(self._rr)
        return self._clients[i], str(self._clients[i].base_url)

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        with self._lock:
            jitter = self._rng.random()
        delay = min(self.backoff_max, self.backoff_base * (2**attempt)) * (0.5 + 0.5 * jitter)
        if retry_after is not None:
            delay = max(delay, min(retry_after, self.backoff_max))
        return delay

    def _retryable(self, exc: Exception) -> tuple[bool, float | None]:
        o = self._openai
        if isinstance(exc, (o.APITimeoutError, o.APIConnectionError)):
            return True, None
        if isinstance(exc, o.APIStatusError):
            retry_after = None
            try:
                header = exc.response.headers.get("retry-after")
                retry_after = float(header) if header is not None else None
            except (AttributeError, ValueError):
                retry_after = None
            return exc.status_code in RETRYABLE_STATUS, retry_after
        return False, None

    def complete(self, request: Request) -> Completion:
        kwargs, note = chat_kwargs(
            request,
            self.model,
            regex_mode=self.regex_mode,
            token_param=self.token_param,
            thinking_param=self.thinking_param,
            send_seed=self.send_seed,
        )
        errors: list[str] = []
        urls_tried: list[str] = []
        first = time.perf_counter()
        for attempt in range(self.max_retries + 1):
            client, url = self._next_client()
            urls_tried.append(url)
            with self._lock:
                self.attempts += 1
            start = time.perf_counter()
            try:
                response = client.chat.completions.create(**kwargs)
            except Exception as exc:  # noqa: BLE001 - classified below
                retry, retry_after = self._retryable(exc)
                errors.append(f"{url}: {type(exc).__name__}: {exc}"[:300])
                if not retry:
                    status = getattr(exc, "status_code", None)
                    error = RequestRejected if status in REJECTED_STATUS else BackendError
                    raise error(f"request to {url} failed (not retryable): {errors[-1]}") from exc
                if attempt < self.max_retries:
                    time.sleep(self._delay(attempt, retry_after))
                continue
            latency = time.perf_counter() - start
            meta = dict(note)
            meta["attempts"] = attempt + 1
            meta["base_url"] = url
            if attempt:
                meta["wall_s"] = round(time.perf_counter() - first, 3)
            completion = completion_from_response(response, latency, meta)
            if completion.meta.get("served_model"):
                self.served_model = completion.meta["served_model"]
            return completion
        raise BackendError(
            f"endpoint {', '.join(sorted(set(urls_tried)))} unreachable or failing after "
            f"{self.max_retries + 1} attempts; last error: {errors[-1] if errors else 'none'}"
        )

    def complete_batch(self, requests: Sequence[Request]) -> list[Completion]:
        """Concurrent requests (at most ``max_concurrency`` in flight), results in request order."""
        requests = list(requests)
        if len(requests) <= 1:
            return [self.complete(r) for r in requests]
        with ThreadPoolExecutor(max_workers=min(self.max_concurrency, len(requests))) as pool:
            return list(pool.map(self.complete, requests))

    def close(self) -> None:
        for client in self._clients:
            try:
                client.close()
            except Exception:  # noqa: BLE001
                pass
