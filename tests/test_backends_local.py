"""Local llama.cpp backend, the Hermes tool-call envelope, and the backend registry.

The slow tests run real models on CPU (SmolLM2-135M for most, one short Qwen2.5-0.5B check). A constrained
completion that ``re.fullmatch``es the schema regex is the proof that the outlines constraint is active.
"""

from __future__ import annotations

import json
import re

import pytest

from cpdagthink.backends import BACKENDS, make_backend
from cpdagthink.backends.base import BackendError
from cpdagthink.backends.toolcalls import (
    chat_messages,
    envelope_regex,
    envelope_text,
    parse_tool_calls,
    split_reasoning,
)
from cpdagthink.method.chat import Constraint, Request, ToolCall
from cpdagthink.method.schema import TOOL_NAME, analysis_regex, instance_model, parse_analysis, tool_definition

VARS = ["A", "B"]
SYSTEM = "You analyse causal structure. Answer with the requested tool call."
PREMISE = "Suppose there is a closed system of 2 variables, A and B. A correlates with B. Record the causal analysis."


def analysis_request(**kw) -> Request:
    base = dict(
        messages=({"role": "system", "content": SYSTEM}, {"role": "user", "content": PREMISE}),
        tools=(tool_definition(VARS),),
        tool_choice=TOOL_NAME,
        constraint=Constraint(regex=analysis_regex(VARS), tool=TOOL_NAME),
        max_tokens=300,
    )
    base.update(kw)
    return Request(**base)


# ----------------------------------------------------------------------------------------- envelope (fast)
def test_envelope_regex_matches_envelope_text_and_nothing_looser():
    rx = envelope_regex(TOOL_NAME, analysis_regex(VARS))
    args = json.dumps({"variables": ["A", "B"], "skeleton": [["A", "B"]], "separating_sets": [],
                       "v_structures": [], "directed_edges": [], "undirected_edges": [["A", "B"]]})
    assert re.fullmatch(rx, envelope_text(TOOL_NAME, args))
    assert not re.fullmatch(rx, envelope_text("other_tool", args))
    assert not re.fullmatch(rx, envelope_text(TOOL_NAME, args.replace('"B"', '"C"')))
    assert not re.fullmatch(rx, "Sure! " + envelope_text(TOOL_NAME, args))
    assert envelope_regex("a.b", "x") == r'<tool_call>\n\{"name": "a\.b", "arguments": (?:x)\}\n</tool_call>'


def test_parse_tool_calls_keeps_text_raw_arguments_and_never_raises():
    good = envelope_text("f", '{"x": 1}')
    text, calls = parse_tool_calls(f"Before.\n{good}\nAfter.")
    assert text == "Before.\n\nAfter."
    assert calls == [ToolCall(name="f", arguments='{"x": 1}')]
    # malformed JSON inside: the raw arguments text is kept for the caller's error record
    text, calls = parse_tool_calls('<tool_call>\n{"name": "f", "arguments": {"x": [1, }}\n</tool_call>')
    assert calls == [ToolCall(name="f", arguments='{"x": [1, }')]
    with pytest.raises(ValueError):
        json.loads(calls[0].arguments)
    # unterminated (max_tokens hit mid-call), several calls, garbage, empty input
    _, calls = parse_tool_calls(good + "\n" + '<tool_call>\n{"name": "g", "arguments": {"y": ')
    assert [c.name for c in calls] == ["f", "g"]
    _, calls = parse_tool_calls("<tool_call>not json at all</tool_call>")
    assert calls == [ToolCall(name="", arguments="not json at all")]
    _, calls = parse_tool_calls('<tool_call>{"arguments": {"z": 2}, "name": "h"}</tool_call>')
    assert calls == [ToolCall(name="h", arguments='{"z": 2}')]
    assert parse_tool_calls(None) == ("", [])
    assert parse_tool_calls("plain YES") == ("plain YES", [])


def test_split_reasoning():
    assert split_reasoning("<think>\nhmm\n</think>\n\nYES") == ("hmm", "YES")
    assert split_reasoning("hmm</think>YES", started=True) == ("hmm", "YES")
    assert split_reasoning("YES") == (None, "YES")
    assert split_reasoning("<think>never closed") == ("never closed", "")


def test_chat_messages_content_never_null_and_ids_linked():
    msgs = chat_messages(
        [
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": None,
             "tool_calls": [{"function": {"name": "f", "arguments": '{"a": 1}'}}]},
            {"role": "tool", "content": "ok"},
        ],
        arguments_as="dict",
    )
    assert msgs[1]["content"] == ""
    assert msgs[1]["tool_calls"][0] == {"id": "call_0", "type": "function", "function": {"name": "f", "arguments": {"a": 1}}}
    assert msgs[2]["tool_call_id"] == "call_0"


