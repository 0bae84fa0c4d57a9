"""OpenAI-compatible backend against a real server (llama.cpp's, on 127.0.0.1) and a scripted stub.

The real server is ``llama_cpp.server`` started through ``python -m cpdagthink.backends.local`` (the same
server with llama.cpp's AMX buffers off: on this machine they crash with SIGILL on the first batch).
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler

import pytest

from cpdagthink.backends import make_backend
from cpdagthink.backends.base import BackendError, RequestRejected
from cpdagthink.backends.openai_api.endpoints import public_url, redact
from cpdagthink.backends.openai_api.payloads import chat_kwargs
from cpdagthink.backends.profiles import profile_for, with_overrides
from cpdagthink.backends.toolcalls import envelope_regex
from cpdagthink.backends.transport import RetriesExhausted, ServiceRejected
from cpdagthink.method.chat import Constraint, Request
from cpdagthink.method.schema import TOOL_NAME, analysis_regex, tool_definition
from in_flight import InFlight
from loopback_server import LoopbackServer
from reasoning_api_server import send_json
from conftest import configured

SECRET = "sk-test-never-written-0123456789"
ANSWER_TOOL = {
    "type": "function",
    "function": {
        "name": "record_answer",
        "description": "Record the final answer.",
        "parameters": {
            "type": "object",
            "properties": {"answer": {"type": "string", "enum": ["YES", "NO"]}},
            "required": ["answer"],
        },
    },
}


@pytest.fixture(autouse=True)
def dummy_key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def user(text: str) -> tuple[dict, ...]:
    return ({"role": "user", "content": text},)


# ----------------------------------------------------------------------------------------- payloads (pure)
def test_chat_kwargs_tool_choice_and_constraints():
    rx = analysis_regex(["A", "B"])
    forced = Request(messages=user("q"), tools=(tool_definition(["A", "B"]),), tool_choice=TOOL_NAME,
                     constraint=Constraint(regex=rx, tool=TOOL_NAME), max_tokens=7, seed=3)
    kw, note = chat_kwargs(forced, "m")
    assert kw["tool_choice"] == {"type": "function", "function": {"name": TOOL_NAME}}
    assert kw["max_tokens"] == 7 and kw["seed"] == 3 and kw["model"] == "m" and "extra_body" not in kw
    assert note["constraint"] == "tool schema (forced tool call)"
    # vLLM: regex in structured_outputs, Hermes envelope, and the named choice downgraded to auto
    kw, note = chat_kwargs(forced, "m", regex_mode="vllm",
                           profile=with_overrides(profile_for("m"), reasoning_control="chat_template_kwargs"))
    assert kw["extra_body"]["structured_outputs"] == {"regex": envelope_regex(TOOL_NAME, rx)}
    assert kw["tool_choice"] == "auto" and note["tool_choice_requested"] == TOOL_NAME
    assert kw["extra_body"]["chat_template_kwargs"] == {"enable_thinking": True}
    # plain regex without tools
    kw, _ = chat_kwargs(Request(messages=user("q"), constraint=Constraint(regex="(YES|NO)")), "m", regex_mode="vllm")
    assert kw["extra_body"] == {"structured_outputs": {"regex": "(YES|NO)"}} and "tools" not in kw
    # no regex support: json_schema via response_format, or recorded as not enforced
    schema = {"type": "object", "properties": {"a": {"type": "string"}}}
    kw, note = chat_kwargs(Request(messages=user("q"), constraint=Constraint(regex="x", json_schema=schema)), "m")
    assert kw["response_format"]["json_schema"]["schema"] == schema
    _, note = chat_kwargs(Request(messages=user("q"), constraint=Constraint(regex="x")), "m")
    assert note["constraint"] == "not enforced"
    for choice in ("auto", "required"):
        kw, _ = chat_kwargs(Request(messages=user("q"), tools=(ANSWER_TOOL,), tool_choice=choice), "m")
        assert kw["tool_choice"] == choice
    kw, _ = chat_kwargs(Request(messages=user("q"), tool_choice="auto"), "m")
    assert "tool_choice" not in kw  # no tools, no tool_choice
    kw, _ = chat_kwargs(Request(messages=user("q")), "m", send_seed=False,
                        profile=with_overrides(profile_for("m"), token_param="max_completion_tokens"))
    assert "max_completion_tokens" in kw and "max_tokens" not in kw and "seed" not in kw


def test_chat_kwargs_follow_the_model_profile():
    req = Request(messages=user("q"), max_tokens=50, temperature=0.0, top_p=0.9, top_k=20, min_p=0.05)
    # GPT-5: the completion budget parameter, no sampling, thinking off is the lowest effort
    kw, note = chat_kwargs(req, "gpt-5-mini", reasoning_effort="high")
    assert kw["max_completion_tokens"] == 50 and "max_tokens" not in kw
    assert "temperature" not in kw and "top_p" not in kw and kw["reasoning_effort"] == "high"
    assert note["sampling_not_sent"] == ["temperature=0.0", "top_p=0.9", "top_k=20", "min_p=0.05"]
    kw, note = chat_kwargs(Request(messages=user("q"), thinking=False), "gpt-5-mini", reasoning_effort="high")
    assert kw["reasoning_effort"] == "minimal" == note["reasoning_effort_sent"]
    kw, _ = chat_kwargs(Request(messages=user("q"), thinking=False), "gpt-5.4-mini")
    assert kw["reasoning_effort"] == "none"
    kw, _ = chat_kwargs(Request(messages=user("q")), "gpt-5.4-mini")
    assert "reasoning_effort" not in kw  # the service's default unless an effort is given
    # a classic chat model takes max_tokens and sampling, and no reasoning control
    kw, note = chat_kwargs(req, "gpt-4o")
    assert kw["max_tokens"] == 50 and kw["temperature"] == 0.0 and kw["top_p"] == 0.9 and "reasoning_effort" not in kw
    assert note["sampling_not_sent"] == ["top_k=20", "min_p=0.05"]  # the OpenAI API has no top_k / min_p
    # Qwen3 on a vLLM server: top_k / min_p through extra_body, thinking through the chat template
    kw, note = chat_kwargs(replace_thinking(req, False), "Qwen/Qwen3-8B", regex_mode="vllm")
    assert kw["extra_body"]["top_k"] == 20 and kw["extra_body"]["min_p"] == 0.05 and "sampling_not_sent" not in note
    assert kw["extra_body"]["chat_template_kwargs"] == {"enable_thinking": False} and kw["max_tokens"] == 50
    # Mistral on a vLLM server: the constrained call uses the [TOOL_CALLS] envelope
    rx = analysis_regex(["A", "B"])
    tool_req = Request(messages=user("q"), tools=(tool_definition(["A", "B"]),), tool_choice="auto",
                       constraint=Constraint(regex=rx, tool=TOOL_NAME))
    kw, note = chat_kwargs(tool_req, "mistralai/Mistral-Small-3.1-24B-Instruct-2503", regex_mode="vllm")
    assert kw["extra_body"]["structured_outputs"]["regex"] == envelope_regex(TOOL_NAME, rx, style="mistral")
    assert note["constraint"] == "regex (mistral envelope)"


def replace_thinking(request: Request, thinking: bool) -> Request:
    from dataclasses import replace

    return replace(request, thinking=thinking)


def test_backend_options_override_the_profile_and_are_checked():
    backend = make_backend("openai", model="gpt-5-mini", base_url="http://127.0.0.1:9/v1", token_param="max_tokens",
                           send_sampling=True, reasoning_effort="low", revision="2025-08-07")
    ident = backend.identity()
    assert ident["profile"]["token_param"] == "max_tokens" and ident["profile"]["sampling"] is True
    assert ident["reasoning_effort"] == "low" and ident["revision"] == "2025-08-07"
    assert "overridden" in ident["profile"]["family"] and backend.thinking_supported
    with pytest.raises(ValueError, match="use one of: minimal, low, medium, high"):
        make_backend("openai", model="gpt-5-mini", base_url="http://127.0.0.1:9/v1", reasoning_effort="none")
    with pytest.raises(ValueError, match="option token_param: Input should be .max_tokens. or .max_completion_tokens."):
        make_backend("openai", model="gpt-5-mini", base_url="http://127.0.0.1:9/v1", token_param="max_new_tokens")
    o3 = make_backend("openai", model="o3-mini", base_url="http://127.0.0.1:9/v1")
    assert not o3.thinking_supported and o3.timeout == 600  # reasons always; slow by nature
    assert make_backend("openai", model="stub", base_url="http://127.0.0.1:9/v1").timeout == 60


def test_assistant_tool_call_content_is_empty_string_not_null():
    msgs = (
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function",
                                                               "function": {"name": "f", "arguments": {"x": 1}}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "r"},
    )
    kw, _ = chat_kwargs(Request(messages=msgs), "m")
    assert kw["messages"][1]["content"] == ""
    assert kw["messages"][1]["tool_calls"][0]["function"]["arguments"] == '{"x": 1}'


# ----------------------------------------------------------------------------------------- scripted stub
class Stub(LoopbackServer):
    """A tiny OpenAI-compatible endpoint: the first ``fail`` requests get ``status``, then a completion."""

    def __init__(self, fail: int = 0, status: int = 503):
        self.fail, self.status = fail, status
        self.error_message = "busy"
        self.hits: list[dict] = []
        self.lock = threading.Lock()
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with stub.lock:
                    stub.hits.append({"path": self.path, "auth": self.headers.get("Authorization"), "body": body})
                    n = len(stub.hits)
                if n <= stub.fail:
                    payload, code = {"error": {"message": stub.error_message, "type": "server_error"}}, stub.status
                else:
                    payload, code = {
                        "id": f"chatcmpl-{n}", "object": "chat.completion", "created": 0,
                        "model": "stub-model-2025-01-01",
                        "choices": [{"index": 0, "finish_reason": "stop", "message": {
                            "role": "assistant", "content": "echo: " + body["messages"][-1]["content"],
                            "reasoning_content": "thought about it"}}],
                        "usage": {"prompt_tokens": 11, "completion_tokens": 3, "total_tokens": 14},
                    }, 200
                send_json(self, code, payload)

        self.start(Handler)


@pytest.fixture
def stub_factory():
    stubs = []

    def make(**kw):
        stubs.append(Stub(**kw))
        return stubs[-1]

    yield make
    for s in stubs:
        s.close()


def test_retries_503_then_succeeds(stub_factory):
    stub = stub_factory(fail=2, status=503)
    backend = make_backend("openai", model="stub", base_url=stub.url, retries=3, backoff_base=0.01, timeout=5,
                           api_key_env="OPENAI_API_KEY")  # named for this host, so its key is sent here
    out = backend.complete(Request(messages=user("hello")))
    assert out.text == "echo: hello" and out.reasoning == "thought about it"
    assert len(stub.hits) == 3 and backend.attempts == 3 and out.meta["attempts"] == 3
    assert out.prompt_tokens == 11 and out.completion_tokens == 3 and out.latency_s > 0
    assert out.finish_reason == "stop"
    assert out.meta["served_model"] == "stub-model-2025-01-01" and "served_model" not in backend.identity()
    assert stub.hits[0]["auth"] == f"Bearer {SECRET}"  # the key is used ...
    for blob in (json.dumps(backend.identity()), json.dumps(out.to_json())):
        assert SECRET not in blob  # ... but never written


def test_client_error_is_not_retried(stub_factory):
    stub = stub_factory(fail=5, status=400)
    backend = make_backend("openai", model="stub", base_url=stub.url, retries=3, backoff_base=0.01, timeout=5)
    with pytest.raises(ServiceRejected, match="rejected the request") as err:
        backend.complete(Request(messages=user("hello")))
    assert isinstance(err.value, RequestRejected) and err.value.status_code == 400
    assert err.value.server_message == "busy"  # the service's own text
    assert len(stub.hits) == 1
    # in a batch the rejection comes back on its request, carrying the service's message
    out = backend.complete_batch([Request(messages=user("a")), Request(messages=user("b"))])
    assert [o.meta["rejected"] for o in out] == ["HTTP 400: busy"] * 2 and out[0].meta["rejected_status"] == 400


def test_other_client_errors_fail_at_once(stub_factory):
    stub = stub_factory(fail=5, status=401)
    backend = make_backend("openai", model="stub", base_url=stub.url, retries=3, backoff_base=0.01, timeout=5)
    with pytest.raises(BackendError, match="not retryable"):
        backend.complete(Request(messages=user("hello")))
    assert len(stub.hits) == 1


def test_retries_exhausted_gives_backend_error(stub_factory):
    stub = stub_factory(fail=10, status=429)
    backend = make_backend("openai", model="stub", base_url=stub.url, retries=2, backoff_base=0.01, timeout=5)
    with pytest.raises(BackendError, match=r"after 3 attempts"):
        backend.complete(Request(messages=user("hello")))
    assert len(stub.hits) == 3


def test_unreachable_endpoint_fails_fast_with_url():
    url = f"http://127.0.0.1:{free_port()}/v1"  # bound then closed: nothing listens
    backend = make_backend("openai", model="x", base_url=url, retries=2, backoff_base=0.01, timeout=2)
    start = time.perf_counter()
    with pytest.raises(BackendError) as err:
        backend.complete(Request(messages=user("hello")))
    assert time.perf_counter() - start < 10
    assert url in str(err.value) and "unreachable" in str(err.value)
    assert SECRET not in str(err.value)


def test_round_robin_and_ordered_batch(stub_factory):
    a, b = stub_factory(), stub_factory()
    backend = make_backend("openai", model="stub", base_url=[a.url, b.url], max_concurrency=3, timeout=5)
    requests = [Request(messages=user(f"q{i}")) for i in range(6)]
    outs = backend.complete_batch(requests)
    assert [o.text for o in outs] == [f"echo: q{i}" for i in range(6)]
    assert len(a.hits) == 3 and len(b.hits) == 3
    # where it is reached is provenance (each call's meta, the run's API), never what computes
    assert {o.meta["base_url"] for o in outs} == {a.url, b.url} and a.url in backend.provenance().api
    assert not any(a.url in json.dumps(v) or b.url in json.dumps(v) for v in backend.identity().values())


def test_missing_key_for_the_real_api(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY")
    with pytest.raises(BackendError, match="OPENAI_API_KEY"):
        make_backend("openai", model="gpt-x")


# ----------------------------------------------------------------------------------------- secrets
def test_credentials_in_urls_and_error_bodies_are_never_recorded(stub_factory, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY")
    url_key = "KEY-in-url-0123456789"
    stub = stub_factory()
    port = stub.url.split(":")[2].split("/")[0]
    backend = make_backend("openai", model="stub", base_url=f"http://user:{url_key}@127.0.0.1:{port}/v1", timeout=5)
    out = backend.complete(Request(messages=user("hello")))
    assert stub.hits[0]["auth"] == f"Bearer {url_key}"  # the URL's password is the key the server gets ...
    assert backend.base_urls == [stub.url] and out.meta["base_url"] == stub.url
    for blob in (json.dumps(backend.identity()), json.dumps(out.to_json())):
        assert url_key not in blob and "user" not in blob.split("/v1")[0]  # ... and is written nowhere
    # a server that echoes the credentials in its error body: stored redacted
    echo = stub_factory(fail=1, status=400)
    echo_port = echo.url.split(":")[2].split("/")[0]
    leaky = make_backend("openai", model="stub", base_url=f"http://u:{url_key}@127.0.0.1:{echo_port}/v1", timeout=5)
    echo.error_message = f"bad request; headers were Authorization: Bearer {url_key}, api-key: sk-abcdef123456789"
    [rejected] = leaky.complete_batch([Request(messages=user("x"))])
    assert "REDACTED" in rejected.meta["rejected"] and url_key not in json.dumps(rejected.to_json())
    assert "sk-abcdef123456789" not in rejected.meta["rejected"]
    unreachable = make_backend("openai", model="x", base_url=f"http://u:{url_key}@127.0.0.1:{free_port()}/v1",
                               retries=0, timeout=2)
    with pytest.raises(BackendError) as err:
        unreachable.complete(Request(messages=user("hello")))
    assert url_key not in str(err.value) and "127.0.0.1" in str(err.value)


def test_each_host_gets_only_the_key_meant_for_it(stub_factory, monkeypatch):
    """The environment's OpenAI key goes to api.openai.com only; a key in a URL goes to that URL only (and wins
    there); a variable named with api_key_env goes to the hosts of that backend; a host with no key gets a
    placeholder that is no secret, so a local server without auth still works."""
    from cpdagthink.backends.openai_api.endpoints import NO_KEY, key_for

    monkeypatch.setenv("PROXY_KEY", "sk-proxy-only-4242")
    url_key = "sk-url/key#with?odd@chars"
    encoded = url_key.replace("/", "%2F").replace("#", "%23").replace("?", "%3F").replace("@", "%40")
    requests = [Request(messages=user("hello"))] * 2
    bare, keyed = stub_factory(), stub_factory()
    with_key = keyed.url.replace("http://", f"http://u:{encoded}@")
    make_backend("openai", model="stub", base_url=[bare.url, with_key], timeout=5).complete_batch(requests)
    assert [h["auth"] for h in bare.hits] == [f"Bearer {NO_KEY}"]  # never SECRET, the environment's OpenAI key
    assert [h["auth"] for h in keyed.hits] == [f"Bearer {url_key}"]  # the URL's key, decoded, over the environment's
    make_backend("openai", model="stub", base_url=[bare.url, with_key], timeout=5,
                 api_key_env="PROXY_KEY").complete_batch(requests)
    assert bare.hits[-1]["auth"] == "Bearer sk-proxy-only-4242" and keyed.hits[-1]["auth"] == f"Bearer {url_key}"
    assert key_for(None) == key_for("https://api.openai.com/v1") == SECRET  # OpenAI's own host
    assert key_for("https://api.openai.com.evil.example/v1") is None and key_for("http://127.0.0.1:1/v1") is None
    monkeypatch.delenv("PROXY_KEY")
    with pytest.raises(BackendError, match="PROXY_KEY, which is unset"):
        make_backend("openai", model="stub", base_url="http://127.0.0.1:1/v1", api_key_env="PROXY_KEY")


@pytest.mark.parametrize("url, says", [
    ("http://127.0.0.1:1/v1?api-key=sk-QUERY123456", "query string (api-key)"),
    ("http://127.0.0.1:1/v1?x=1&Access_Token=sk-QUERY123456", "query string (Access_Token)"),
    ("http://u:sk-QUERY/123456@127.0.0.1:1/v1", "percent-encode the key"),
    ("http://u:sk-QUERY#123456@127.0.0.1:1/v1", "percent-encode the key"),
    ("http://u:12/sk-QUERY123456@127.0.0.1:1/v1", "percent-encode the key"),
])
def test_a_key_in_a_query_string_or_not_percent_encoded_is_refused_quoting_none_of_it(url, says):
    from cpdagthink.credentials import URLCredentialsError, strip_credentials

    for attempt in (lambda: strip_credentials(url), lambda: make_backend("openai", model="m", base_url=url)):
        with pytest.raises(URLCredentialsError, match=re.escape(says)) as raised:
            attempt()
        assert "QUERY" not in str(raised.value) and "123456" not in str(raised.value)


def test_public_url_and_redact():
    assert public_url("https://u:p@host.example:8443/v1?api-key=abc&x=1") == "https://host.example:8443/v1?api-key=REDACTED&x=1"
    assert public_url(None) == "https://api.openai.com/v1"
    text = redact('{"Authorization": "Bearer abcdefgh1234", "url": "http://a:b@h/v1"} api-key: zzz', ["zzz"])
    assert "abcdefgh1234" not in text and "a:b@" not in text and "zzz" not in text


# ----------------------------------------------------------------------------------------- hangs
@pytest.fixture
def silent_server():
    """Accepts TCP connections (the kernel completes them from the backlog) and never answers."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(64)
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/v1"


