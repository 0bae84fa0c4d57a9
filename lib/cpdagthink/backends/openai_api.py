"""OpenAI-compatible chat completions: the OpenAI API, a vLLM server, or ``llama_cpp.server``.

* Model profiles (:mod:`.profiles`) decide the request's shape: ``max_tokens`` or ``max_completion_tokens``,
  whether temperature/top_p are sent (never to OpenAI reasoning models), and the reasoning control:
  ``reasoning_effort`` (``Request.thinking=False`` sends the family's off value, e.g. ``minimal``/``none``)
  or the chat template's ``enable_thinking`` (vLLM servers). Backend options override each rule.
* Tools are sent as given; ``tool_choice`` ``"auto"``/``"required"``/``"none"`` pass through and any other
  string is a forced call ``{"type": "function", "function": {"name": ...}}``.
* Constraints: with ``regex_mode="vllm"`` the regex goes in ``extra_body={"structured_outputs": {"regex":
  ...}}``; when it constrains a tool's arguments it is wrapped in the family's envelope (Hermes
  ``<tool_call>`` or Mistral ``[TOOL_CALLS]``) so the server's tool parser still sees a call. vLLM cannot
  combine a *named* tool choice with ``structured_outputs``, so a forced tool choice is sent as ``"auto"``
  there (the regex forces the call anyway; ``meta["tool_choice_requested"]`` records it). With
  ``regex_mode="none"`` a constraint is enforced only where the API can: a forced tool call or, without
  tools, ``response_format`` json_schema; ``meta["constraint"]`` says which, or ``"not enforced"``.
* Secrets: the API key is read from the environment variable ``api_key_env`` (or the password of a
  ``base_url`` such as ``http://user:KEY@host``) and handed to the client only. URLs are recorded without
  credentials, and error bodies are stored with ``Authorization``/``api-key``/bearer values redacted.
* Failures: 408/409/425/429/5xx and connection errors are retried ``retries`` times with capped exponential
  backoff and seeded jitter (``Retry-After`` honoured up to the cap), each retry on the next ``base_url``. A
  request that times out (``timeout`` seconds) is not retried: a server that did not answer once will not
  answer faster the second time, and a dead endpoint must fail within one ``timeout``. A request the
  service rejects (400/413/422) comes back as a rejected completion carrying the service's own message
  (``meta["rejected"]``); :meth:`OpenAIBackend.complete` raises :class:`ServiceRejected` instead.
* At most ``max_concurrency`` requests are in flight per backend, across concurrent batches too (so a runner
  may overlap batches to keep every slot busy); batches run on daemon threads and Ctrl-C stops waiting at once.
"""

from __future__ import annotations

import itertools
import json
import os
import queue
import random
import re
import threading
import time
from typing import Any, Callable, Sequence
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from ..credentials import with_credentials
from .base import Backend, BackendError, Completion, Provenance, Request, RequestRejected, ToolCall
from .profiles import ModelProfile, check_effort, profile_for, with_overrides
from .toolcalls import chat_messages, envelope_regex, parse_tool_calls, split_reasoning

INSTALL_HINT = "pip install -e '.[api]'"
REGEX_MODES = ("none", "vllm")
# The request itself is at fault (e.g. longer than the context): record it on its instance, go on.
REJECTED_STATUS = {400, 413, 422}
RETRYABLE_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}
OPENAI_URL = "https://api.openai.com/v1"
# Seconds one attempt may take when no ``timeout`` is given: a reasoning model at a paper-scale budget
# legitimately takes minutes; anything else that is silent for a minute is treated as dead.
TIMEOUT_REASONING_S = 600.0
TIMEOUT_CHAT_S = 60.0

_SECRET_QUERY_KEYS = {"key", "api-key", "api_key", "apikey", "token", "access_token", "sig", "signature", "password"}
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
    query = urlencode([(k, "REDACTED" if k.lower() in _SECRET_QUERY_KEYS else v)
                       for k, v in parse_qsl(parts.query, keep_blank_values=True)])
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


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


class ServiceRejected(RequestRejected):
    """The service refused this request as invalid (HTTP 400/413/422). ``server_message`` is the service's
    own error text (redacted), ``status_code`` its HTTP status."""

    def __init__(self, url: str, status_code: int, server_message: str):
        self.url, self.status_code, self.server_message = url, status_code, server_message
        super().__init__(f"{url} rejected the request (HTTP {status_code}): {server_message}")