def test_registry():
    assert set(BACKENDS) >= {"local", "openai", "vllm"}
    with pytest.raises(ValueError, match="local.*openai.*vllm"):
        make_backend("nope")


def test_fallback_rendering_for_templates_without_tools():
    from cpdagthink.backends.local.chat_template import fallback_messages

    msgs = chat_messages(
        [
            {"role": "system", "content": "S"},
            {"role": "user", "content": "U"},
            {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "f", "arguments": "{}"}}]},
            {"role": "tool", "content": "R1"},
            {"role": "tool", "content": "R2"},
        ]
    )
    out = fallback_messages(msgs, [{"type": "function", "function": {"name": "f"}}])
    assert [m["role"] for m in out] == ["system", "user", "assistant", "user"]
    assert out[0]["content"].startswith("S\n\n# Tools") and '"name": "f"' in out[0]["content"]
    assert out[2]["content"] == envelope_text("f", "{}")
    assert out[3]["content"] == "<tool_response>\nR1\n</tool_response>\n<tool_response>\nR2\n</tool_response>"


# ----------------------------------------------------------------------------------------- SmolLM2 (slow)
@pytest.mark.slow
def test_unconstrained_chat_completion(smol):
    req = Request(messages=({"role": "user", "content": "Say hello."},), max_tokens=16, thinking=False)
    out = smol.complete(req)
    assert out.text and out.raw
    assert out.prompt_tokens > 5 and 0 < out.completion_tokens <= 16
    assert out.latency_s > 0 and out.finish_reason in ("stop", "length")
    assert out.meta["constrained"] is False and out.meta["thinking"] == "off"
    ident = smol.identity()
    assert ident["backend"] == "local" and ident["model"] == "smollm2-135m"
    assert ident["gguf_sha256"] == "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
    assert ident["tool_format"] == "system-prompt-hermes" and ident["thinking"] == "unsupported"
    # the build's kernels, which its outputs depend on (another CPU's build sums differently)
    assert ident["llama_cpp_system"] == smol._llama_cpp.llama_print_system_info().decode()


@pytest.mark.slow
def test_constrained_tool_call_matches_regex_and_parses(smol):
    req = analysis_request()
    out = smol.complete(req)
    rx = envelope_regex(TOOL_NAME, analysis_regex(VARS))
    assert re.fullmatch(rx, out.raw), out.raw  # only possible if the constraint is active
    assert out.finish_reason == "stop"
    assert len(out.tool_calls) == 1 and out.tool_calls[0].name == TOOL_NAME
    analysis = parse_analysis(out.tool_calls[0].arguments)
    instance_model(tuple(VARS)).model_validate_json(out.tool_calls[0].arguments)  # the constraint's names
    assert set(analysis.variables) <= set(VARS)
    assert out.meta["thinking"] == "unsupported"  # requested (default True) but SmolLM2 cannot think


@pytest.mark.slow
def test_turn_two_renders_tool_history(smol):
    first = envelope_text(TOOL_NAME, '{"variables": ["A", "B"]}')
    req = Request(
        messages=(
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": PREMISE},
            {"role": "assistant", "content": "", "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": TOOL_NAME, "arguments": '{"variables": ["A", "B"]}'}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "digraph CPDAG {\n  A -> B [dir=none];\n}"},
            {"role": "user", "content": "Does A cause B? Answer YES or NO."},
        ),
        tools=(tool_definition(VARS),),
        constraint=Constraint(regex="(YES|NO)"),
        max_tokens=4,
    )
    prompt = smol.render(req)
    assert first in prompt and "<tool_response>\ndigraph CPDAG" in prompt
    out = smol.complete(req)
    assert out.raw in ("YES", "NO") and out.text == out.raw and out.tool_calls == []


@pytest.mark.slow
def test_forced_tool_choice_without_constraint_uses_the_tool_schema(smol):
    tool = {"type": "function", "function": {"name": "answer", "parameters": {
        "type": "object", "properties": {"value": {"type": "string", "enum": ["YES", "NO"]}},
        "required": ["value"], "additionalProperties": False}}}
    req = Request(messages=({"role": "user", "content": "Is the sky blue?"},), tools=(tool,),
                  tool_choice="answer", max_tokens=40)
    out = smol.complete(req)
    assert out.meta["constrained"] and len(out.tool_calls) == 1
    assert json.loads(out.tool_calls[0].arguments)["value"] in ("YES", "NO")


