"""The OpenAI backend's direct calls (:mod:`cpdagthink.backends.openai_api.wire`) send what the openai client's
typed ``create`` sends, byte for byte, and read its answers into the same typed objects: checked against the
installed client itself, for every condition's requests under each profile and API the backend speaks."""

from __future__ import annotations

import json

import httpx
import openai
import pytest

from condition_requests import DECODINGS, condition_requests, rows
from cpdagthink.backends.openai_api.backend import backend_profile
from cpdagthink.backends.openai_api.payloads import chat_kwargs, responses_kwargs
from cpdagthink.backends.openai_api.wire import call_for
from cpdagthink.method.chat import Request
from cpdagthink.method.conditions import CONDITIONS
from cpdagthink.method.decoding import Decoding

CHAT = {"id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": "served-2025",
        "system_fingerprint": "fp_1",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": None, "reasoning_content": "thought", "some_extension": {"k": [1]},
            "tool_calls": [{"id": "call_0", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}}],
        "usage": {"prompt_tokens": 9, "completion_tokens": 3, "total_tokens": 12,
                  "completion_tokens_details": {"reasoning_tokens": 2}}}
RESPONSE = {"id": "resp_1", "object": "response", "created_at": 0, "model": "gpt-5-mini-2025", "status": "completed",
            "output": [{"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "why"}],
                        "encrypted_content": "opaque"},
                       {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
                        "content": [{"type": "output_text", "text": "Answer: NO", "annotations": []}]}],
            "usage": {"input_tokens": 5, "output_tokens": 7, "output_tokens_details": {"reasoning_tokens": 4}}}
# (model, regex mode, API): the chat API of a generic service and of a vLLM server (regex and thinking switch in
# extra_body), a reasoning family's chat API (reasoning_effort) and its Responses API
SETUPS = [("gpt-4.1-mini", "none", "chat"), ("Qwen/Qwen3-8B", "vllm", "chat"), ("gpt-5-mini", "none", "chat"),
          ("gpt-5-mini", "none", "responses")]
# the only header that differs: the client's own mark that ``with_raw_response`` asked for its raw wrapper
RAW_MARK = "x-stainless-raw-response"


class Service:
    """An httpx transport that keeps every request and answers each with ``CHAT`` or ``RESPONSE``."""

    def __init__(self) -> None:
        self.sent: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.sent.append(request)
        return httpx.Response(200, json=RESPONSE if request.url.path.endswith("/responses") else CHAT)

    def client(self) -> openai.OpenAI:
        return openai.OpenAI(api_key="sk-wire-test", base_url="http://wire.test/v1", max_retries=0,
                             http_client=httpx.Client(transport=httpx.MockTransport(self)))


def kwargs_for(request: Request, model: str, regex_mode: str, api: str) -> dict:
    profile = backend_profile(model, regex_mode, token_param=None, thinking_param=None, reasoning_parser=None,
                              send_sampling=None, api=api)
    if api == "responses":
        return responses_kwargs(request, model, profile=profile, reasoning_effort="low")[0]
    return chat_kwargs(request, model, profile=profile, regex_mode=regex_mode, reasoning_effort="low")[0]


def every_request(test_csv) -> list[Request]:
    """Every request of every condition on a row under each decoding, and a turn 2 carrying reasoning items."""
    built = [r for instance in rows(test_csv)[:1] for name in CONDITIONS for settings in DECODINGS.values()
             for r in condition_requests(name, instance, Decoding(temperature=0.7, **settings)).values()]
    carried = {"role": "assistant", "content": "", "reasoning_items": [
        {"type": "reasoning", "id": "rs_0", "summary": [{"type": "summary_text", "text": "s"}],
         "encrypted_content": "opaque"}],
        "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}
    first = built[0].messages
    return [*built, Request(messages=(*first, carried, {"role": "tool", "tool_call_id": "call_1", "content": "ok"}))]


@pytest.mark.parametrize("model,regex_mode,api", SETUPS)
def test_the_body_on_the_wire_is_the_typed_creates_byte_for_byte(test_csv, model, regex_mode, api):
    service = Service()
    client = service.client()
    create = client.responses.with_raw_response.create if api == "responses" else \
        client.chat.completions.with_raw_response.create
    distinct = {json.dumps(k): k for k in (kwargs_for(r, model, regex_mode, api) for r in every_request(test_csv))}
    for kwargs in distinct.values():
        create(**kwargs)
        call_for(api, kwargs).send(client)
        typed, direct = service.sent[-2:]
        assert direct.content == typed.content and direct.url == typed.url
        assert {k: v for k, v in typed.headers.items() if k != RAW_MARK} == dict(direct.headers.items())
    bodies = [json.loads(r.content) for r in service.sent]
    assert {"tools", "tool_choice"} <= set().union(*bodies) and len(bodies) > 50  # tool calls forced and not
    if regex_mode == "vllm":  # extra_body's fields merged into the body, after create's
        assert all(list(b)[-1] in ("structured_outputs", "chat_template_kwargs") for b in bodies)


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_an_answer_is_read_into_the_typed_creates_object(api):
    service = Service()
    client = service.client()
    kwargs = kwargs_for(Request(messages=({"role": "user", "content": "q"},)), "gpt-5-mini", "none", api)
    typed = (client.responses if api == "responses" else client.chat.completions).with_raw_response.create(**kwargs)
    call = call_for(api, kwargs)
    answer = call.read(call.send(client))
    assert type(answer) is type(typed.parse()) and answer.model_dump() == typed.parse().model_dump()
    if api == "chat":  # a service's own fields are kept as the client keeps them (the reasoning is read from one)
        assert answer.choices[0].message.model_dump(exclude_none=True)["reasoning_content"] == "thought"


@pytest.mark.parametrize("body,error", [(b"[1, 2]", "JSON list, not an object"), (b'{"choices": [', "Expecting value")])
def test_a_body_that_is_not_a_json_object_is_a_value_error(body, error):
    call = call_for("chat", {"model": "m", "messages": []})
    with pytest.raises(ValueError, match=error):
        call.read(httpx.Response(200, content=body))


def test_a_keyword_create_does_not_take_is_refused_as_create_refuses_it():
    with pytest.raises(TypeError, match="max_output_tokens"):
        call_for("chat", {"model": "m", "messages": [], "max_output_tokens": 5})
    assert call_for("chat", {"model": "m", "messages": [], "extra_body": {"x": 1}}).options == {
        "security": {"bearer_auth": True}, "extra_json": {"x": 1}}