def tool_choice_param(choice: str | None) -> Any:
    if choice is None or choice in ("auto", "required", "none"):
        return choice
    return {"type": "function", "function": {"name": choice}}


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
    note: dict[str, Any] = {}
    if not_sent:
        note["sampling_not_sent"] = not_sent
    choice = request.tool_choice if request.tools else None
    if request.tools:
        kwargs["tools"] = [dict(t) for t in request.tools]
    c = request.constraint
    if c is not None:
        if vllm_server:
            if c.tool and request.tools:
                regex = envelope_regex(c.tool, c.regex, style=profile.tool_envelope)
                if choice not in (None, "auto"):
                    note["tool_choice_requested"] = choice
                    choice = "auto"  # vLLM: a named tool choice cannot be combined with structured_outputs
                note["constraint"] = f"regex ({profile.tool_envelope} envelope)"
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
    if profile.reasoning_control == "reasoning_effort":
        effort = profile.effort_off if (not request.thinking and profile.effort_off) else reasoning_effort
        if effort is not None:
            kwargs["reasoning_effort"] = effort
            note["reasoning_effort_sent"] = effort
    elif profile.reasoning_control == "chat_template_kwargs":
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


def _reasoning_tokens(usage: Any) -> int | None:
    details = _field(usage, "completion_tokens_details") if usage is not None else None
    if details is None:
        return None
    value = details.get("reasoning_tokens") if isinstance(details, dict) else _field(details, "reasoning_tokens")
    return None if value is None else int(value)


def completion_from_response(response: Any, latency_s: float, meta: dict[str, Any]) -> Completion:
    """A :class:`Completion` from an OpenAI ``ChatCompletion`` object (reasoning token count, when the
    service reports one, in ``meta["reasoning_tokens"]``)."""
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
    if not calls and ("<tool_call>" in content or "[TOOL_CALLS]" in content):
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
    reasoning_tokens = _reasoning_tokens(usage)
    if reasoning_tokens is not None:
        meta["reasoning_tokens"] = reasoning_tokens
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


def run_concurrently(fn: Callable[[Any], Any], items: Sequence[Any], workers: int, stop: threading.Event) -> list[Any]:
    """``[fn(x) for x in items]`` on at most ``workers`` daemon threads, results in order.

    The first exception stops further items from starting and is raised once the running ones end. The
    caller's thread waits in short steps, so Ctrl-C interrupts it at once; it then sets ``stop`` (workers
    check it between attempts) and, the threads being daemons, never waits for a request in flight.
    """
    todo: queue.SimpleQueue[int] = queue.SimpleQueue()
    for i in range(len(items)):
        todo.put(i)
    results: list[Any] = [None] * len(items)
    errors: list[BaseException] = []
    finished = threading.Semaphore(0)

    def work() -> None:
        while not stop.is_set() and not errors:
            try:
                i = todo.get_nowait()
            except queue.Empty:
                break
            try:
                results[i] = fn(items[i])
            except BaseException as error:  # noqa: BLE001 - handed to the caller's thread
                errors.append(error)
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
    if errors:
        raise errors[0]
    return results


