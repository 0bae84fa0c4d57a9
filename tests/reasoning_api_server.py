"""A local server for both OpenAI endpoints that enforces the documented rules of OpenAI's reasoning models.

Its rules are its own table (:func:`model_rules`), not the project's profiles, so a profile that is wrong
shows as a refusal. The error JSON and wording are the API's own, as its users report them verbatim:

``/v1/chat/completions``
* ``max_tokens`` -> HTTP 400 ``Unsupported parameter: 'max_tokens' is not supported with this model. Use
  'max_completion_tokens' instead.`` (``param: max_tokens``, ``code: unsupported_parameter``);
* ``temperature`` or ``top_p`` other than 1 -> HTTP 400 ``Unsupported value: 'temperature' does not support 0
  with this model. Only the default (1) value is supported.`` (``code: unsupported_value``);
* a ``reasoning_effort`` the model does not take -> HTTP 400;
* function tools with a reasoning effort, gpt-5.4 and later -> HTTP 400 ``Function tools with
  reasoning_effort are not supported for gpt-5.4 in /v1/chat/completions. Please use /v1/responses
  instead.``; gpt-5.5 and later apply a default effort (medium), so only ``reasoning_effort: "none"`` passes.

``/v1/responses``
* ``max_tokens``/``max_completion_tokens``/``seed``, a sampling parameter on a reasoning model, or an
  unsupported ``reasoning.effort`` (``Unsupported value: 'minimal' is not supported with the 'gpt-5.1' model.
  Supported values are: 'none', 'low', 'medium', and 'high'.``) -> HTTP 400;
* a function tool that is not flat (``tools[0].name`` missing), or ``strict`` with a schema the service cannot
  enforce (an object without ``additionalProperties: false`` or without every property required, a keyword
  outside the strict subset such as ``prefixItems``) -> HTTP 400;
* a reasoning item it did not issue (``The encrypted content for item rs_... could not be verified.``), one
  not followed by the item it preceded, or a ``function_call_output`` without its ``function_call`` -> HTTP 400.
  Reasoning items come back with a summary and, with ``include=["reasoning.encrypted_content"]``, encrypted
  content (the service stores nothing under ``store=False``).

Answers come from the reference backend (the exact oracle), so a pipeline run through this server is
checked end to end: turn 1 with tools answers with a real ``record_causal_analysis`` tool call, other turns
with text. Reasoning token counts depend on the effort (``minimal`` reasons least). ``latency_s`` is the time
every answer takes, its computation included (for throughput benchmarks).

Faults for the hostile-server tests: ``trickle`` (the answer one byte a second), ``wrong_shape`` (HTTP 200
with ``{"choices":[{"index":0}]}``), ``truncated_json`` (HTTP 200 with half the answer's JSON), each on the
requests whose body contains ``fault_when``, at most ``fault_times`` of them; ``typeless`` (Responses API
output items without their ``type``), ``refusal`` (the Responses API answers with a ``refusal`` content part);
``huge`` (every text answer ``huge_chars`` characters longer). ``summary_chars`` makes every reasoning summary
that much longer; ``encrypted=False`` leaves reasoning items without encrypted content even when it is asked
for; :meth:`ReasoningAPIServer.forget_issued` makes the items issued so far unverifiable, as for a cache
replayed under another organisation's key. ``content_ids=True`` names every item and encrypted token after
the request's body instead of its arrival, so one body gets one answer whatever order requests come in (a
batch's lines and a run's direct calls then get the very same answers).
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from typing import Any

from cpdagthink.backends.reference import ReferenceBackend
from cpdagthink.method.chat import Completion, Request
from loopback_server import LoopbackServer

GPT5_EFFORTS = ("minimal", "low", "medium", "high")  # gpt-5, -mini, -nano: default medium
GPT51_EFFORTS = ("none", "low", "medium", "high")  # gpt-5.1: default none
GPT52_EFFORTS = ("none", "low", "medium", "high", "xhigh")  # gpt-5.2 and later
REASONING_TOKENS = {"none": 0, "minimal": 8, "low": 128, "medium": 512, "high": 2048, "xhigh": 4096}
FAULTS = ("trickle", "wrong_shape", "truncated_json", "huge", "typeless", "refusal")
# The keywords a strict function schema may use.
STRICT_KEYWORDS = {"type", "properties", "required", "additionalProperties", "items", "enum", "const", "anyOf",
                   "$defs", "$ref", "description", "pattern", "format", "minItems", "maxItems", "minimum", "maximum",
                   "exclusiveMinimum", "exclusiveMaximum", "multipleOf"}


@dataclass(frozen=True)
class Rules:
    """One model's rules: the efforts it takes, the one it applies when none is sent, and whether chat
    completions refuse function tools together with a reasoning effort (gpt-5.4 and later)."""

    efforts: tuple[str, ...]
    default_effort: str
    chat_tools_need_no_effort: bool = False


def model_rules(model: str) -> Rules:
    """The service's rules for ``model`` (gpt-5 before 5.1 and anything unknown: the gpt-5 rules)."""
    if re.match(r"o[134](-|$)", model):
        return Rules(("low", "medium", "high"), "medium")
    found = re.match(r"gpt-5\.(\d+)", model)
    minor = int(found.group(1)) if found else 0
    if minor == 1:
        return Rules(GPT51_EFFORTS, "none")
    if minor >= 2:
        return Rules(GPT52_EFFORTS, "medium" if minor >= 5 else "none", chat_tools_need_no_effort=minor >= 4)
    return Rules(GPT5_EFFORTS, "medium")