def test_a_server_that_never_answers_is_retried_like_a_5xx_each_attempt_within_the_timeout(silent_server):
    backend = make_backend("openai", model="stub", base_url=silent_server, timeout=0.5, retries=2,
                           backoff_base=0.05, backoff_max=0.1)
    start = time.perf_counter()
    with pytest.raises(RetriesExhausted, match="after 3 attempts; last error: .*did not answer within 0.5 s"):
        backend.complete(Request(messages=user("hello")))
    assert backend.attempts == 3
    assert 1.5 <= time.perf_counter() - start < 5  # three timeouts and two short backoffs, nothing longer


def test_ctrl_c_during_a_batch_stops_at_once(silent_server, ctrl_c):
    backend = make_backend("openai", model="stub", base_url=silent_server, timeout=60, max_concurrency=5)
    ctrl_c.start()
    start = time.perf_counter()
    with pytest.raises(KeyboardInterrupt):
        backend.complete_batch([Request(messages=user(f"q{i}")) for i in range(20)])
    assert time.perf_counter() - start < 3  # not the 60 s timeout
    backend.close()


def test_ctrl_c_stops_a_run_against_a_silent_server_and_keeps_its_folder(silent_server, test_csv, tmp_path, ctrl_c):
    from cpdagthink.method.conditions import CONDITIONS
    from cpdagthink.run.data import read_csv
    from cpdagthink.run.runner import run_config

    backend = make_backend("openai", model="gpt-4o", base_url=silent_server, timeout=60)
    rows = read_csv(test_csv)[:12]  # before the timer: under load, reading the CSV alone can take 0.5 s
    ctrl_c.start()
    start = time.perf_counter()
    with pytest.raises(KeyboardInterrupt):
        run_config(configured("baseline_enhanced", cache_dir=tmp_path / "cache"),
                   backend, rows, tmp_path / "run", progress=False)
    assert time.perf_counter() - start < 3
    assert json.loads((tmp_path / "run" / "metadata.json").read_text())["status"] == "interrupted"


