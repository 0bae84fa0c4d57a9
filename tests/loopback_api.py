"""A loopback OpenAI-compatible chat-completions server for the runner's scale tests and benchmarks.

It answers ``POST /v1/chat/completions`` on 127.0.0.1 only, with planted answers (by default the reference
agent's, the exact oracle's: turn 1 with tools answers with its ``record_causal_analysis`` call, other turns in
text), after a latency drawn per call (:class:`Latency`: constant, or lognormal for a heavy tail), and injects
faults (:class:`Faults`) into a seeded share of calls, each failing a bounded number of times:

* ``429``: HTTP 429 with ``Retry-After``; ``500`` and ``503``: HTTP 5xx with an error body;
* ``cut``: HTTP 200 whose body stops half way and the connection closes (``Content-Length`` not reached);
* ``reset``: the connection reset (RST) before any answer;
* ``hang``: no answer for ``hang_s`` seconds (past the client's timeout), then the answer, too late;
* ``quota`` (HTTP 429 ``insufficient_quota``) and ``auth`` (HTTP 401): what no retry mends.

Whether a call fails is decided by its body's digest and the share ``rate``, so a rerun meets the same calls
failing; a call fails at most ``times`` times (its later attempts are served), and at most ``limit`` faults in
all. Every answered or failed attempt is logged (:class:`Served`: the instance it belongs to, its turn, when it
arrived and left, its latency and fault) so a test can see which requests overlapped. Nothing here blocks for
longer than ``hang_s``: :meth:`LoopbackAPI.close` wakes every sleeping handler.

For benchmarks, :func:`serve_in_process` runs the server in a process of its own (its work then does not
compete with the runner for the GIL) and hands back its URL and, at the end, its log.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import multiprocessing
import socket
import struct
import threading
import time
from dataclasses import dataclass, field
from statistics import NormalDist
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Iterator

from cpdagthink.backends.reference import ReferenceBackend
from cpdagthink.method.chat import Completion, Request
from loopback_server import LoopbackServer

KINDS = ("429", "500", "503", "cut", "reset", "hang")  # the transient faults: a retry mends each
FATAL_KINDS = ("quota", "auth")  # no retry mends these
ERRORS = {
    "429": (429, "Rate limit reached for requests", "rate_limit_exceeded"),
    "500": (500, "The server had an error while processing your request.", "server_error"),
    "503": (503, "The engine is currently overloaded, please try again later.", "overloaded"),
    "quota": (429, "You exceeded your current quota, please check your plan and billing details.",
              "insufficient_quota"),
    "auth": (401, "Incorrect API key provided.", "invalid_api_key"),
}


def _unit(*parts: Any) -> float:
    """A number in [0, 1) fixed by ``parts`` (a call's digest and what is drawn for it)."""
    digest = hashlib.sha256(repr(parts).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


@dataclass(frozen=True)
class Latency:
    """Seconds a call takes: ``median`` for every call (``sigma`` 0), or lognormal around ``median`` with
    ``sigma`` (a heavy tail: sigma 1 puts one call in a hundred past ten times the median), drawn per call
    from its digest and ``seed`` (so every run of the same calls meets the same latencies); ``pick`` plants a
    latency on the requests it chooses."""

    median: float = 0.0
    sigma: float = 0.0
    seed: int = 0
    pick: Callable[[dict[str, Any]], float | None] | None = None  # a request body to its latency (None: drawn)

    def of(self, digest: str, attempt: int, body: dict[str, Any] | None = None) -> float:
        picked = self.pick(body) if self.pick is not None and body is not None else None
        if picked is not None:
            return picked
        if not self.sigma or not self.median:
            return self.median
        u = min(max(_unit(self.seed, digest, attempt, "latency"), 1e-12), 1 - 1e-12)
        return self.median * math.exp(self.sigma * _normal_quantile(u))

    @property
    def mean(self) -> float:
        """The mean latency (lognormal: median x exp(sigma^2 / 2))."""
        return self.median * math.exp(self.sigma**2 / 2)


def _normal_quantile(u: float) -> float:
    """The standard normal quantile of ``u``."""
    return NormalDist().inv_cdf(u)


@dataclass(frozen=True)
class Faults:
    """Which calls fail, and how: a share ``rate`` of distinct calls (by body digest and ``seed``), each
    failing its first ``times`` attempts with one of ``kinds`` (drawn per call), at most ``limit`` faults in
    all (None: no bound). ``pick`` (a request body to a kind or None) chooses instead, for targeted tests.
    ``retry_after`` is the 429's header; ``hang_s`` how long a hanging call holds its answer back."""

    rate: float = 0.0
    kinds: tuple[str, ...] = KINDS
    times: int = 1
    limit: int | None = None
    seed: int = 0
    retry_after: float = 1.0
    hang_s: float = 30.0
    pick: Callable[[dict[str, Any]], str | None] | None = None

    def __post_init__(self) -> None:
        unknown = set(self.kinds) - set(KINDS) - set(FATAL_KINDS)
        if unknown:
            raise ValueError(f"unknown fault kinds {sorted(unknown)}; choose from {KINDS + FATAL_KINDS}")

    def kind_for(self, digest: str, body: dict[str, Any]) -> str | None:
        """The fault this call is planted with (before counting its attempts), or None."""
        if self.pick is not None:
            return self.pick(body)
        if not self.kinds or _unit(self.seed, digest, "fails") >= self.rate:
            return None
        return self.kinds[int(_unit(self.seed, digest, "kind") * len(self.kinds))]


@dataclass
class Served:
    """One attempt the server saw: the instance (digest of its first user message), its turn (1 + the
    assistant messages before it), when it arrived and left (``time.monotonic``), the latency drawn, and the
    fault injected (None: answered)."""

    instance: str
    turn: int
    arrived: float
    left: float = 0.0
    latency_s: float = 0.0
    fault: str | None = None


def instance_key(messages: list[dict[str, Any]]) -> str:
    """Which instance a request belongs to: the digest of its first user message (every turn repeats it)."""
    first = next((m.get("content") or "" for m in messages if m.get("role") == "user"), "")
    return hashlib.sha256(str(first).encode()).hexdigest()[:16]


def turn_of(body: dict[str, Any]) -> int:
    """Which turn a request is: 1 + the assistant messages before it."""
    return 1 + sum(m.get("role") == "assistant" for m in body.get("messages") or [])


def key_of(body: dict[str, Any]) -> str:
    """The instance a request body belongs to (:func:`instance_key`)."""
    return instance_key(body.get("messages") or [])


def key_of_instance(instance: Any, condition: str = "structured") -> str:
    """The key the server logs an instance's requests under (:func:`instance_key`) when ``condition`` poses it."""
    from cpdagthink.method.conditions import CONDITIONS, first_request
    from cpdagthink.method.decoding import Decoding

    return instance_key(list(first_request(CONDITIONS[condition], instance, Decoding()).messages))


def backend_on(server: Any, **options: Any) -> Any:
    """The OpenAI backend on ``server`` (anything with a ``url``), retrying at once (a test waits for nothing),
    at most 4 requests in flight, 5 s an attempt; ``options`` override."""
    from cpdagthink.backends import make_backend

    settings = {"max_concurrency": 4, "backoff_base": 0.01, "backoff_max": 0.05, "timeout": 5}
    return make_backend("openai", model="gpt-4.1-mini", base_url=server.url, **{**settings, **options})


def reference_answer(body: dict[str, Any]) -> Completion:
    """The planted answer by default: the reference agent's (a tool call where tools are offered and none was
    called yet, else a text answer ending ``Answer: YES`` or ``Answer: NO``)."""
    tools = body.get("tools") or []
    request = Request(messages=tuple(body["messages"]), tools=tuple(tools) if body.get("tool_choice") != "none" else ())
    return _REFERENCE.complete(request)


_REFERENCE = ReferenceBackend()


def chat_payload(body: dict[str, Any], completion: Completion, number: int) -> dict[str, Any]:
    """A chat completion's JSON carrying ``completion``."""
    message: dict[str, Any] = {"role": "assistant", "content": completion.text or None}
    if completion.tool_calls:
        message["tool_calls"] = [{"id": f"call_{i}", "type": "function",
                                  "function": {"name": c.name, "arguments": c.arguments}}
                                 for i, c in enumerate(completion.tool_calls)]
    prompt = max(1, len(json.dumps(body["messages"])) // 4)
    visible = max(1, len(completion.text + "".join(c.arguments for c in completion.tool_calls)) // 4)
    return {"id": f"chatcmpl-{number}", "object": "chat.completion", "created": int(time.time()),
            "model": body["model"], "system_fingerprint": None,
            "choices": [{"index": 0, "message": message, "logprobs": None,
                         "finish_reason": "tool_calls" if completion.tool_calls else "stop"}],
            "usage": {"prompt_tokens": prompt, "completion_tokens": visible, "total_tokens": prompt + visible}}


def _error(kind: str) -> tuple[int, bytes]:
    code, message, name = ERRORS[kind]
    return code, json.dumps({"error": {"message": message, "type": "requests", "param": None, "code": name}}).encode()


class _Quiet(ThreadingHTTPServer):
    """A server that says nothing of a client gone mid-connection (a killed run, a timed-out call), with room
    for the hundreds of connections a benchmark opens at once (its listen backlog: set before the socket
    listens, so on the class)."""

    request_queue_size = 1024

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass


class LoopbackAPI(LoopbackServer):
    """The server on 127.0.0.1 (a free port) in a daemon thread; ``url`` ends in ``/v1``. ``log`` holds every
    attempt seen (:class:`Served`), ``peak_in_flight`` the most attempts held at once. Use as a context manager
    or call :meth:`close`."""

    server_class = _Quiet

    def __init__(self, *, latency: Latency = Latency(), faults: Faults = Faults(),
                 answer: Callable[[dict[str, Any]], Completion] = reference_answer):
        self.latency, self.faults, self.answer = latency, faults, answer
        self.log: list[Served] = []
        self.in_flight = self.peak_in_flight = 0
        self._attempts: dict[str, int] = {}
        self._faults_left = faults.limit
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self.start(self._handler())

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as the real API
            disable_nagle_algorithm = True  # headers and body in two writes: no 40 ms delayed-ACK wait

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers["Content-Length"]))
                server.serve(self, raw)

        return Handler

    def _plan(self, raw: bytes, body: dict[str, Any]) -> tuple[Served, str | None]:
        """The attempt's log entry and its fault (None: answer it)."""
        digest = hashlib.sha256(raw).hexdigest()
        messages = body.get("messages") or []
        turn = turn_of(body)
        with self._lock:
            attempt = self._attempts.get(digest, 0)
            self._attempts[digest] = attempt + 1
            kind = self.faults.kind_for(digest, body) if attempt < self.faults.times else None
            if kind is not None and self._faults_left is not None:
                kind = kind if self._faults_left > 0 else None
                self._faults_left -= kind is not None
            entry = Served(instance_key(messages), turn, time.monotonic(), latency_s=self.latency.of(digest, attempt, body),
                           fault=kind)
            self.log.append(entry)
            self.in_flight += 1
            self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
        return entry, kind

    def serve(self, handler: BaseHTTPRequestHandler, raw: bytes) -> None:
        """Answer one attempt (or fail it as planted) after its latency."""
        body = json.loads(raw)
        entry, kind = self._plan(raw, body)
        try:
            if not handler.path.endswith("/chat/completions"):
                entry.fault = "404"
                return _send(handler, 404, b'{"error": {"message": "unknown URL", "code": "unknown_url"}}')
            if kind == "reset":
                return _reset(handler)
            self._closing.wait(self.faults.hang_s if kind == "hang" else entry.latency_s)
            if kind in ERRORS:
                code, data = _error(kind)
                return _send(handler, code, data, retry_after=self.faults.retry_after if kind == "429" else None)
            data = json.dumps(chat_payload(body, self.answer(body), len(self.log))).encode()
            if kind == "cut":
                return _send(handler, 200, data, cut=True)
            _send(handler, 200, data)
        except OSError:  # the client gave up (a timeout): nothing to answer
            pass
        finally:
            with self._lock:
                entry.left = time.monotonic()
                self.in_flight -= 1

    def answered(self) -> list[Served]:
        """The attempts answered in full (their answer written out)."""
        with self._lock:
            return [s for s in self.log if s.fault is None and s.left]

    def close(self) -> None:
        self._closing.set()
        super().close()


def _send(handler: BaseHTTPRequestHandler, code: int, data: bytes, *, retry_after: float | None = None,
          cut: bool = False) -> None:
    handler.send_response(code)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(data)))
    if retry_after is not None:
        handler.send_header("Retry-After", f"{retry_after:g}")
    handler.end_headers()
    handler.wfile.write(data[: len(data) // 2] if cut else data)
    if cut:  # the body stops short of its Content-Length and the connection closes
        handler.wfile.flush()
        handler.close_connection = True
        handler.connection.shutdown(socket.SHUT_RDWR)


def _reset(handler: BaseHTTPRequestHandler) -> None:
    """Close the connection with a reset (SO_LINGER 0: RST, not FIN) and answer nothing."""
    handler.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    handler.close_connection = True
    handler.connection.close()


@dataclass
class Remote:
    """A :class:`LoopbackAPI` in a process of its own: ``url``, and :meth:`log` its attempts so far."""

    url: str
    _pipe: Any = field(repr=False)

    def log(self) -> list[Served]:
        """Every attempt the server saw so far."""
        self._pipe.send("log")
        return self._pipe.recv()

    def answered(self) -> int:
        """How many attempts it has answered in full so far."""
        self._pipe.send("answered")
        return self._pipe.recv()


def _serve(pipe: Any, options: dict[str, Any]) -> None:
    with LoopbackAPI(**options) as server:
        pipe.send(server.url)
        while (asked := pipe.recv()) != "stop":
            if asked == "log":
                with server._lock:
                    pipe.send(list(server.log))
            elif asked == "answered":
                pipe.send(len(server.answered()))


@contextlib.contextmanager
def serve_in_process(**options: Any) -> Iterator[Remote]:
    """A :class:`LoopbackAPI` (built with ``options``; a ``pick`` must be picklable) in a process of its
    own, stopped when the block ends."""
    ours, theirs = multiprocessing.Pipe()
    process = multiprocessing.get_context("fork").Process(target=_serve, args=(theirs, options), daemon=True)
    process.start()
    try:
        yield Remote(ours.recv(), ours)
    finally:
        with contextlib.suppress(OSError):
            ours.send("stop")
        process.join(timeout=10)
        if process.is_alive():
            process.kill()


__all__ = ["FATAL_KINDS", "KINDS", "Faults", "Latency", "LoopbackAPI", "Remote", "Served", "backend_on",
           "instance_key", "key_of", "key_of_instance", "reference_answer", "serve_in_process", "turn_of"]