def api_error(message: str, param: str | None, code: str | None) -> dict[str, Any]:
    return {"error": {"message": message, "type": "invalid_request_error", "param": param, "code": code}}


def check_rules(body: dict[str, Any], rules: Rules) -> dict[str, Any] | None:
    """The error chat completions return for ``body``, or None if they accept it."""
    if "max_tokens" in body:
        return api_error("Unsupported parameter: 'max_tokens' is not supported with this model. "
                         "Use 'max_completion_tokens' instead.", "max_tokens", "unsupported_parameter")
    for name in ("temperature", "top_p"):
        if name in body and body[name] != 1:
            return api_error(f"Unsupported value: '{name}' does not support {json.dumps(body[name])} with this "
                             "model. Only the default (1) value is supported.", name, "unsupported_value")
    effort = body.get("reasoning_effort")
    if effort is not None and effort not in rules.efforts:
        allowed = ", ".join(f"'{e}'" for e in rules.efforts)
        return api_error(f"Unsupported value: 'reasoning_effort' does not support {json.dumps(effort)} with this "
                         f"model. Supported values are: {allowed}.", "reasoning_effort", "unsupported_value")
    if body.get("tools") and rules.chat_tools_need_no_effort and (effort or rules.default_effort) != "none":
        return api_error(f"Function tools with reasoning_effort are not supported for {body['model']} in "
                         "/v1/chat/completions. Please use /v1/responses instead.", "reasoning_effort", None)
    return None


def _listed(values: tuple[str, ...]) -> str:
    quoted = [f"'{v}'" for v in values]
    return ", ".join(quoted[:-1]) + f", and {quoted[-1]}" if len(quoted) > 1 else quoted[0]


def strict_problem(node: Any, path: str = "") -> str | None:
    """Why a ``strict`` function schema cannot be enforced, or None."""
    if isinstance(node, list):
        return next((p for v in node if (p := strict_problem(v, path))), None)
    if not isinstance(node, dict):
        return None
    for key in node:
        if key not in STRICT_KEYWORDS:
            return f"In context=({path}), '{key}' is not permitted."
    if node.get("type") == "object" or "properties" in node:
        if node.get("additionalProperties") is not False:
            return f"In context=({path}), 'additionalProperties' is required to be supplied and to be false."
        missing = [k for k in node.get("properties", {}) if k not in node.get("required", [])]
        if missing:
            return (f"In context=({path}), 'required' is required to be supplied and to be an array including "
                    f"every key in properties. Missing '{missing[0]}'.")
    for key in ("properties", "$defs"):
        for name, sub in node.get(key, {}).items():
            if problem := strict_problem(sub, f"{path}, '{name}'" if path else f"'{name}'"):
                return problem
    return next((p for key in ("items", "anyOf") if key in node and (p := strict_problem(node[key], path))), None)