# ----------------------------------------------------------------------------------------- reasoning-model API
@pytest.fixture
def reasoning_server():
    from reasoning_api_server import ReasoningAPIServer

    with ReasoningAPIServer() as server:
        yield server


def test_the_reasoning_server_enforces_the_documented_rules(reasoning_server):
    plain = Request(messages=user("Premise: A correlates with B.\nHypothesis: A directly causes B."), max_tokens=900)
    forced_old = make_backend("openai", model="gpt-5-mini", base_url=reasoning_server.url, token_param="max_tokens",
                              api="chat")
    with pytest.raises(ServiceRejected) as err:
        forced_old.complete(plain)
    assert err.value.server_message == ("Unsupported parameter: 'max_tokens' is not supported with this model. "
                                        "Use 'max_completion_tokens' instead.")
    sampled = make_backend("openai", model="gpt-5-mini", base_url=reasoning_server.url, send_sampling=True, api="chat")
    with pytest.raises(ServiceRejected) as err:
        sampled.complete(plain)
    assert err.value.server_message == ("Unsupported value: 'temperature' does not support 0.0 with this model. "
                                        "Only the default (1) value is supported.")
    profiled = make_backend("openai", model="gpt-5-mini", base_url=reasoning_server.url, api="chat")
    out = profiled.complete(plain)
    assert out.text.endswith("Answer: NO") and out.meta["reasoning_tokens"] == 512
    assert out.completion_tokens > 512 and reasoning_server.rejected == 2


def test_concurrent_batches_share_the_concurrency_bound():
    from reasoning_api_server import ReasoningAPIServer

    with ReasoningAPIServer(latency_s=0.2) as server:
        backend = make_backend("openai", model="gpt-5-mini", base_url=server.url, max_concurrency=3)
        requests = [Request(messages=user(f"Hypothesis: A causes B{i}.")) for i in range(6)]
        backend.complete(requests[0])  # warm: the client imports its API's types on first use (seconds under load)
        outs: list = []
        threads = [threading.Thread(target=lambda: outs.append(backend.complete_batch(requests))) for _ in range(2)]
        start = time.perf_counter()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert len(outs) == 2 and all(len(o) == 6 and not o[0].meta.get("rejected") for o in outs)
        assert server.peak_in_flight == 3  # never more than max_concurrency, though two batches ran at once
        assert time.perf_counter() - start < 12 * 0.2  # yet the slots were shared, not taken in turn


