"""Opt-in checks against the real ``vllm==0.33.0`` package (``make test-vllm``; its own venv, no GPU needed).

What this project builds for vLLM is handed to vLLM's own constructors and validators, and the turn-1
regex is compiled by the structured-output libraries vLLM ships (xgrammar and llguidance) with a real
byte-level tokenizer, then walked token by token over a real turn-1 answer (the oracle's CausalAnalysis of
a Corr2Cause-style premise). No engine is started and no model is downloaded.
"""

from __future__ import annotations

import dataclasses
import json
import random

import pytest
import vllm
from vllm.engine.arg_utils import EngineArgs
from vllm.sampling_params import SamplingParams, StructuredOutputsParams

from cpdagthink.backends.openai_api.payloads import chat_kwargs
from cpdagthink.backends.profiles import PROFILES, profile_for
from cpdagthink.backends.toolcalls import envelope_text
from cpdagthink.backends.vllm_offline import VLLMBackend, engine_kwargs, sampling_kwargs
from cpdagthink.causal.dag import independence_facts
from cpdagthink.causal.oracle import analyse_premise
from cpdagthink.causal.premise import verbalise_premise
from cpdagthink.method.chat import Constraint, Request
from cpdagthink.method.schema import TOOL_NAME, CausalAnalysis, analysis_regex, tool_definition
from cpdagthink.run.generate import random_dag

VARIABLE_COUNTS = range(2, 9)
ENVELOPES = ("hermes", "mistral")


def premise_for(n: int) -> tuple[list[str], str]:
    """A Corr2Cause-format premise over n variables: every d-separation of a seeded random DAG, verbalised
    by the project's generator (the same wording as the dataset)."""
    dag = random_dag(n, 0.4, random.Random(n))
    facts = independence_facts(dag, tuple(sorted(dag.nodes)))
    return list(facts.variables), verbalise_premise(facts)


def turn1_request(names: list[str]) -> Request:
    return Request(messages=({"role": "user", "content": "premise"},), tools=(tool_definition(),),
                   tool_choice="auto", constraint=Constraint(analysis_regex(names), tool=TOOL_NAME),
                   temperature=0.6, top_p=0.95, top_k=20, min_p=0.0, seed=3, max_tokens=8192)


def backend_without_engine(model: str) -> VLLMBackend:
    """The project's VLLMBackend with the real vllm module but no engine: its request building is real."""
    backend = VLLMBackend.__new__(VLLMBackend)
    backend._vllm, backend._structured = vllm, StructuredOutputsParams
    backend.profile = profile_for(model)
    backend.reasoning_parser = backend.profile.reasoning_parser
    backend.thinking_supported = backend.profile.thinking == "switchable"  # as its chat template says
    return backend


# ------------------------------------------------------------------------------------------ constructors
@pytest.mark.parametrize("model", ["Qwen/Qwen3.5-27B", "Qwen/Qwen3-8B", "mistralai/Mistral-Small-3.1-24B-Instruct-2503"])
def test_engine_arguments_are_accepted_by_engine_args(model):
    kwargs = engine_kwargs(model, profile_for(model), revision="main")
    args = EngineArgs(**kwargs)  # vLLM's own dataclass: an unknown or mistyped field fails here
    assert args.model == model and args.tensor_parallel_size == 2 and args.gpu_memory_utilization == 0.88
    assert args.reasoning_parser == (profile_for(model).reasoning_parser or EngineArgs.reasoning_parser)
    known = {f.name for f in dataclasses.fields(EngineArgs)}
    assert set(kwargs) <= known


def test_the_profiles_name_parsers_vllm_registers():
    from vllm.reasoning import ReasoningParserManager
    from vllm.tool_parsers import ToolParserManager

    reasoning = set(ReasoningParserManager.reasoning_parsers) | set(ReasoningParserManager.lazy_parsers)
    tools = set(ToolParserManager.tool_parsers) | set(ToolParserManager.lazy_parsers)
    for profile in PROFILES:
        assert profile.reasoning_parser is None or profile.reasoning_parser in reasoning, profile.family
        assert profile.tool_call_parser is None or profile.tool_call_parser in tools, profile.family


@pytest.mark.parametrize("n", VARIABLE_COUNTS)
@pytest.mark.parametrize("model", ["Qwen/Qwen3.5-27B", "mistralai/Mistral-Small-3.1-24B-Instruct-2503"])
def test_sampling_params_are_accepted_and_the_regex_validates(model, n):
    from vllm.v1.structured_output.backend_guidance import validate_guidance_grammar
    from vllm.v1.structured_output.backend_xgrammar import validate_xgrammar_grammar

    names, _ = premise_for(n)
    params = backend_without_engine(model)._params(turn1_request(names))
    assert isinstance(params, SamplingParams) and isinstance(params.structured_outputs, StructuredOutputsParams)
    assert (params.temperature, params.top_p, params.top_k, params.seed, params.max_tokens) == (0.6, 0.95, 20, 3, 8192)
    validate_xgrammar_grammar(params)  # vLLM's own request validators for each backend
    validate_guidance_grammar(params)
    greedy = backend_without_engine(model)._params(Request(messages=(), max_tokens=5))
    assert greedy.temperature == 0.0 and greedy.top_k in (0, -1)  # 0 = off is accepted