@pytest.mark.slow
def test_processor_failure_is_loud_not_silently_unconstrained(smol, monkeypatch):
    from outlines.backends.outlines_core import OutlinesCoreLogitsProcessor

    def boom(self, input_ids, logits):
        raise RuntimeError("numba missing (simulated)")

    monkeypatch.setattr(OutlinesCoreLogitsProcessor, "process_logits", boom)
    monkeypatch.setattr(smol, "jump_forward", False)  # the processor runs only on the plain path
    with pytest.raises(BackendError, match="simulated"):
        smol.complete(Request(messages=({"role": "user", "content": "Hi"},), constraint=Constraint(regex="(YES|NO)"), max_tokens=5))


@pytest.mark.slow
def test_thinking_phase_with_a_thinking_template():
    """Mechanics of the Qwen3-style path, on SmolLM2 with an explicit template override."""
    template = (
        "{% for m in messages %}{{'<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n'}}{% endfor %}"
        "{% if add_generation_prompt %}{{'<|im_start|>assistant\\n'}}"
        "{% if enable_thinking is defined and not enable_thinking %}{{'<think>\\n\\n</think>\\n\\n'}}{% endif %}"
        "{% endif %}"
    )
    backend = make_backend("local", model="smollm2-135m", n_ctx=1024, chat_template=template, thinking_budget=12)
    try:
        assert backend.identity()["thinking"] == "supported"
        req = Request(messages=({"role": "user", "content": "Is 7 prime? Answer YES or NO."},),
                      constraint=Constraint(regex="(YES|NO)"), max_tokens=40)
        out = backend.complete(req)
        assert out.raw.startswith("<think>\n") and "</think>\n\n" in out.raw
        assert out.reasoning is not None and out.text in ("YES", "NO")
        assert out.completion_tokens <= 40 and out.meta["thinking"] == "on"
        off = backend.complete(Request(messages=req.messages, constraint=req.constraint, max_tokens=5, thinking=False))
        assert off.reasoning is None and off.raw in ("YES", "NO") and off.meta["thinking"] == "off"
        assert backend.render(req, thinking=False).endswith("<think>\n\n</think>\n\n")
    finally:
        backend.close()


# ----------------------------------------------------------------------------------------- Qwen (slow)
@pytest.mark.slow
def test_qwen_forced_tool_call_under_constraint_parses():
    backend = make_backend("local", n_ctx=2048)  # default model: qwen2.5-0.5b
    try:
        ident = backend.identity()
        assert ident["model"] == "qwen2.5-0.5b" and ident["tool_format"] == "native-template"
        out = backend.complete(analysis_request(max_tokens=250))
        assert re.fullmatch(envelope_regex(TOOL_NAME, analysis_regex(VARS)), out.raw), out.raw
        assert out.tool_calls[0].name == TOOL_NAME
        instance_model(tuple(VARS)).model_validate_json(out.tool_calls[0].arguments)
    finally:
        backend.close()


@pytest.mark.parametrize(("option", "value", "says"), [
    ("n_ctx", -5, "greater than or equal to 256"), ("n_ctx", 10**9, "less than or equal to 1048576"),
    ("n_threads", 0, "greater than or equal to 1"), ("n_threads", -2, "greater than or equal to 1"),
    ("n_threads", 10**6, "less than or equal to 1024"), ("n_batch", 0, "greater than or equal to 1"),
    ("thinking_budget", -1, "greater than or equal to 0"), ("kept_states_gib", "inf", "finite number"),
])
def test_llama_cpp_sizes_out_of_range_are_refused_by_name_before_a_model_loads(option, value, says):
    """A negative context is refused as such, not reported as the model file failing to load."""
    with pytest.raises(ValueError, match=f"backend 'local' option {option}: .*{says}"):
        make_backend("local", model="no-such-model-file.gguf", **{option: value})


def test_loading_a_model_past_its_training_context_prints_no_llama_cpp_warning(capfd):
    """llama.cpp warns ``n_ctx_seq (16384) > n_ctx_train (8192)`` when SmolLM2 is loaded with a 16k context;
    llama-cpp-python's own log callback takes that warning for an error and prints it even with verbose=False,
    and a notebook that loads the model then shows it on the chapter's page. Loaded quietly, nothing of
    llama.cpp's log is printed; loaded verbose, the same warning is (so the test can see it at all)."""
    capfd.readouterr()
    quiet = make_backend("local", model="smollm2-135m", n_ctx=16384)
    quiet.close()
    printed = capfd.readouterr()
    assert "n_ctx_train" not in printed.err + printed.out
    loud = make_backend("local", model="smollm2-135m", n_ctx=16384, verbose=True, kept_states_gib=0)
    loud.close()
    printed = capfd.readouterr()
    assert "n_ctx_seq (16384) > n_ctx_train (8192)" in printed.err