def test_every_slot_keeps_its_connection_between_requests():
    """httpx keeps 20 connections open by default: at more requests in flight, the rest paid a new connection
    each call, on the client and on the server."""
    from loopback_api import Latency, LoopbackAPI

    with LoopbackAPI(latency=Latency(0.05, 0.0)) as server:
        backend = make_backend("openai", model="gpt-4.1-mini", base_url=server.url, max_concurrency=32)
        outs = backend.complete_batch([Request(messages=user(f"Hypothesis: A causes B{i}.")) for i in range(192)])
    assert len(outs) == 192 and not any(o.meta.get("rejected") for o in outs)
    # one a slot, and a few more where a slot was handed on before its connection went back to the pool; before: 174
    assert server.peak_in_flight > 20 and server.connections <= 40, server.connections  # more than httpx keeps


CONDITIONS_THROUGH_THE_API = ["structured", "baseline_enhanced", "singleturn_structured", "twoturn_prose_pc",
                              "no_thinking"]


@pytest.mark.parametrize("api", ["responses", "chat"])
@pytest.mark.parametrize("condition_name", CONDITIONS_THROUGH_THE_API)
def test_conditions_run_end_to_end_through_the_reasoning_api(reasoning_server, test_csv, tmp_path, condition_name, api):
    from cpdagthink.backends.profiles import check_condition
    from cpdagthink.method.conditions import CONDITIONS, Flow
    from cpdagthink.method.decoding import Decoding
    from cpdagthink.run.data import read_csv
    from cpdagthink.run.runner import run_config

    condition = CONDITIONS[condition_name]
    backend = make_backend("openai", model="gpt-5-mini", base_url=reasoning_server.url, reasoning_effort="low", api=api)
    check_condition(backend.profile, condition.thinking, model=backend.model)  # nothing to refuse here
    rows = read_csv(test_csv)
    items = [i for i in rows if i.num_variables == 3 and i.label == 1][:2] + [i for i in rows if i.num_variables == 4][:2]
    result = run_config(configured(condition.name, cache_dir=tmp_path / "cache",
                                   decoding=Decoding(max_tokens_turn1=4096, max_tokens_answer=512), chunk_size=3),
                        backend, items, tmp_path / "run", progress=False)
    assert reasoning_server.rejected == 0 and len(result.records) == len(items)
    assert all("max_tokens" not in body and "temperature" not in body for body in reasoning_server.requests)
    turns = 1 if condition.flow is Flow.ONE_TURN else 2
    assert result.model_calls == turns * len(items) == len(reasoning_server.requests)
    assert set(reasoning_server.paths) == {"/v1/responses" if api == "responses" else "/v1/chat/completions"}
    for record in result.records:
        assert record.prediction == record.oracle_label and not record.unparsed  # the oracle, end to end
        for turn in record.turns:
            assert turn.rejected is None and turn.meta["api"] == api
            assert (turn.reasoning is not None) == (api == "responses")  # the summary; chat returns none
            effort = "minimal" if condition_name == "no_thinking" else "low"
            assert turn.meta["reasoning_effort_sent"] == effort
            assert turn.meta["reasoning_tokens"] == {"minimal": 8, "low": 128}[effort]
            assert turn.completion_tokens > turn.meta["reasoning_tokens"]
        if condition.flow is Flow.TOOL:
            assert record.turns[0].tool_calls[0].name == TOOL_NAME and record.emitted is not None


def test_no_thinking_is_refused_for_families_without_an_off_switch():
    from cpdagthink.backends.profiles import ProfileError, check_condition

    o3 = make_backend("openai", model="o3-mini", base_url="http://127.0.0.1:9/v1")
    with pytest.raises(ProfileError, match="no off switch"):
        check_condition(o3.profile, thinking=False, model=o3.model)
    check_condition(o3.profile, thinking=True)


# ----------------------------------------------------------------------------------------- Responses API
def structured_turns(rows, decoding=None):
    """Turn-1 requests of the structured condition for ``rows``."""
    from cpdagthink.method.conditions import CONDITIONS, first_request
    from cpdagthink.method.decoding import Decoding

    return [first_request(CONDITIONS["structured"], row, decoding or Decoding(max_tokens_turn1=4096)) for row in rows]