def test_the_vllm_server_accepts_the_chat_payload():
    """chat_kwargs(regex_mode="vllm") -> the server's request model (extra_body fields are top-level there)."""
    from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest

    names, _ = premise_for(4)
    request = turn1_request(names)
    kwargs, _ = chat_kwargs(request, "Qwen/Qwen3.5-27B", regex_mode="vllm")
    body = {k: v for k, v in kwargs.items() if k != "extra_body"} | kwargs["extra_body"]
    parsed = ChatCompletionRequest.model_validate(body)
    assert parsed.structured_outputs.regex == kwargs["extra_body"]["structured_outputs"]["regex"]
    assert parsed.chat_template_kwargs == {"enable_thinking": True} and parsed.top_k == 20
    sampling = parsed.to_sampling_params(max_tokens=8192, default_sampling_params={})
    assert sampling.structured_outputs.regex and sampling.top_k == 20 and sampling.seed == 3


# ------------------------------------------------------------------------------------------ compilation
@pytest.fixture(scope="module")
def byte_tokenizer():
    """A byte-level BPE tokenizer (every byte a token, plus a few merges and an end token), built locally:
    the same kind of fast tokenizer vLLM hands to xgrammar and llguidance."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from tokenizers.pre_tokenizers import ByteLevel
    from transformers import PreTrainedTokenizerFast

    alphabet = ByteLevel.alphabet()
    vocab = {ch: i for i, ch in enumerate(sorted(alphabet))}
    merges = [("Ġ", "d"), ("Ġ", "u"), ("Ġ", "v"), ('"', ":"), ("Ġ", "[")]
    for a, b in merges:
        vocab[a + b] = len(vocab)
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    hf = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>")
    return hf


def reference_output(n: int, envelope: str) -> str:
    names, premise = premise_for(n)
    analysis = CausalAnalysis.from_cpdag(analyse_premise(premise).cpdag)
    assert sorted(analysis.variables) == names
    return envelope_text(TOOL_NAME, analysis.model_dump_json(), style=envelope)


@pytest.mark.parametrize("n", VARIABLE_COUNTS)
@pytest.mark.parametrize("envelope", ENVELOPES)
def test_xgrammar_compiles_the_turn1_regex_and_accepts_a_real_answer(byte_tokenizer, n, envelope):
    import xgrammar as xgr

    names, _ = premise_for(n)
    regex = StructuredOutputsParams(**backend_sampling(names, envelope)).regex
    info = xgr.TokenizerInfo.from_huggingface(byte_tokenizer, vocab_size=len(byte_tokenizer))
    compiled = xgr.GrammarCompiler(info, max_threads=2).compile_regex(regex)  # what vLLM's backend calls
    matcher = xgr.GrammarMatcher(compiled)
    for token in byte_tokenizer.encode(reference_output(n, envelope), add_special_tokens=False):
        assert matcher.accept_token(token)
    assert matcher.accept_token(byte_tokenizer.eos_token_id) and matcher.is_terminated()
    wrong = xgr.GrammarMatcher(compiled)
    bad = reference_output(n, envelope).replace('"variables":["', '"variables":["Z', 1)
    assert not all(wrong.accept_token(t) for t in byte_tokenizer.encode(bad, add_special_tokens=False))


@pytest.mark.parametrize("n", VARIABLE_COUNTS)
@pytest.mark.parametrize("envelope", ENVELOPES)
def test_guidance_compiles_the_turn1_regex_and_accepts_a_real_answer(byte_tokenizer, n, envelope):
    import llguidance
    import llguidance.hf
    from vllm.v1.structured_output.backend_guidance import serialize_guidance_grammar
    from vllm.v1.structured_output.backend_types import StructuredOutputOptions

    names, _ = premise_for(n)
    regex = backend_sampling(names, envelope)["regex"]
    ll_tokenizer = llguidance.hf.from_tokenizer(byte_tokenizer)
    grammar = serialize_guidance_grammar(StructuredOutputOptions.REGEX, regex)  # vLLM's own serializer
    matcher = llguidance.LLMatcher(ll_tokenizer, grammar)
    assert not matcher.get_error(), matcher.get_error()
    tokens = byte_tokenizer.encode(reference_output(n, envelope), add_special_tokens=False)
    assert matcher.consume_tokens(tokens) and not matcher.get_error()
    assert matcher.is_accepting()


def backend_sampling(names: list[str], envelope: str) -> dict:
    return sampling_kwargs(turn1_request(names), envelope)["structured_outputs"]


def test_the_stack_vllm_pins():
    """The versions this check runs with (docs/vllm-check.md quotes them; ``-s`` prints them)."""
    import importlib.metadata as md

    versions = {name: md.version(name) for name in ("vllm", "torch", "transformers", "xgrammar", "llguidance")}
    print(json.dumps(versions))
    assert versions["vllm"] == "0.33.0" and versions["torch"].startswith("2.14")
