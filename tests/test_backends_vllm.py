"""Offline vLLM backend: request construction and output parsing, checked without vLLM or a GPU."""

from __future__ import annotations

import re
import sys

import pytest

from cpdagthink.backends import make_backend
from cpdagthink.backends.base import BackendError
from cpdagthink.backends.profiles import profile_for, with_overrides
from cpdagthink.backends.toolcalls import envelope_regex, envelope_text
from cpdagthink.backends.toolcalls import completion_from_text
from cpdagthink.backends.vllm_offline import engine_kwargs, prompt_for, sampling_kwargs, template_supports_thinking
from cpdagthink.method.chat import Constraint, Request, ToolCall
from cpdagthink.method.schema import TOOL_NAME, analysis_regex, tool_definition


class FakeTokenizer:
    chat_template = "{% if enable_thinking %}...{% endif %}"

    def __init__(self):
        self.calls = []
        self.encoded = 0

    def apply_chat_template(self, messages, **kwargs):
        self.calls.append((messages, kwargs))
        return "PROMPT"

    def encode(self, text, add_special_tokens=True):
        """10 token ids for the first prompt, 11 for the next, ..."""
        assert text == "PROMPT" and not add_special_tokens  # the template wrote the prompt whole
        self.encoded += 1
        return list(range(9 + self.encoded))


class FakeLLM:
    """Records what generate() got; answers every prompt with ``text`` (a completion per token id list)."""

    def __init__(self, text="Answer: YES"):
        self.calls = []
        self.text = text

    def generate(self, prompts, params, use_tqdm=False):
        from types import SimpleNamespace

        self.calls.append((prompts, params))
        return [SimpleNamespace(prompt_token_ids=p["prompt_token_ids"],
                                outputs=[SimpleNamespace(text=self.text, token_ids=list(range(3 + 2 * i)),
                                                         finish_reason="stop")])
                for i, p in enumerate(prompts)]


def fake_backend(text="Answer: YES", max_model_len=4096, model="Qwen/Qwen2.5-7B-Instruct"):
    """A VLLMBackend without an engine: the batching, checks and bookkeeping are under test."""
    from types import SimpleNamespace

    from cpdagthink.backends.vllm_offline import VLLMBackend

    backend = VLLMBackend.__new__(VLLMBackend)
    backend.tokenizer, backend.llm, backend.thinking_supported = FakeTokenizer(), FakeLLM(text), False
    backend.profile, backend.reasoning_parser = profile_for(model), None
    backend.max_model_len = max_model_len
    backend._vllm = SimpleNamespace(SamplingParams=lambda **kw: kw)
    backend._structured = dict
    return backend


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
    backend = fake_backend()
    outs = backend.complete_batch([Request(messages=({"role": "user", "content": str(i)},)) for i in range(3)])
    assert len(backend.llm.calls) == 1
    assert [(o.prompt_tokens, o.completion_tokens) for o in outs] == [(10, 3), (11, 5), (12, 7)]
    assert all(o.text == "Answer: YES" and o.meta["batch_size"] == 3 for o in outs)


def test_a_budget_that_does_not_fit_the_context_is_refused_before_generating():
    """vLLM would stop at max_model_len with finish_reason 'length', as if the budget had run out."""
    backend = fake_backend(max_model_len=16384)
    fits = Request(messages=({"role": "user", "content": "q"},), max_tokens=16384 - 10)
    cut = Request(messages=({"role": "user", "content": "q"},), max_tokens=16384)
    outs = backend.complete_batch([fits, cut])
    prompts, _ = backend.llm.calls[-1]
    assert len(prompts) == 1 and "rejected" not in outs[0].meta and outs[0].text == "Answer: YES"
    assert outs[1].text == "" and outs[1].meta["rejected"].startswith(
        "prompt of 11 tokens + max_tokens 16384 exceed max_model_len 16384")
    assert "max_model_len >= 16395" in outs[1].meta["rejected"]
    assert backend.complete(cut).meta["rejected"] and len(backend.llm.calls) == 1  # nothing generated for it


def test_forced_tool_choice_constrains_the_output_to_the_call():
    """Offline vLLM takes no tool_choice: a forced one becomes the envelope of the tool's schema."""
    tool = tool_definition()
    base = dict(messages=(), tools=(tool,), max_tokens=9)
    forced = sampling_kwargs(Request(**base, tool_choice=TOOL_NAME))["structured_outputs"]["regex"]
    assert forced.startswith(r"<tool_call>\n")
    call = envelope_text(TOOL_NAME, '{"variables":["A","B"],"skeleton":[["A","B"]],"separating_sets":[],'
                                    '"v_structures":[],"directed_edges":[],"undirected_edges":[["A","B"]]}')
    assert re.fullmatch(forced, call) and not re.fullmatch(forced, "Answer: YES")
    assert sampling_kwargs(Request(**base, tool_choice="required"))["structured_outputs"]["regex"] == forced
    assert "structured_outputs" not in sampling_kwargs(Request(**base, tool_choice="auto"))
    narrowed = Constraint(regex=analysis_regex(["A", "B"]), tool=TOOL_NAME)
    assert sampling_kwargs(Request(**base, tool_choice=TOOL_NAME, constraint=narrowed))["structured_outputs"] == {
        "regex": envelope_regex(TOOL_NAME, narrowed.regex)}
    with pytest.raises(BackendError, match="not among the offered tools"):
        sampling_kwargs(Request(**base, tool_choice="other_tool"))


def test_tool_choice_none_bans_the_call_and_parses_none():
    tool = tool_definition()
    kwargs = sampling_kwargs(Request(messages=(), tools=(tool,), tool_choice="none"))
    assert kwargs["bad_words"] == ["<tool_call>"] and "structured_outputs" not in kwargs
    assert sampling_kwargs(Request(messages=(), tools=(tool,), tool_choice="none"), "mistral")["bad_words"] == [
        "[TOOL_CALLS]"]
    assert "bad_words" not in sampling_kwargs(Request(messages=(), tools=(tool,), tool_choice="auto"))
    with pytest.raises(BackendError, match="contradicts tool_choice 'none'"):
        sampling_kwargs(Request(messages=(), tools=(tool,), tool_choice="none",
                                constraint=Constraint(regex="x", tool=TOOL_NAME)))
    written = envelope_text(TOOL_NAME, "{}") + "\nAnswer: NO"
    backend = fake_backend(text=written)
    none, auto = backend.complete_batch([Request(messages=(), tools=(tool,), tool_choice=c) for c in ("none", "auto")])
    assert none.tool_calls == [] and none.text == written
    assert auto.tool_calls == [ToolCall(TOOL_NAME, "{}")] and auto.text == "Answer: NO"
    assert backend.llm.calls[-1][1][0]["bad_words"] == ["<tool_call>"]


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