def test_responses_kwargs_payload(test_csv):
    from dataclasses import replace

    from cpdagthink.method.chat import Completion, ToolCall
    from cpdagthink.backends.openai_api.payloads import responses_kwargs
    from cpdagthink.method.conditions import CONDITIONS, second_request
    from cpdagthink.method.decoding import Decoding
    from cpdagthink.run.data import read_csv

    row = read_csv(test_csv)[0]
    [turn1] = structured_turns([row])
    kw, note = responses_kwargs(turn1, "gpt-5.4-mini", reasoning_effort="medium")
    assert [i["role"] for i in kw["input"]] == ["system", "user"] and kw["input"][1]["content"] == turn1.messages[1]["content"]
    [tool] = kw["tools"]
    assert tool["type"] == "function" and tool["name"] == TOOL_NAME and tool["strict"] is True and "function" not in tool
    assert tool["parameters"]["additionalProperties"] is False and "prefixItems" not in json.dumps(tool["parameters"])
    assert kw["tool_choice"] == "auto" and kw["max_output_tokens"] == 4096 and kw["store"] is False
    assert kw["reasoning"] == {"effort": "medium", "summary": "auto"} and kw["include"] == ["reasoning.encrypted_content"]
    assert not {"temperature", "top_p", "seed", "max_tokens", "max_completion_tokens", "messages"} & set(kw)
    assert note["api"] == "responses" and note["schema_enforced"] is True and "seed=0" in note["sampling_not_sent"]
    assert note["constraint"] == "tool schema (strict function tool)"
    forced, _ = responses_kwargs(replace(turn1, tool_choice=TOOL_NAME), "gpt-5.4-mini")
    assert forced["tool_choice"] == {"type": "function", "name": TOOL_NAME}
    assert "reasoning" not in forced  # gpt-5.4's default effort is none: nothing to ask for, nothing to summarise
    off, note = responses_kwargs(replace(turn1, thinking=False), "gpt-5.4-mini", reasoning_effort="high")
    assert off["reasoning"] == {"effort": "none"} and note["reasoning_effort_sent"] == "none"  # no summary of nothing
    # turn 2: turn 1's reasoning items, then the call and its output under the request's own call id
    carried = [{"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "opaque"}]
    turn1_out = Completion(text="", tool_calls=[ToolCall(TOOL_NAME, "{}")], reasoning_items=carried)
    turn2 = second_request(CONDITIONS["structured"], row, Decoding(), turn1_out)
    items = responses_kwargs(turn2, "gpt-5.4-mini", reasoning_effort="medium")[0]["input"]
    call_id = turn2.messages[2]["tool_calls"][0]["id"]
    assert [i.get("type", i.get("role")) for i in items] == ["system", "user", "reasoning", "function_call",
                                                            "function_call_output"]
    assert items[2] == carried[0] and items[3]["call_id"] == items[4]["call_id"] == call_id
    assert items[3]["name"] == TOOL_NAME and items[4]["output"] == turn2.messages[3]["content"]


def test_strict_schema_keeps_the_causal_analysis_exact_and_says_what_it_loosens():
    from reasoning_api_server import strict_problem

    from cpdagthink.backends.openai_api.payloads import strict_schema

    raw = tool_definition(None)["function"]["parameters"]
    assert strict_problem(raw)  # as pydantic writes it, the service would refuse it
    strict, loosened = strict_schema(raw)
    assert strict_problem(strict) is None and loosened == []  # every tuple position takes the same names
    # Narrowed to the instance's variables, a pair's positions differ (no self-loop): strict tools cannot say
    # that, so it is loosened, said once per place, and the parser refuses a self-loop instead.
    narrowed, loosened = strict_schema(tool_definition(["A", "B", "C"])["function"]["parameters"])
    assert strict_problem(narrowed) is None
    assert loosened == [f"{where}: tuple positions merged into one item schema" for where in (
        "/$defs/SeparatingSet/properties/pair/anyOf", "/properties/skeleton/items/anyOf",
        "/properties/v_structures/items/anyOf", "/properties/directed_edges/items/anyOf",
        "/properties/undirected_edges/items/anyOf")]
    strict, loosened = strict_schema({"type": "object", "properties": {
        "a": {"type": "integer", "default": 3}, "pair": {"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}]}},
        "required": ["pair"]})
    assert strict["required"] == ["a", "pair"] and strict["additionalProperties"] is False
    assert strict["properties"]["a"] == {"anyOf": [{"type": "integer"}, {"type": "null"}]}
    assert strict["properties"]["pair"]["items"] == {"anyOf": [{"type": "string"}, {"type": "integer"}]}
    assert loosened == ["/properties/a: default dropped", "/properties/pair: tuple positions merged into one item schema",
                        "/properties/a: optional, sent as nullable"]


def test_the_api_follows_the_profile_and_the_option_overrides_it():
    url = "http://127.0.0.1:9/v1"
    assert make_backend("openai", model="gpt-5.4-mini", base_url=url).identity()["api"] == "responses"
    assert make_backend("openai", model="o3-mini", base_url=url).identity()["api"] == "responses"
    assert make_backend("openai", model="gpt-4o", base_url=url).identity()["api"] == "chat"
    assert make_backend("openai", model="Qwen/Qwen3-8B", base_url=url, regex_mode="vllm").identity()["api"] == "chat"
    assert make_backend("openai", model="gpt-5.4-mini", base_url=url, api="chat").identity()["api"] == "chat"
    with pytest.raises(ValueError, match="use api 'chat'"):
        make_backend("openai", model="gpt-5.4-mini", base_url=url, api="responses", regex_mode="vllm")


def test_chat_completions_refuse_tools_with_an_effort_from_gpt_5_4_on(reasoning_server, test_csv):
    from dataclasses import replace

    from cpdagthink.run.data import read_csv

    [turn1] = structured_turns(read_csv(test_csv)[:1])

    def chat(model, request, **options):
        return make_backend("openai", model=model, base_url=reasoning_server.url, api="chat", **options).complete(request)

    with pytest.raises(ServiceRejected) as err:
        chat("gpt-5.4", turn1, reasoning_effort="medium")
    assert err.value.server_message == ("Function tools with reasoning_effort are not supported for gpt-5.4 in "
                                        "/v1/chat/completions. Please use /v1/responses instead.")
    assert chat("gpt-5.4", turn1).tool_calls  # its default effort is none: accepted
    for model in ("gpt-5.5", "gpt-5.6-mini"):  # a default effort of medium: refused unless sent none
        with pytest.raises(ServiceRejected, match="Please use /v1/responses instead"):
            chat(model, turn1)
        assert chat(model, replace(turn1, thinking=False)).tool_calls
    assert chat("gpt-5-mini", turn1, reasoning_effort="high").tool_calls  # before 5.4: accepted
    # the Responses API takes the same request at every effort
    for model in ("gpt-5.4", "gpt-5.5"):
        out = make_backend("openai", model=model, base_url=reasoning_server.url, reasoning_effort="high").complete(turn1)
        assert out.tool_calls[0].name == TOOL_NAME and out.meta["reasoning_tokens"] == 2048
        assert out.reasoning and out.reasoning_items[0]["encrypted_content"] and out.meta["api"] == "responses"


def test_the_responses_endpoint_enforces_its_rules(reasoning_server, test_csv):
    from cpdagthink.run.data import read_csv

    [turn1] = structured_turns(read_csv(test_csv)[:1])
    with pytest.raises(ValueError, match="use one of: none, low, medium, high$"):  # the profile refuses first ...
        make_backend("openai", model="gpt-5.1", base_url=reasoning_server.url, reasoning_effort="xhigh")
    code, error = reasoning_server.answer("/v1/responses", {"model": "gpt-5.1", "input": [],
                                                            "reasoning": {"effort": "minimal"}})
    assert code == 400 and error["error"]["message"] == (  # ... what the service would say
        "Unsupported value: 'minimal' is not supported with the 'gpt-5.1' model. "
        "Supported values are: 'none', 'low', 'medium', and 'high'.")
    with pytest.raises(ServiceRejected, match="'temperature' is not supported with this model"):
        make_backend("openai", model="gpt-5-mini", base_url=reasoning_server.url, send_sampling=True).complete(turn1)
    # a reasoning item it never issued, sent back as turn 1's
    backend = make_backend("openai", model="gpt-5-mini", base_url=reasoning_server.url)
    forged = {"role": "assistant", "content": "", "reasoning_items": [
        {"type": "reasoning", "id": "rs_0", "summary": [], "encrypted_content": "made-up"}],
        "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": TOOL_NAME, "arguments": "{}"}}]}
    turn2 = Request(messages=(*turn1.messages, forged, {"role": "tool", "tool_call_id": "call_1", "content": "ok"}),
                    tools=turn1.tools, tool_choice="none")
    rejected = reasoning_server.rejected
    out = backend.complete(turn2)  # refused, then sent without it (the answer says so)
    assert reasoning_server.rejected == rejected + 1
    assert out.meta["reasoning_items_dropped"] == "HTTP 400: The encrypted content for item rs_0 could not be verified."


def test_turn_two_carries_turn_one_reasoning_through_the_responses_api(reasoning_server, test_csv, tmp_path):
    from cpdagthink.method.conditions import CONDITIONS
    from cpdagthink.method.decoding import Decoding
    from cpdagthink.run.data import read_csv
    from cpdagthink.run.runner import run_config

    items = [i for i in read_csv(test_csv) if i.num_variables == 4][:3]
    backend = make_backend("openai", model="gpt-5.4-mini", base_url=reasoning_server.url, reasoning_effort="medium")
    result = run_config(configured("structured", cache_dir=tmp_path / "cache",
                                   decoding=Decoding(max_tokens_turn1=8192, max_tokens_answer=4096)),
                        backend, items, tmp_path / "run", progress=False)
    assert reasoning_server.rejected == 0 and set(reasoning_server.paths) == {"/v1/responses"}
    # the streaming runner sends an instance's turn 2 as soon as its turn 1 arrives: told apart by content, not order
    second = [b for b in reasoning_server.requests if any(i.get("type") == "function_call_output" for i in b["input"])]
    assert len(second) == 3 and len(reasoning_server.requests) == 6
    assert all(b["store"] is False and b["include"] == ["reasoning.encrypted_content"] for b in reasoning_server.requests)
    for body in second:  # turn 1's reasoning item, as the server issued it, right before the call it made
        kinds = [i.get("type", "message") for i in body["input"]]
        assert kinds == ["message", "message", "reasoning", "function_call", "function_call_output"]
        assert body["input"][2]["encrypted_content"] and body["tool_choice"] == "none"
    for record in result.records:
        assert record.prediction == record.oracle_label and record.emitted is not None
        for turn in record.turns:
            assert turn.meta["api"] == "responses" and turn.meta["reasoning_tokens"] == 512
            assert turn.reasoning.startswith("**Reading the premise**")  # the summary is the turn's reasoning
        assert record.turns[0].meta["schema_enforced"] is True
    records_text = (tmp_path / "run" / "records.jsonl").read_text()
    assert "encrypted_content" not in records_text  # carried through the cache, never recorded
    again = run_config(configured("structured", cache_dir=tmp_path / "cache",
                                  decoding=Decoding(max_tokens_turn1=8192, max_tokens_answer=4096)),
                       backend, items, tmp_path / "run2", progress=False)
    assert again.model_calls == 0 and len(reasoning_server.requests) == 6


def test_a_refused_turn_one_sends_no_turn_two(reasoning_server, test_csv, tmp_path):
    from cpdagthink.method.conditions import CONDITIONS
    from cpdagthink.run.data import read_csv
    from cpdagthink.run.runner import run_config

    items = read_csv(test_csv)[:3]
    backend = make_backend("openai", model="gpt-5.5", base_url=reasoning_server.url, api="chat")
    result = run_config(configured("structured", cache_dir=tmp_path / "cache"),
                        backend, items, tmp_path / "run", progress=False, abort_after=0)
    assert len(reasoning_server.requests) == 3 and result.model_calls == 3  # turn 1 only
    for record in result.records:
        assert record.rejected and len(record.turns) == 1
        assert record.turns[0].meta["next_turn"] == "not sent: this turn was refused"
        assert "Please use /v1/responses instead" in record.turns[0].rejected


def test_refusals_of_the_responses_api_are_recorded_as_rejected_and_stop_the_run(reasoning_server, test_csv, tmp_path):
    from cpdagthink.method.conditions import CONDITIONS
    from cpdagthink.run.data import read_csv
    from cpdagthink.run.runfolder import read_records
    from cpdagthink.run.runner import RunAborted, run_config

    backend = make_backend("openai", model="gpt-5-mini", base_url=reasoning_server.url, send_sampling=True)
    with pytest.raises(RunAborted, match="'temperature' is not supported with this model"):
        run_config(configured("structured", cache_dir=tmp_path / "cache"),
                   backend, read_csv(test_csv)[:6], tmp_path / "run", progress=False)
    records = read_records(tmp_path / "run")
    assert len(records) == 5 and all(r.rejected and r.answer is None for r in records)  # it stops at the fifth
    assert {r.turns[0].meta["api"] for r in records} == {"responses"} and set(reasoning_server.paths) == {"/v1/responses"}


# ----------------------------------------------------------------------------------------- hostile servers
def test_a_trickling_server_fails_within_the_timeout_as_a_whole():
    from reasoning_api_server import ReasoningAPIServer

    with ReasoningAPIServer(fault="trickle") as server:
        for api in ("chat", "responses"):
            backend = make_backend("openai", model="gpt-5-mini", base_url=server.url, timeout=3, retries=0, api=api)
            start = time.perf_counter()
            with pytest.raises(BackendError, match="did not answer within 3 s"):
                backend.complete(Request(messages=user("Hypothesis: A causes B.")))
            assert 2.9 < time.perf_counter() - start < 4.5  # one whole request, not 3 s per byte
            backend.close()


@pytest.mark.parametrize("fault", ["wrong_shape", "truncated_json"])
@pytest.mark.parametrize("api", ["chat", "responses"])
def test_a_malformed_200_is_the_servers_fault_and_retried(fault, api):
    from reasoning_api_server import ReasoningAPIServer

    request = Request(messages=user("Premise: A correlates with B.\nHypothesis: A directly causes B."))
    with ReasoningAPIServer(fault=fault, fault_times=1) as server:
        backend = make_backend("openai", model="gpt-5-mini", base_url=server.url, retries=1, backoff_base=0.01, api=api)
        out = backend.complete(request)
        assert out.text.endswith("Answer: NO") and out.meta["attempts"] == 2
    with ReasoningAPIServer(fault=fault) as server:
        backend = make_backend("openai", model="gpt-5-mini", base_url=server.url, retries=2, backoff_base=0.01, api=api)
        with pytest.raises(BackendError) as err:
            backend.complete(request)
        assert len(server.requests) == 3  # retried like a 5xx
        assert f"{server.url}: HTTP 200 but the body is not a well-formed answer" in str(err.value)


def test_a_huge_answer_is_stored_capped_and_flagged(test_csv, tmp_path):
    from reasoning_api_server import ReasoningAPIServer

    from cpdagthink.method.conditions import CONDITIONS
    from cpdagthink.method.decoding import Decoding
    from cpdagthink.run.data import read_csv
    from cpdagthink.run.runner import run_config

    with ReasoningAPIServer(fault="huge", huge_chars=4_000_000) as server:
        backend = make_backend("openai", model="gpt-5-mini", base_url=server.url, max_stored_chars=50_000)
        result = run_config(configured("baseline_enhanced", cache_dir=tmp_path / "cache",
                                       decoding=Decoding(max_tokens_turn1=2_000_000)),
                            backend, read_csv(test_csv)[:1], tmp_path / "run", progress=False)
    [turn] = result.records[0].turns
    assert len(turn.text) == 50_000 and turn.meta["truncated"]["text"] > 4_000_000
    assert len(turn.raw) == 50_000 and turn.meta["truncated"]["raw"] > 4_000_000
    assert (tmp_path / "run" / "records.jsonl").stat().st_size < 150_000
    with pytest.raises(ValueError, match="option max_stored_chars: Input should be greater than or equal to 1"):
        make_backend("openai", model="gpt-5-mini", base_url=server.url, max_stored_chars=0)


def _structured_run(server, items, folder, cache, **options):
    from cpdagthink.method.conditions import CONDITIONS
    from cpdagthink.method.decoding import Decoding
    from cpdagthink.run.runner import run_config

    backend = make_backend("openai", model="gpt-5.4-mini", base_url=server.url, reasoning_effort="medium", **options)
    return run_config(configured("structured", cache_dir=cache,
                                 decoding=Decoding(max_tokens_turn1=8192, max_tokens_answer=4096)),
                      backend, items, folder, progress=False)


def test_a_huge_reasoning_summary_is_capped_in_the_cache_and_in_what_turn_two_sends(test_csv, tmp_path):
    from reasoning_api_server import ReasoningAPIServer

    from cpdagthink.run.data import read_csv

    items = [i for i in read_csv(test_csv) if i.num_variables == 4][:1]
    with ReasoningAPIServer(summary_chars=3_000_000) as server:
        result = _structured_run(server, items, tmp_path / "run", tmp_path / "cache", max_stored_chars=40_000)
        assert server.rejected == 0 and len(server.requests) == 2
        assert server.request_bytes[1] < 200_000  # turn 2 carries turn 1's reasoning item, its summary capped
    [record] = result.records
    assert record.prediction == record.oracle_label
    assert record.turns[0].meta["truncated"]["reasoning_items[0].summary"] > 3_000_000
    cached = sum(p.stat().st_size for p in (tmp_path / "cache").rglob("*") if p.is_file())
    assert cached < 400_000, cached


def test_reasoning_items_without_encrypted_content_are_not_sent_back(test_csv, tmp_path):
    """With store=False the service cannot look an item up by its id: sent back, it refuses every turn 2."""
    from reasoning_api_server import ReasoningAPIServer

    from cpdagthink.run.data import read_csv

    items = [i for i in read_csv(test_csv) if i.num_variables == 4][:2]
    with ReasoningAPIServer(encrypted=False) as server:
        result = _structured_run(server, items, tmp_path / "run", tmp_path / "cache")
        assert server.rejected == 0 and len(server.requests) == 4
        assert all(i.get("type") != "reasoning" for body in server.requests for i in body["input"])  # any turn
    for record in result.records:
        assert not record.rejected and record.prediction == record.oracle_label
        assert record.turns[0].meta["reasoning_items_not_carried"] == "1 without encrypted content"


def test_reasoning_items_the_service_cannot_verify_are_dropped_and_the_answer_says_so(test_csv, tmp_path):
    """A cache replayed under another organisation's key: turn 1 comes from the cache, and the service cannot
    verify its reasoning items. Turn 2 is sent again without them, flagged, instead of being refused on
    every rerun."""
    import shutil

    from reasoning_api_server import ReasoningAPIServer

    from cpdagthink.run.data import read_csv

    items = [i for i in read_csv(test_csv) if i.num_variables == 4][:2]
    with ReasoningAPIServer() as server:
        _structured_run(server, items, tmp_path / "run", tmp_path / "cache")
        for entry in (tmp_path / "cache").rglob("*.json"):  # keep turn 1's entries (the tool calls) only
            if not json.loads(entry.read_text())["tool_calls"]:
                entry.unlink()
        server.forget_issued()
        shutil.rmtree(tmp_path / "run")
        asked = len(server.requests)
        result = _structured_run(server, items, tmp_path / "run", tmp_path / "cache")
        assert len(server.requests) - asked == 2 * len(items) and server.rejected == len(items)  # each turn 2 twice
    for record in result.records:
        assert not record.rejected and record.prediction == record.oracle_label
        assert "could not be verified" in record.turns[1].meta["reasoning_items_dropped"]


def test_output_items_without_a_type_are_the_servers_fault():
    from reasoning_api_server import ReasoningAPIServer

    request = Request(messages=user("Premise: A correlates with B.\nHypothesis: A directly causes B."))
    with ReasoningAPIServer(fault="typeless", fault_times=1) as server:
        backend = make_backend("openai", model="gpt-5-mini", base_url=server.url, retries=1, backoff_base=0.01)
        out = backend.complete(request)
        assert out.text.endswith("Answer: NO") and out.meta["attempts"] == 2  # retried, as a malformed 200
    with ReasoningAPIServer(fault="typeless") as server:
        backend = make_backend("openai", model="gpt-5-mini", base_url=server.url, retries=0)
        with pytest.raises(BackendError, match="HTTP 200 but the body is not a well-formed answer.*without a type"):
            backend.complete(request)


def test_a_refusal_is_the_answers_text_and_flagged():
    from reasoning_api_server import ReasoningAPIServer

    with ReasoningAPIServer(fault="refusal") as server:
        out = make_backend("openai", model="gpt-5-mini", base_url=server.url).complete(Request(messages=user("q")))
    assert out.text == "I can't help with that." and out.meta["refusal"] is True


def test_run_concurrently_returns_each_result_or_error():
    from cpdagthink.backends.transport import run_concurrently

    running = threading.Barrier(3, timeout=30)  # items 0, 1 and 2 are all in flight before 1 fails

    def work(x):
        running.wait()
        if x == 1:
            raise BackendError("one failed")
        time.sleep(0.3)
        return x * 10

    outcomes = run_concurrently(work, [0, 1, 2, 3], 3, threading.Event())
    # the running ones finish after the failure and are returned; the one not yet started is not started
    assert outcomes[0] == 0 and isinstance(outcomes[1], BackendError) and outcomes[2] == 20 and outcomes[3] is None


def test_answers_are_parsed_one_at_a_time():
    """The client builds its response types on first use, and two threads doing that at once can meet a
    half-built type (seen in the throughput benchmark's first chunk; 1 fresh process in 5 with 16 threads
    constructing a Response at once): workers read answers through one lock."""
    from cpdagthink.backends.openai_api.responses import typed

    flight = InFlight()

    class Kind:
        @classmethod
        def construct(cls, **data):
            with flight.inside(0.02):
                return "parsed"

    barrier = threading.Barrier(8)
    results = []
    threads = [threading.Thread(target=lambda: (barrier.wait(), results.append(typed(Kind, {})))) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == ["parsed"] * 8 and flight.peak == 1


def test_a_request_timing_out_every_attempt_leaves_its_instance_unanswered_and_the_rerun_asks_only_it(
        test_csv, tmp_path):
    from reasoning_api_server import ReasoningAPIServer

    from cpdagthink.run.data import read_csv
    from cpdagthink.run.runner import run_config

    items = read_csv(test_csv)[:6]
    slow = items[3].hypothesis
    with ReasoningAPIServer(fault="trickle", fault_when=json.dumps(slow)[1:-1], fault_times=1) as server:
        backend = make_backend("openai", model="gpt-5-mini", base_url=server.url, timeout=2, retries=0)
        first = run_config(configured("baseline_enhanced", cache_dir=tmp_path / "cache"), backend, items,
                           tmp_path / "run", progress=False)
        assert first.summary.status == "incomplete" and list(first.summary.not_answered) == [items[3].id]
        assert "did not answer within 2 s" in first.summary.not_answered[items[3].id]
        assert first.summary.message.startswith("finished with 1 instance not answered")
        assert [r.id for r in first.records] == [i.id for i in items if i is not items[3]]
        assert len(list((tmp_path / "cache").rglob("*.json"))) == 5  # every paid answer kept
        again = run_config(configured("baseline_enhanced", cache_dir=tmp_path / "cache"), backend, items,
                           tmp_path / "run", progress=False)
    assert again.model_calls == 1 and len(again.records) == 6 and len(server.requests) == 7
    assert again.summary.status == "finished" and again.summary.not_answered == {}
    assert slow in json.dumps(server.requests[-1])  # the one asked again is the one that timed out


# ----------------------------------------------------------------------------------------- real server (slow)
@pytest.fixture(scope="module")
def llama_server(tmp_path_factory):
    port = free_port()
    env = dict(os.environ)
    log_path = tmp_path_factory.mktemp("llama_server") / "server.log"
    log = open(log_path, "wb")  # a file, not a pipe: the server logs ~200 kB at load and would block on a pipe
    cmd = [sys.executable, "-m", "cpdagthink.backends.local", "--model", "smollm2-135m",
           "--chat_format", "chatml-function-calling", "--n_ctx", "4096", "--n_threads", "2",
           "--host", "127.0.0.1", "--port", str(port)]
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"llama_cpp.server exited {proc.returncode}: {log_path.read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(url + "/models", timeout=1) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("llama_cpp.server did not become ready within 60 s")
            time.sleep(0.3)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


@pytest.fixture(scope="module")
def server_backend(llama_server):
    # a generous bound: on two shared cores one request to this server has taken over 120 s under load
    backend = make_backend("openai", model="smollm2", base_url=llama_server, retries=1, timeout=600)
    yield backend
    backend.close()


@pytest.mark.slow
def test_real_server_plain_completion(server_backend):
    out = server_backend.complete(Request(messages=user("Say hi."), max_tokens=12))
    assert out.text and out.tool_calls == []
    assert out.prompt_tokens > 0 and 0 < out.completion_tokens <= 12 and out.latency_s > 0
    assert out.finish_reason in ("stop", "length")
    assert out.meta["served_model"] == "smollm2"
    assert SECRET not in json.dumps(server_backend.identity())


@pytest.mark.slow
def test_real_server_forced_tool_call(server_backend):
    req = Request(messages=user("Is the sky blue? Record the answer."), tools=(ANSWER_TOOL,),
                  tool_choice="record_answer", max_tokens=40)
    out = server_backend.complete(req)
    assert len(out.tool_calls) == 1 and out.tool_calls[0].name == "record_answer"
    assert json.loads(out.tool_calls[0].arguments)["answer"] in ("YES", "NO")
    assert out.meta["tool_choice_sent"] == "record_answer"


@pytest.mark.slow
def test_real_server_auto_tool_choice_plumbing(server_backend):
    req = Request(messages=({"role": "system", "content": "Call record_answer with your answer."},
                            {"role": "user", "content": "Is the sky blue?"}),
                  tools=(ANSWER_TOOL,), tool_choice="auto", max_tokens=40)
    out = server_backend.complete(req)
    assert out.tool_calls or out.text  # model quality is not under test, the plumbing is
    assert out.prompt_tokens > 0 and out.completion_tokens > 0


@pytest.mark.slow
def test_real_server_second_turn_with_tool_history(server_backend):
    msgs = (
        {"role": "user", "content": "Is the sky blue? Record the answer."},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "record_answer", "arguments": '{"answer": "YES"}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "recorded"},
        {"role": "user", "content": "Answer YES or NO."},
    )
    out = server_backend.complete(Request(messages=msgs, max_tokens=5))  # content null would be HTTP 500
    assert out.completion_tokens > 0


@pytest.mark.slow
@pytest.mark.parametrize("tool_choice", ["forced", "auto"])
def test_structured_condition_through_the_server(server_backend, test_csv, tmp_path, tool_choice):
    from cpdagthink.method.conditions import CONDITIONS
    from cpdagthink.method.decoding import Decoding
    from cpdagthink.run.data import read_csv
    from cpdagthink.run.runner import run_config

    items = [i for i in read_csv(test_csv) if i.num_variables == 3][:2]
    decoding = Decoding(tool_choice=tool_choice, max_tokens_turn1=200, max_tokens_answer=24)
    result = run_config(configured("structured", cache_dir=tmp_path / "cache", decoding=decoding, chunk_size=2),
                        server_backend, items, tmp_path / "run", progress=False)
    assert [r.id for r in result.records] == [i.id for i in items] and result.model_calls == 4
    for record in result.records:
        first = record.turns[0]
        assert first.meta["tool_choice_sent"] == ("record_causal_analysis" if tool_choice == "forced" else "auto")
        if tool_choice == "forced":  # the server constrains a named call to the tool's schema
            assert first.tool_calls and first.tool_calls[0].name == "record_causal_analysis"
        assert record.emitted is not None or record.emitted_error  # a truncated call is recorded, not raised
        assert record.turns[1].prompt_tokens > 0 and record.answer in ("YES", "NO", None)


# ----------------------------------------------------------------------------------------- served weights
class WeightsServer(LoopbackServer):
    """A server of one served name whose weights can change under it, as a vLLM or llama.cpp server restarted
    on another model file: ``models`` is what ``GET /v1/models`` lists, ``props`` what ``GET /props`` says
    (None: no such route), and each answer names the weights that made it (``weights``)."""

    def __init__(self, models: list[dict], props: dict | None = None, weights: str = "a"):
        self.models, self.props, self.weights = models, props, weights
        self.posts = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                if self.path == "/v1/models":
                    send_json(self, 200, {"object": "list", "data": server.models})
                elif self.path == "/props" and server.props is not None:
                    send_json(self, 200, server.props)
                else:
                    send_json(self, 404, {"error": {"message": "not found"}})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.posts += 1
                send_json(self, 200, {
                    "id": f"c{server.posts}", "object": "chat.completion", "created": 0, "model": body["model"],
                    "choices": [{"index": 0, "finish_reason": "stop", "message": {
                        "role": "assistant", "content": f"the answer of weights {server.weights}"}}],
                    "usage": {"prompt_tokens": 5, "completion_tokens": 5, "total_tokens": 10}})

        self.start(Handler)

    def restart_on(self, weights: str, models: list[dict], props: dict | None = None) -> None:
        self.weights, self.models, self.props = weights, models, props



def vllm_listing(name: str, root: str) -> list[dict]:
    return [{"id": name, "object": "model", "created": 0, "owned_by": "vllm", "root": root, "parent": None,
             "max_model_len": 4096}]


def test_a_server_restarted_on_other_weights_under_the_same_name_is_not_served_the_old_answers(tmp_path):
    from cpdagthink.run.cache import CallCache
    from cpdagthink.run.runner import CachedBackend

    request = Request(messages=user("is A a cause of B?"), max_tokens=16)
    with WeightsServer(vllm_listing("qwen", "/models/a")) as server:
        first = make_backend("openai", model="qwen", base_url=server.url)
        [(answer, hit)] = CachedBackend(first, CallCache(tmp_path)).complete_batch([request])
        assert answer.text == "the answer of weights a" and not hit
        assert first.identity()["served_weights"] == "/models/a" == first.served_weights
        assert first.provenance().served_weights == "/models/a"
        server.restart_on("b", vllm_listing("qwen", "/models/b"))  # same served name, other file
        second = make_backend("openai", model="qwen", base_url=server.url)
        [(answer, hit)] = CachedBackend(second, CallCache(tmp_path)).complete_batch([request])
        assert answer.text == "the answer of weights b" and not hit and server.posts == 2
        [(answer, hit)] = CachedBackend(second, CallCache(tmp_path)).complete_batch([request])
        assert answer.text == "the answer of weights b" and hit  # the new weights' answer is cached as theirs


def test_llama_cpp_servers_name_their_model_file_and_a_changed_one_is_another_model():
    listing = [{"id": "local", "object": "model", "created": 0, "owned_by": "llamacpp", "meta": {"n_params": 1}}]
    with WeightsServer(listing, props={"model_path": "/models/qwen3-8b-q4.gguf"}) as server:  # llama-server
        assert make_backend("openai", model="local", base_url=server.url).identity()["served_weights"] == \
            "/models/qwen3-8b-q4.gguf"
        # llama_cpp.server: one model, listed under its file's path, answering whatever name a request gives
        server.restart_on("b", [{"id": "/models/other.gguf", "object": "model", "owned_by": "me", "permissions": []}])
        assert make_backend("openai", model="local", base_url=server.url).identity()["served_weights"] == \
            "/models/other.gguf"


def test_a_server_that_says_nothing_new_leaves_the_identity_and_so_every_cache_key_unchanged():
    """OpenAI's own /v1/models lists names alone; a vLLM server of the hub id it loaded names nothing else;
    a server without the route says nothing: each keeps the identity (and cache) of before."""
    openai_listing = [{"id": n, "object": "model", "created": 1686935002, "owned_by": "system"}
                      for n in ("gpt-4o-mini", "gpt-4.1", "o3-mini")]
    silent = Stub()  # answers no GET at all
    try:
        before = make_backend("openai", model="gpt-4o-mini", base_url=silent.url).identity()
    finally:
        silent.close()
    assert "served_weights" not in before
    for listing in (openai_listing, vllm_listing("gpt-4o-mini", "gpt-4o-mini"), []):
        with WeightsServer(listing) as server:
            backend = make_backend("openai", model="gpt-4o-mini", base_url=server.url)
            assert backend.identity() == before
    with WeightsServer(vllm_listing("gpt-4o-mini", "gpt-4o-mini")) as server:  # recorded, not keyed
        assert make_backend("openai", model="gpt-4o-mini", base_url=server.url).provenance().served_weights == \
            "gpt-4o-mini"


def test_endpoints_that_serve_different_weights_under_one_name_are_refused():
    with WeightsServer(vllm_listing("qwen", "/models/a")) as a, WeightsServer(vllm_listing("qwen", "/models/b")) as b:
        with pytest.raises(BackendError, match="the endpoints serve different weights under 'qwen'"):
            make_backend("openai", model="qwen", base_url=[a.url, b.url])


def test_a_run_folder_of_the_former_weights_is_refused_with_what_changed(test_csv, tmp_path):
    from cpdagthink.run.data import read_csv
    from cpdagthink.run.runfolder import read_metadata
    from cpdagthink.run.runner import RunMismatchError, run_config

    items = [i for i in read_csv(test_csv) if i.num_variables == 3][:1]
    config = configured("baseline_enhanced", cache_dir=tmp_path / "cache", backend="openai", model="qwen")
    with WeightsServer(vllm_listing("qwen", "/models/a")) as server:
        run_config(config, make_backend("openai", model="qwen", base_url=server.url), items, tmp_path / "run",
                   progress=False)
        assert read_metadata(tmp_path / "run").served_weights == "/models/a"
        posts = server.posts
        server.restart_on("b", vllm_listing("qwen", "/models/b"))
        with pytest.raises(RunMismatchError, match="now serves other weights under the same model name") as refused:
            run_config(config, make_backend("openai", model="qwen", base_url=server.url), items, tmp_path / "run",
                       progress=False)
        assert '"/models/b" asked, "/models/a" in the folder' in str(refused.value) and server.posts == posts


# ----------------------------------------------------------------------------------------- what no retry mends
@pytest.mark.parametrize("kind, status", [("auth", 401), ("quota", 429)])
def test_a_refused_key_or_a_spent_quota_stops_the_run_at_its_first_call_without_a_retry(kind, status, test_csv,
                                                                                         tmp_path):
    from loopback_api import Faults, LoopbackAPI

    from cpdagthink.run.data import read_csv
    from cpdagthink.run.runner import run_config

    with LoopbackAPI(faults=Faults(rate=1.0, kinds=(kind,), times=1 << 30)) as server:
        backend = make_backend("openai", model="gpt-4.1-mini", base_url=server.url, max_concurrency=1, retries=4)
        with pytest.raises(BackendError, match=f"HTTP {status}.*no retry mends it") as raised:
            run_config(configured("baseline_enhanced", cache_dir=tmp_path / "cache"), backend,
                       read_csv(test_csv)[:5], tmp_path / "run", progress=False)
    assert not isinstance(raised.value, RetriesExhausted)
    # no request retried; at most those already on a lane (4 a slot) went out before the run stopped
    assert len({json.dumps(s.instance) for s in server.log}) == len(server.log) <= 4
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["status"] == "error" and summary["not_answered"] == {}