class OpenAIBackend(Backend):
    """Chat completions over HTTP. ``base_url``: None (api.openai.com), one URL, or a list (round-robin).

    Options beyond the connection: ``token_param`` (``max_tokens`` | ``max_completion_tokens``),
    ``thinking_param`` (``none`` | ``reasoning_effort`` | ``chat_template_kwargs``), ``reasoning_effort``
    (sent on thinking requests), ``send_sampling`` (send temperature/top_p even where the profile says
    not to), ``timeout`` (seconds per attempt; default by profile: 600 for reasoning families, else 60),
    ``retries``; ``revision`` and ``reasoning_parser`` record what the server was started with.
    """

    name = "openai"
    preferred_chunk_size = 64

    def __init__(
        self,
        model: str,
        base_url: str | Sequence[str] | None = None,
        *,
        api_key_env: str = "OPENAI_API_KEY",
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
        self.model = model
        urls: list[str | None] = [None] if base_url is None else [base_url] if isinstance(base_url, str) else list(base_url)
        urls = [None if u is None else with_credentials(u) for u in urls]  # the key a front door stripped (credentials)
        if not urls:
            raise ValueError("base_url list is empty")
        self.base_urls = [public_url(u) for u in urls]
        self.regex_mode = regex_mode
        if thinking_param is None and regex_mode == "vllm" and profile_for(model).thinking == "unknown":
            thinking_param = "chat_template_kwargs"  # an unknown model on a vLLM server: the template's switch
        self.profile = with_overrides(profile_for(model), token_param=token_param, reasoning_control=thinking_param,
                                      reasoning_parser=reasoning_parser, sampling=send_sampling)
        check_effort(self.profile, reasoning_effort)
        self.reasoning_effort = reasoning_effort
        # The switch changes what is sent only where the family has an off switch; elsewhere the runner
        # sends thinking=False so one request is one cache entry.
        self.thinking_supported = self.profile.off_switch is not None
        self.revision = revision
        self.api_key_env = api_key_env
        passwords = [urlsplit(u).password for u in urls if u]
        key = os.environ.get(api_key_env) or next((p for p in passwords if p), None)
        if not key:
            if urls == [None]:
                raise BackendError(f"the OpenAI API needs a key in the environment variable {api_key_env}")
            key = "EMPTY"  # local OpenAI-compatible servers accept any key
        self._secrets = tuple(s for s in (key, *passwords) if s and s != "EMPTY")
        slow = self.profile.thinking in ("switchable", "always_on")
        self.timeout = float(timeout) if timeout is not None else (TIMEOUT_REASONING_S if slow else TIMEOUT_CHAT_S)
        self._clients = [
            openai.OpenAI(api_key=key, base_url=None if u is None else public_url_for_client(u), max_retries=0,
                          timeout=self.timeout)
            for u in urls
        ]
        del key
        self._openai = openai
        self.max_concurrency = max(1, int(max_concurrency))
        self._slots = threading.BoundedSemaphore(self.max_concurrency)  # requests in flight, all batches
        self.retries = int(retries)
        self.backoff_base = backoff_base
        self.backoff_max = backoff_max
        self.send_seed = send_seed
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
        return Provenance(model_revision=self.revision, api=f"OpenAI-compatible Chat Completions API at {where}")

    def identity(self) -> dict[str, Any]:
        p = self.profile
        # The snapshot a server reports is recorded per call (Completion.meta["served_model"]), not here:
        # identity() keys the cache and must not change once responses arrive.
        return {
            "backend": "openai",
            "model": self.model,
            "revision": self.revision,
            "base_urls": list(self.base_urls),
            "regex_mode": self.regex_mode,
            "profile": {"family": p.family, "token_param": p.token_param, "sampling": p.sampling,
                        "reasoning_control": p.reasoning_control, "effort_off": p.effort_off,
                        "tool_envelope": p.tool_envelope, "reasoning_parser": p.reasoning_parser},
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

    def complete(self, request: Request) -> Completion:
        """One request; raises :class:`ServiceRejected` when the service refuses it as invalid."""
        kwargs, note = chat_kwargs(request, self.model, profile=self.profile, regex_mode=self.regex_mode,
                                   reasoning_effort=self.reasoning_effort, send_seed=self.send_seed)
        o = self._openai
        errors: list[str] = []
        urls_tried: list[str] = []
        first = time.perf_counter()
        for attempt in range(self.retries + 1):
            client, url = self._next_client()
            urls_tried.append(url)
            with self._lock:
                self.attempts += 1
            try:
                with self._slots:
                    start = time.perf_counter()
                    response = client.chat.completions.create(**kwargs)
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
                retry_after = None
            else:
                latency = time.perf_counter() - start
                meta = dict(note, attempts=attempt + 1, base_url=url)
                if attempt:
                    meta["wall_s"] = round(time.perf_counter() - first, 3)
                completion = completion_from_response(response, latency, meta)
                if completion.meta.get("served_model"):
                    self.served_model = completion.meta["served_model"]
                return completion
            if attempt < self.retries and self._stop.wait(self._delay(attempt, retry_after)):
                raise BackendError("stopped (interrupted)")
        raise BackendError(
            f"endpoint {', '.join(sorted(set(urls_tried)))} unreachable or failing after "
            f"{self.retries + 1} attempts; last error: {errors[-1] if errors else 'none'}"
        )

    def _complete_or_rejected(self, request: Request) -> Completion:
        try:
            return self.complete(request)
        except ServiceRejected as rejection:
            return Completion(text="", meta={"rejected": f"HTTP {rejection.status_code}: {rejection.server_message}",
                                             "rejected_status": rejection.status_code, "base_url": rejection.url})

    def complete_batch(self, requests: Sequence[Request]) -> list[Completion]:
        """Concurrent requests (at most ``max_concurrency`` in flight), results in request order. A request
        the service rejects comes back with ``meta["rejected"]`` (the service's message), not raised."""
        self._stop.clear()
        return run_concurrently(self._complete_or_rejected, list(requests), self.max_concurrency, self._stop)

    def close(self) -> None:
        self._stop.set()
        for client in self._clients:
            try:
                client.close()
            except Exception:  # noqa: BLE001
                pass

