"""Offline vLLM backend: request construction and output parsing, checked without vLLM or a GPU."""

from __future__ import annotations

import sys

import pytest

from cpdagthink.backends import make_backend
from cpdagthink.backends.base import BackendError, Constraint, Request, ToolCall
from cpdagthink.backends.toolcalls import envelope_regex, envelope_text
from cpdagthink.backends.profiles import profile_for, with_overrides
from cpdagthink.backends.vllm_offline import (
    completion_from_text,
    engine_kwargs,
    prompt_for,
    sampling_kwargs,
    template_supports_thinking,
)
from cpdagthink.schema import TOOL_NAME, analysis_regex, tool_definition


class FakeTokenizer:
    chat_template = "{% if enable_thinking %}...{% endif %}"

    def __init__(self):
        self.calls = []

    def apply_chat_template(self, messages, **kwargs):
        self.calls.append((messages, kwargs))
        return "PROMPT"


def test_sampling_kwargs_wrap_tool_constraints_in_the_envelope():
    rx = analysis_regex(["A", "B"])
    req = Request(messages=(), constraint=Constraint(regex=rx, tool=TOOL_NAME), temperature=0.6, top_p=0.95,
                  top_k=20, min_p=0.01, seed=7, max_tokens=99)
    assert sampling_kwargs(req) == {
        "temperature": 0.6, "top_p": 0.95, "top_k": 20, "min_p": 0.01, "seed": 7, "max_tokens": 99,
        "structured_outputs": {"regex": envelope_regex(TOOL_NAME, rx)},
    }
    mistral = sampling_kwargs(req, "mistral")["structured_outputs"]["regex"]
    assert mistral == envelope_regex(TOOL_NAME, rx, style="mistral") and mistral.startswith(r"\[TOOL_CALLS\]")
    plain = Request(messages=(), constraint=Constraint(regex="(YES|NO)"), max_tokens=3)
    assert sampling_kwargs(plain)["structured_outputs"] == {"regex": "(YES|NO)"}
    assert "structured_outputs" not in sampling_kwargs(Request(messages=()))


def test_prompt_for_uses_the_chat_template_with_tools_and_thinking():
    tok = FakeTokenizer()
    tools = (tool_definition(["A", "B"]),)
    msgs = (
        {"role": "user", "content": "premise"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": TOOL_NAME, "arguments": '{"variables": ["A"]}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "digraph {}"},
    )
    assert prompt_for(tok, Request(messages=msgs, tools=tools, thinking=False)) == "PROMPT"
    messages, kwargs = tok.calls[-1]
    assert kwargs == {"tools": [tools[0]], "add_generation_prompt": True, "enable_thinking": False, "tokenize": False}
    assert messages[1]["content"] == ""  # never None
    assert messages[1]["tool_calls"][0]["function"]["arguments"] == {"variables": ["A"]}  # dict for tojson
    prompt_for(tok, Request(messages=msgs[:1]))
    assert tok.calls[-1][1]["tools"] is None and tok.calls[-1][1]["enable_thinking"] is True
    # unparseable arguments are written back verbatim rather than quoted by tojson
    bad = ({"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "f", "arguments": "{oops"}}]},)
    prompt_for(tok, Request(messages=bad))
    assert tok.calls[-1][0][0] == {"role": "assistant", "content": envelope_text("f", "{oops")}
    assert template_supports_thinking(tok) and not template_supports_thinking(object())


def test_completion_from_text_splits_reasoning_and_tool_calls():
    call = envelope_text(TOOL_NAME, '{"variables": ["A", "B"]}')
    out = completion_from_text(f"<think>\nA and B are adjacent.\n</think>\n\n{call}", prompt_tokens=10,
                               completion_tokens=20, finish_reason="stop", latency_s=1.5)
    assert out.reasoning == "A and B are adjacent."
    assert out.tool_calls == [ToolCall(name=TOOL_NAME, arguments='{"variables": ["A", "B"]}')]
    assert out.text == "" and out.raw.startswith("<think>") and out.prompt_tokens == 10
    started = completion_from_text("thinking...</think>YES", prompt_tokens=1, completion_tokens=2,
                                   finish_reason="stop", latency_s=0.1, thinking_started=True)
    assert started.reasoning == "thinking..." and started.text == "YES"
    plain = completion_from_text("NO", prompt_tokens=1, completion_tokens=1, finish_reason="stop", latency_s=0.1)
    assert plain.reasoning is None and plain.text == "NO"


def test_engine_kwargs_take_the_family_reasoning_parser():
    qwen = engine_kwargs("Qwen/Qwen3.5-27B", profile_for("Qwen/Qwen3.5-27B"), revision="abc123")
    assert qwen["reasoning_parser"] == "qwen3" and qwen["revision"] == "abc123" and qwen["tensor_parallel_size"] == 2
    assert engine_kwargs("Qwen/Qwen3-8B", profile_for("Qwen/Qwen3-8B"))["reasoning_parser"] == "qwen3"
    off = with_overrides(profile_for("Qwen/Qwen3-8B"), reasoning_parser="")
    assert "reasoning_parser" not in engine_kwargs("Qwen/Qwen3-8B", off)
    assert "reasoning_parser" not in engine_kwargs("Qwen/Qwen2.5-7B-Instruct", profile_for("Qwen/Qwen2.5-7B-Instruct"))
    assert engine_kwargs("m", profile_for("m"), enforce_eager=True)["enforce_eager"] is True


def test_a_chunk_keeps_per_request_token_counts():
    """One generate() call over a chunk; each completion carries its own prompt and completion counts."""
    from types import SimpleNamespace

    from cpdagthink.backends.vllm_offline import VLLMBackend

    class FakeLLM:
        def __init__(self):
            self.calls = 0

        def generate(self, prompts, params, use_tqdm=False):
            self.calls += 1
            return [SimpleNamespace(prompt_token_ids=list(range(10 + i)),
                                    outputs=[SimpleNamespace(text="Answer: YES", token_ids=list(range(3 + 2 * i)),
                                                             finish_reason="stop")])
                    for i, _ in enumerate(prompts)]

    backend = VLLMBackend.__new__(VLLMBackend)  # no engine: the batching and bookkeeping are under test
    backend.tokenizer, backend.llm, backend.thinking_supported = FakeTokenizer(), FakeLLM(), False
    backend.profile, backend.reasoning_parser = profile_for("Qwen/Qwen2.5-7B-Instruct"), None
    backend._vllm = SimpleNamespace(SamplingParams=lambda **kw: kw)
    backend._structured = dict
    outs = backend.complete_batch([Request(messages=({"role": "user", "content": str(i)},)) for i in range(3)])
    assert backend.llm.calls == 1
    assert [(o.prompt_tokens, o.completion_tokens) for o in outs] == [(10, 3), (11, 5), (12, 7)]
    assert all(o.text == "Answer: YES" and o.meta["batch_size"] == 3 for o in outs)


def test_missing_vllm_gives_the_install_command(monkeypatch):
    monkeypatch.setitem(sys.modules, "vllm", None)  # makes `import vllm` raise ImportError even if installed
    with pytest.raises(BackendError) as err:
        make_backend("vllm", model="Qwen/Qwen3-8B")
    assert "pip install -e '.[vllm]'" in str(err.value)
    assert "conda env create -f environment-vllm.yml" in str(err.value)


def test_environment_file_pins_the_gpu_env():
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "environment-vllm.yml").read_text()
    assert "python=3.11" in text and "-e .[api,book,test,vllm]" in text