def send_json(handler: BaseHTTPRequestHandler, code: int, payload: dict[str, Any]) -> None:
    """Write one JSON response (shared by the test servers)."""
    send_bytes(handler, code, json.dumps(payload).encode())


def send_bytes(handler: BaseHTTPRequestHandler, code: int, data: bytes, *, per_second: int = 0) -> None:
    """Write one response whose body is ``data``; ``per_second`` > 0 sends it that many bytes a second."""
    handler.send_response(code)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    if not per_second:
        handler.wfile.write(data)
        return
    try:
        for i in range(0, len(data), per_second):
            handler.wfile.write(data[i:i + per_second])
            handler.wfile.flush()
            time.sleep(1.0)
    except OSError:  # the client gave up
        pass


def _tokens(text: str) -> int:
    return max(1, len(text) // 4)


class ReasoningAPIServer(LoopbackServer):
    """The server on 127.0.0.1 (a free port) in a daemon thread; ``url`` ends in ``/v1``.
    ``requests`` keeps every request body received (``paths`` their endpoints, ``authorizations`` their
    ``Authorization`` headers), ``peak_in_flight`` the most
    served at once; use as a context manager or call :meth:`close`."""

    def __init__(self, *, latency_s: float = 0.0, fault: str | None = None, fault_when: str = "",
                 fault_times: int = 1 << 30, huge_chars: int = 60_000_000, summary_chars: int = 0,
                 encrypted: bool = True, content_ids: bool = False):
        if fault is not None and fault not in FAULTS:
            raise ValueError(f"fault must be one of {FAULTS}, got {fault!r}")
        self.latency_s = latency_s
        self.fault, self.fault_when, self.fault_times, self.huge_chars = fault, fault_when, fault_times, huge_chars
        self.summary_chars, self.encrypted, self.content_ids = summary_chars, encrypted, content_ids
        self.request_bytes: list[int] = []  # each request body's size
        self.requests: list[dict[str, Any]] = []
        self.authorizations: list[str | None] = []  # each request's Authorization header, as received
        self.paths: list[str] = []
        self.rejected = 0
        self.in_flight = self.peak_in_flight = 0
        self._issued: dict[str, str] = {}  # encrypted content -> the reasoning item id it was issued with
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
                raw = self.rfile.read(int(self.headers["Content-Length"]))
                with server._lock:
                    server.authorizations.append(self.headers.get("Authorization"))
                    server.request_bytes.append(len(raw))
                code, payload = server.answer(self.path, json.loads(raw))
                fault = server._take_fault(raw) if code == 200 else None
                if fault == "typeless":
                    payload["output"] = [{k: v for k, v in item.items() if k != "type"} for item in payload["output"]]
                elif fault == "refusal":
                    payload["output"] = [{"type": "message", "id": "msg_r", "role": "assistant", "status": "completed",
                                          "content": [{"type": "refusal", "refusal": "I can't help with that."}]}]
                data = json.dumps(payload).encode()
                if fault == "wrong_shape":
                    data = b'{"choices":[{"index":0}]}'
                elif fault == "truncated_json":
                    data = data[: len(data) // 2]
                send_bytes(self, code, data, per_second=1 if fault == "trickle" else 0)

        self.start(Handler)

    def _take_fault(self, raw: bytes) -> str | None:
        if self.fault is None or self.fault_when.encode() not in raw:
            return None
        with self._lock:
            if self.fault_times <= 0:
                return None
            self.fault_times -= 1
        return self.fault

    def answer(self, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        with self._lock:
            self.in_flight += 1
            self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
        received = time.perf_counter()
        try:
            with self._lock:
                self.requests.append(body)
                self.paths.append(path)
            if path.endswith("/chat/completions"):
                code, payload = self._chat(body)
            elif path.endswith("/responses"):
                code, payload = self._responses(body)
            else:
                code, payload = 404, api_error(f"Invalid URL (POST {path})", "url", "unknown_url")
            if code == 400:
                with self._lock:
                    self.rejected += 1
            else:
                time.sleep(max(0.0, received + self.latency_s - time.perf_counter()))  # a fixed latency per call
            return code, payload
        finally:
            with self._lock:
                self.in_flight -= 1

    def _reply(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], tool_choice: Any) -> Completion:
        """The reference answer; tool choice ``none`` answers in text."""
        request = Request(messages=tuple(messages), tools=tuple(tools) if tool_choice != "none" else ())
        completion = self._reference.complete(request)
        if self.fault == "huge":
            completion.text = (completion.text + " " + "x" * self.huge_chars) if not completion.tool_calls else completion.text
        return completion

    # ------------------------------------------------------------------------------ chat completions
    def _chat(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        rules = model_rules(body["model"])
        error = check_rules(body, rules)
        if error is not None:
            return 400, error
        completion = self._reply(body["messages"], body.get("tools") or [], body.get("tool_choice"))
        reasoning = REASONING_TOKENS[body.get("reasoning_effort") or rules.default_effort]
        message: dict[str, Any] = {"role": "assistant", "content": completion.text or None}
        if completion.tool_calls:
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

    # ------------------------------------------------------------------------------ responses
    def _responses_error(self, body: dict[str, Any], rules: Rules) -> dict[str, Any] | None:
        for name, hint in (("max_tokens", "max_output_tokens"), ("max_completion_tokens", "max_output_tokens"),
                           ("seed", None), ("messages", "input"), ("reasoning_effort", "reasoning.effort")):
            if name in body:
                moved = f" In the Responses API, this parameter has moved to '{hint}'." if hint else ""
                return api_error(f"Unsupported parameter: '{name}'.{moved}", name, "unsupported_parameter")
        for name in ("temperature", "top_p"):
            if name in body:
                return api_error(f"Unsupported parameter: '{name}' is not supported with this model.", name,
                                 "unsupported_parameter")
        effort = (body.get("reasoning") or {}).get("effort")
        if effort is not None and effort not in rules.efforts:
            return api_error(f"Unsupported value: '{effort}' is not supported with the '{body['model']}' model. "
                             f"Supported values are: {_listed(rules.efforts)}.", "reasoning.effort", "unsupported_value")
        for i, tool in enumerate(body.get("tools") or []):
            if "name" not in tool:
                return api_error(f"Missing required parameter: 'tools[{i}].name'.", f"tools[{i}].name",
                                 "missing_required_parameter")
            if tool.get("strict", True) and (problem := strict_problem(tool.get("parameters") or {})):
                return api_error(f"Invalid schema for function '{tool['name']}': {problem}", f"tools[{i}].parameters",
                                 "invalid_function_parameters")
        items = body.get("input") or []
        calls = set()
        for i, item in enumerate(items):
            kind = item.get("type", "message")
            if kind == "reasoning":
                if self._issued.get(item.get("encrypted_content", "")) != item.get("id"):
                    return api_error(f"The encrypted content for item {item.get('id')} could not be verified.",
                                     None, "invalid_encrypted_content")
                following = items[i + 1] if i + 1 < len(items) else {}
                if following.get("type") != "function_call" and following.get("role") != "assistant":
                    return api_error(f"Item '{item.get('id')}' of type 'reasoning' was provided without its "
                                     "required following item.", "input", None)
            elif kind == "function_call":
                calls.add(item["call_id"])
            elif kind == "function_call_output" and item["call_id"] not in calls:
                return api_error(f"No tool call found for function call output with call_id {item['call_id']}.",
                                 "input", None)
        return None

    def _responses(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        rules = model_rules(body["model"])
        error = self._responses_error(body, rules)
        if error is not None:
            return 400, error
        messages: list[dict[str, Any]] = []
        for item in body.get("input") or []:
            kind = item.get("type", "message")
            if kind == "function_call":
                messages.append({"role": "assistant", "content": "", "tool_calls": [
                    {"id": item["call_id"], "type": "function",
                     "function": {"name": item["name"], "arguments": item["arguments"]}}]})
            elif kind == "function_call_output":
                messages.append({"role": "tool", "tool_call_id": item["call_id"], "content": item["output"]})
            elif kind == "message":
                messages.append({"role": item["role"], "content": item["content"]})
        tools = [{"type": "function", "function": {k: v for k, v in t.items() if k != "type"}}
                 for t in body.get("tools") or []]
        completion = self._reply(messages, tools, body.get("tool_choice"))
        digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()
        n = digest[:12] if self.content_ids else len(self.requests)
        effort = (body.get("reasoning") or {}).get("effort") or rules.default_effort
        reasoning = REASONING_TOKENS[effort]
        output: list[dict[str, Any]] = []
        if reasoning:
            item: dict[str, Any] = {"type": "reasoning", "id": f"rs_{n}", "summary": []}
            if (body.get("reasoning") or {}).get("summary"):
                item["summary"] = [{"type": "summary_text", "text": f"**Reading the premise**\n\nRequest {n}: "
                                                                    f"worked through at {effort} effort."
                                                                    + "z" * self.summary_chars}]
            if self.encrypted and "reasoning.encrypted_content" in (body.get("include") or ()):
                token = digest if self.content_ids else hashlib.sha256(f"{n}:{time.time_ns()}".encode()).hexdigest()
                with self._lock:
                    self._issued[token] = item["id"]
                item["encrypted_content"] = token
            output.append(item)
        visible = _tokens(completion.text + "".join(c.arguments for c in completion.tool_calls))
        budget = body.get("max_output_tokens")
        status, incomplete = "completed", None
        if budget is not None and reasoning + visible > budget:  # the budget covers reasoning too
            status, incomplete, visible = "incomplete", {"reason": "max_output_tokens"}, max(0, budget - reasoning)
            reasoning = min(reasoning, budget)
        elif completion.tool_calls:
            output += [{"type": "function_call", "id": f"fc_{n}_{i}", "call_id": f"call_{n}x{i}", "name": c.name,
                        "arguments": c.arguments, "status": "completed"} for i, c in enumerate(completion.tool_calls)]
        else:
            output.append({"type": "message", "id": f"msg_{n}", "role": "assistant", "status": "completed",
                           "content": [{"type": "output_text", "text": completion.text, "annotations": []}]})
        prompt = _tokens(json.dumps(body.get("input")))
        return 200, {
            "id": f"resp_{n}", "object": "response", "created_at": int(time.time()), "status": status,
            "incomplete_details": incomplete, "error": None, "model": f"{body['model']}-2025-08-07",
            "output": output, "parallel_tool_calls": True, "tool_choice": body.get("tool_choice", "auto"),
            "tools": body.get("tools") or [], "store": body.get("store", True),
            "reasoning": {"effort": effort, "summary": (body.get("reasoning") or {}).get("summary")},
            "usage": {"input_tokens": prompt, "input_tokens_details": {"cached_tokens": 0},
                      "output_tokens": reasoning + visible, "output_tokens_details": {"reasoning_tokens": reasoning},
                      "total_tokens": prompt + reasoning + visible},
        }

    def forget_issued(self) -> None:
        """From now on no reasoning item issued so far can be verified (another organisation's key)."""
        with self._lock:
            self._issued.clear()

