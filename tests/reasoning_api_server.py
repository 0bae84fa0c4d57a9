"""A local chat-completions server that enforces the documented rules of OpenAI's reasoning models.

Rules (the error JSON and wording are the API's own, as its users report them verbatim):

* ``max_tokens`` -> HTTP 400 ``Unsupported parameter: 'max_tokens' is not supported with this model. Use
  'max_completion_tokens' instead.`` (``param: max_tokens``, ``code: unsupported_parameter``);
* ``temperature`` or ``top_p`` other than 1 -> HTTP 400 ``Unsupported value: 'temperature' does not support 0
  with this model. Only the default (1) value is supported.`` (``code: unsupported_value``);
* a ``reasoning_effort`` the model does not take -> HTTP 400 (GPT-5 before 5.1: minimal/low/medium/high).

Answers come from the reference backend (the exact oracle), so a pipeline run through this server is
checked end to end: turn 1 with tools answers with a real ``record_causal_analysis`` tool call, other turns
with text. ``usage.completion_tokens_details.reasoning_tokens`` counts simulated reasoning that depends on
the effort (``minimal`` reasons least). ``latency_s`` is the time every answer takes, its computation included (for throughput benchmarks).
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from cpdagthink.backends.base import Request
from cpdagthink.backends.reference import ReferenceBackend

GPT5_EFFORTS = ("minimal", "low", "medium", "high")  # gpt-5, -mini, -nano: default medium
GPT51_EFFORTS = ("none", "low", "medium", "high", "xhigh")  # gpt-5.1 and later: default none
REASONING_TOKENS = {"none": 0, "minimal": 8, "low": 128, "medium": 512, "high": 2048, "xhigh": 4096}


def api_error(message: str, param: str, code: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": "invalid_request_error", "param": param, "code": code}}


def check_rules(body: dict[str, Any], efforts: tuple[str, ...]) -> dict[str, Any] | None:
    """The error the reasoning-model API returns for ``body``, or None if it accepts it."""
    if "max_tokens" in body:
        return api_error("Unsupported parameter: 'max_tokens' is not supported with this model. "
                         "Use 'max_completion_tokens' instead.", "max_tokens", "unsupported_parameter")
    for name in ("temperature", "top_p"):
        if name in body and body[name] != 1:
            return api_error(f"Unsupported value: '{name}' does not support {json.dumps(body[name])} with this "
                             "model. Only the default (1) value is supported.", name, "unsupported_value")
    effort = body.get("reasoning_effort")
    if effort is not None and effort not in efforts:
        allowed = ", ".join(f"'{e}'" for e in efforts)
        return api_error(f"Unsupported value: 'reasoning_effort' does not support {json.dumps(effort)} with this "
                         f"model. Supported values are: {allowed}.", "reasoning_effort", "unsupported_value")
    return None


def send_json(handler: BaseHTTPRequestHandler, code: int, payload: dict[str, Any]) -> None:
    """Write one JSON response (shared by the test servers)."""
    data = json.dumps(payload).encode()
    handler.send_response(code)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)


def _tokens(text: str) -> int:
    return max(1, len(text) // 4)


class ReasoningAPIServer:
    """The server on 127.0.0.1 (a free port) in a daemon thread; ``url`` ends in ``/v1``.
    ``requests`` keeps every request body received, ``peak_in_flight`` the most served at once; use as a
    context manager or call :meth:`close`."""

    def __init__(self, *, efforts: tuple[str, ...] = GPT5_EFFORTS, latency_s: float = 0.0):
        self.efforts = efforts
        self.default_effort = efforts[0] if efforts == GPT51_EFFORTS else "medium"
        self.latency_s = latency_s
        self.requests: list[dict[str, Any]] = []
        self.rejected = 0
        self.in_flight = self.peak_in_flight = 0
        self._lock = threading.Lock()
        self._reference = ReferenceBackend()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as the real API
            # headers and body go out in two writes: without TCP_NODELAY, Nagle's algorithm and the client's
            # delayed ACK hold the body back about 40 ms on every call
            disable_nagle_algorithm = True

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                send_json(self, *server.answer(self.path, body))

        self._http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._http.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._http.server_address[1]}/v1"
        self._thread = threading.Thread(target=self._http.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()

    def answer(self, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        with self._lock:
            self.in_flight += 1
            self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
        try:
            return self._answer(path, body)
        finally:
            with self._lock:
                self.in_flight -= 1

    def _answer(self, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        received = time.perf_counter()
        with self._lock:
            self.requests.append(body)
        if not path.endswith("/chat/completions"):
            return 404, api_error(f"Invalid URL (POST {path})", "url", "unknown_url")
        error = check_rules(body, self.efforts)
        if error is not None:
            with self._lock:
                self.rejected += 1
            return 400, error
        request = Request(messages=tuple(body["messages"]), tools=tuple(body.get("tools") or ()),
                          tool_choice=None if body.get("tool_choice") == "none" else "auto")
        completion = self._reference.complete(request)
        reasoning = REASONING_TOKENS[body.get("reasoning_effort") or self.default_effort]
        message: dict[str, Any] = {"role": "assistant", "content": completion.text or None}
        if completion.tool_calls and body.get("tool_choice") != "none":
            message["tool_calls"] = [{"id": f"call_{i}", "type": "function",
                                      "function": {"name": c.name, "arguments": c.arguments}}
                                     for i, c in enumerate(completion.tool_calls)]
        visible = _tokens(completion.text + "".join(c.arguments for c in completion.tool_calls))
        budget = body.get("max_completion_tokens")
        finish = "tool_calls" if "tool_calls" in message else "stop"
        if budget is not None and reasoning + visible > budget:  # the budget covers reasoning too
            message, finish, visible = {"role": "assistant", "content": ""}, "length", max(0, budget - reasoning)
            reasoning = min(reasoning, budget)
        prompt = _tokens(json.dumps(body["messages"]))
        time.sleep(max(0.0, received + self.latency_s - time.perf_counter()))  # a fixed latency per call
        return 200, {
            "id": f"chatcmpl-{len(self.requests)}", "object": "chat.completion", "created": int(time.time()),
            "model": f"{body['model']}-2025-08-07", "system_fingerprint": None,
            "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
            "usage": {"prompt_tokens": prompt, "completion_tokens": reasoning + visible,
                      "total_tokens": prompt + reasoning + visible,
                      "completion_tokens_details": {"reasoning_tokens": reasoning, "audio_tokens": 0,
                                                    "accepted_prediction_tokens": 0,
                                                    "rejected_prediction_tokens": 0},
                      "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0}},
        }

    def close(self) -> None:
        self._http.shutdown()
        self._http.server_close()

    def __enter__(self) -> "ReasoningAPIServer":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
