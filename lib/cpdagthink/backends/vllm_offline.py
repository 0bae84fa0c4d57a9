"""Offline vLLM on GPUs: one ``LLM.generate`` call per batch, regex constraints via structured outputs.

Prompts come from the model tokenizer's own chat template (``apply_chat_template(messages, tools=...,
add_generation_prompt=True, enable_thinking=request.thinking, tokenize=False)``); a constraint naming a
tool is wrapped in the family's envelope (Hermes ``<tool_call>`` for Qwen, ``[TOOL_CALLS]`` for Mistral;
see :mod:`.profiles`), and tool calls and ``<think>`` reasoning are parsed from the generated text. vLLM is
imported lazily, so everything except :class:`VLLMBackend` itself (:func:`sampling_kwargs`,
:func:`engine_kwargs`, :func:`prompt_for`, :func:`completion_from_text`) works without it.

Thinking and constraints: a regex over the whole output would forbid the ``<think>`` block. The family's
``reasoning_parser`` (Qwen3/3.5: ``qwen3``; override with the option, ``""`` for none) makes vLLM apply the
constraint only after the reasoning ends; without one, a thinking request with a constraint on a thinking
template is refused.

Tool choice: offline vLLM has no ``tool_choice`` (``LLM.chat`` and ``LLM.generate`` take none), so this
backend enforces it itself, as ``vllm serve`` does for its clients. A forced choice (a tool's name, or
``"required"`` for any offered tool) constrains the output to that call's envelope: the request's own
constraint when it names the tool, else the regex of the tool's parameter schema (what the server's named
tool choice enforces). ``"none"`` keeps the tools in the prompt (the prefix stays shared with turn 1, as the
server does by default) but bans the envelope's opening tag (``bad_words``) and reads no tool call from the
output. ``"auto"`` (or None) offers the tools and parses whatever calls come back.

Context: vLLM stops a generation that reaches ``max_model_len`` with ``finish_reason="length"``, exactly as
if the budget had run out. A request whose prompt plus ``max_tokens`` does not fit is therefore refused
before anything is generated (recorded as rejected on its instance, with the numbers); ``max_model_len=None``
takes the model's own context length.
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any, Sequence

from pydantic import Field

from ..method.chat import Completion, Request
from .base import Backend, BackendError, Provenance
from .profiles import ModelProfile, ProfiledFamily, profile_for, with_overrides
from .toolcalls import (MISTRAL_OPEN, OPEN, chat_messages, completion_from_text, envelope_regex,
                        render_unparsed_calls, split_reasoning)

INSTALL_HINT = "pip install -e '.[vllm]'  (or a separate GPU env: conda env create -f environment-vllm.yml)"


# GPUs one model may be split over (a node holds at most 8; vLLM spans nodes only with Ray, which a grid job has not).
MAX_TENSOR_PARALLEL = 64
_OPENERS = {"hermes": OPEN, "mistral": MISTRAL_OPEN}
_UNFORCED = (None, "auto", "none")


def forced_tools(request: Request) -> list[str]:
    """The tools a forced ``tool_choice`` allows (a name, or every offered tool for ``"required"``); [] if none
    is forced. A name that is not offered is refused."""
    if request.tool_choice in _UNFORCED:
        return []
    offered = [t["function"]["name"] for t in request.tools]
    if request.tool_choice == "required":
        if not offered:
            raise BackendError("tool_choice 'required' with no tools offered")
        return offered
    if request.tool_choice not in offered:
        raise BackendError(f"tool_choice names {request.tool_choice!r}, which is not among the offered tools {offered}")
    return [request.tool_choice]


def constraint_regex(request: Request, envelope: str = "hermes") -> str | None:
    """The regex the generated text must match: the request's constraint (in the ``envelope`` when it names a
    tool), else for a forced tool choice the envelope of the allowed calls with their parameter schemas."""
    from ..method.schema import json_schema_regex

    c = request.constraint
    forced = forced_tools(request)
    if c is not None:
        _check_tool_choice(c.tool, request.tool_choice, forced)
        return envelope_regex(c.tool, c.regex, style=envelope) if c.tool else c.regex
    if not forced:
        return None
    schemas = {t["function"]["name"]: t["function"].get("parameters") or {"type": "object"} for t in request.tools}
    calls = [envelope_regex(name, json_schema_regex(schemas[name]), style=envelope) for name in forced]
    return calls[0] if len(calls) == 1 else "|".join(f"(?:{c})" for c in calls)


def _check_tool_choice(tool: str | None, tool_choice: str | None, forced: list[str]) -> None:
    """Refuse a constraint on a call of ``tool`` that the request's tool choice does not allow."""
    if tool and tool_choice == "none":
        raise BackendError(f"a constraint on a call of {tool!r} contradicts tool_choice 'none'")
    if tool and forced and tool not in forced:
        raise BackendError(f"a constraint on a call of {tool!r} contradicts tool_choice {tool_choice!r}")


def sampling_kwargs(request: Request, envelope: str = "hermes") -> dict[str, Any]:
    """Keyword arguments for ``vllm.SamplingParams`` (``structured_outputs`` as a plain dict here); tool
    choice ``"none"`` with tools offered bans the envelope's opening tag."""
    kwargs: dict[str, Any] = {
        "temperature": request.temperature,
        "top_p": request.top_p,
        "top_k": request.top_k,
        "min_p": request.min_p,
        "seed": request.seed,
        "max_tokens": request.max_tokens,
    }
    regex = constraint_regex(request, envelope)
    if regex is not None:
        kwargs["structured_outputs"] = {"regex": regex}
    if request.tool_choice == "none" and request.tools:
        kwargs["bad_words"] = [_OPENERS[envelope]]
    return kwargs


def engine_kwargs(
    model: str,
    profile: ModelProfile,
    *,
    tensor_parallel_size: int = 2,
    gpu_memory_utilization: float = 0.88,
    max_model_len: int | None = 16384,
    revision: str | None = None,
    dtype: str = "auto",
    seed: int = 0,
    **llm_kwargs: Any,
) -> dict[str, Any]:
    """Keyword arguments for ``vllm.LLM`` (and ``vllm.engine.arg_utils.EngineArgs``); the profile's reasoning
    parser goes in ``reasoning_parser``, which vLLM passes on to its structured-output config."""
    options: dict[str, Any] = dict(
        model=model,
        revision=revision,
        tensor_parallel_size=tensor_parallel_size,
        gpu_memory_utilization=gpu_memory_utilization,
        max_model_len=max_model_len,
        dtype=dtype,
        seed=seed,
    )
    if profile.reasoning_parser:
        options["reasoning_parser"] = profile.reasoning_parser
    options.update(llm_kwargs)
    return options


def template_supports_thinking(tokenizer: Any) -> bool:
    return "enable_thinking" in (getattr(tokenizer, "chat_template", None) or "")


def prompt_for(tokenizer: Any, request: Request) -> str:
    """The prompt text from the tokenizer's chat template (arguments as dicts, as HF templates expect)."""
    messages = render_unparsed_calls(chat_messages(request.messages, arguments_as="dict"))
    return tokenizer.apply_chat_template(
        messages,
        tools=[dict(t) for t in request.tools] or None,
        add_generation_prompt=True,
        enable_thinking=request.thinking,
        tokenize=False,
    )


def import_vllm() -> Any:
    try:
        import vllm
    except ImportError as exc:
        raise BackendError(f"vLLM is not installed ({exc}); install with: {INSTALL_HINT}") from exc
    return vllm


class VLLMBackend(ProfiledFamily, Backend):
    """A Hugging Face model under offline vLLM (tensor parallel over ``tensor_parallel_size`` GPUs)."""

    name = "vllm"
    preferred_chunk_size = 64  # one batched generate() per turn over a chunk
    sized_by = ("gpu", "tensor_parallel_size")  # a grid job holds its tensor-parallel GPUs

    def __init__(
        self,
        model: str,
        *,
        tensor_parallel_size: Annotated[int, Field(ge=1, le=MAX_TENSOR_PARALLEL)] = 2,
        gpu_memory_utilization: Annotated[float, Field(gt=0, le=1)] = 0.88,
        max_model_len: Annotated[int, Field(ge=1)] | None = 16384,
        revision: str | None = None,
        reasoning_parser: str | None = None,
        dtype: str = "auto",
        seed: int = 0,
        **llm_kwargs: Any,
    ):
        """``reasoning_parser``: None takes the family's (:mod:`.profiles`), ``""`` switches it off.
        ``max_model_len``: prompt plus budget must fit in it (module docstring); None: the model's own."""
        vllm = import_vllm()
        from vllm.sampling_params import StructuredOutputsParams

        self._vllm = vllm
        self._structured = StructuredOutputsParams
        self.model = model
        self.revision = revision
        self.tensor_parallel_size = tensor_parallel_size
        self.max_model_len = max_model_len
        self.profile = with_overrides(profile_for(model), reasoning_parser=reasoning_parser)
        self.reasoning_parser = self.profile.reasoning_parser
        self.dtype = dtype
        options = engine_kwargs(model, self.profile, tensor_parallel_size=tensor_parallel_size,
                                gpu_memory_utilization=gpu_memory_utilization, max_model_len=max_model_len,
                                revision=revision, dtype=dtype, seed=seed, **llm_kwargs)
        try:
            self.llm = vllm.LLM(**options)
        except Exception as exc:  # noqa: BLE001
            raise BackendError(f"vLLM could not load {model!r} (revision {revision!r}): {exc}") from exc
        self.max_model_len = self.llm.llm_engine.model_config.max_model_len  # the engine's, when None was given
        self.tokenizer = self.llm.get_tokenizer()
        self.thinking_supported = template_supports_thinking(self.tokenizer)

    def provenance(self) -> Provenance:
        """The commit vLLM loaded, read from the hub cache's snapshot folder (named by its commit hash);
        the tokenizer is loaded from the same snapshot. Unresolved (a local folder, no cache): the revision asked."""
        try:
            from huggingface_hub import snapshot_download

            revision = Path(snapshot_download(self.model, revision=self.revision, local_files_only=True)).name
        except Exception:  # noqa: BLE001 - not a hub model or not cached: nothing more to resolve
            revision = self.revision
        return Provenance(model_revision=revision, tokenizer_revision=revision)

    def identity(self) -> dict[str, Any]:
        return {
            "backend": "vllm",
            "model": self.model,
            "revision": self.revision,
            "vllm": getattr(self._vllm, "__version__", None),
            "tensor_parallel_size": self.tensor_parallel_size,
            "max_model_len": self.max_model_len,
            "dtype": self.dtype,
            "reasoning_parser": self.reasoning_parser,
            "profile": {"family": self.profile.family, "tool_envelope": self.profile.tool_envelope},
            "thinking": "supported" if self.thinking_supported else "unsupported",
        }

    def _params(self, request: Request) -> Any:
        kwargs = sampling_kwargs(request, self.profile.tool_envelope)
        thinking = bool(request.thinking and self.thinking_supported)
        if "structured_outputs" in kwargs:
            if thinking and not self.reasoning_parser:
                raise BackendError(
                    "a regex constraint with thinking on needs reasoning_parser (e.g. 'qwen3') so the constraint "
                    "starts after </think>; or send thinking=False"
                )
            kwargs["structured_outputs"] = self._structured(**kwargs["structured_outputs"])
        return self._vllm.SamplingParams(**kwargs)

    def complete(self, request: Request) -> Completion:
        return self.complete_batch([request])[0]

    def too_long(self, prompt_tokens: int, request: Request) -> str | None:
        """Why ``request`` cannot run whole in the context (None if it fits): vLLM would cut it silently."""
        if self.max_model_len is None or prompt_tokens + request.max_tokens <= self.max_model_len:
            return None
        return (f"prompt of {prompt_tokens} tokens + max_tokens {request.max_tokens} exceed max_model_len "
                f"{self.max_model_len}: vLLM would stop at the context length as if the budget had run out; "
                f"build the backend with max_model_len >= {prompt_tokens + request.max_tokens} (None: the model's "
                "own) or lower the budget")

    def complete_batch(self, requests: Sequence[Request]) -> list[Completion]:
        """One ``generate`` call over the token ids of every request that fits the context; the others come
        back rejected (``meta["rejected"]``) without being generated."""
        requests = list(requests)
        prompts = [prompt_for(self.tokenizer, r) for r in requests]
        # The template already wrote any BOS: token ids without special tokens are exactly the prompt.
        ids = [self.tokenizer.encode(p, add_special_tokens=False) for p in prompts]
        refused = {i: why for i, r in enumerate(requests) if (why := self.too_long(len(ids[i]), r))}
        run = [i for i in range(len(requests)) if i not in refused]
        outputs: dict[int, Any] = {}
        elapsed = 0.0
        if run:
            params = [self._params(requests[i]) for i in run]
            start = time.perf_counter()
            generated = self.llm.generate([{"prompt_token_ids": ids[i]} for i in run], params, use_tqdm=False)
            elapsed = time.perf_counter() - start
            outputs = dict(zip(run, generated))
        return [Completion(text="", prompt_tokens=len(ids[i]), meta={"rejected": refused[i]}) if i in refused
                else self._completion(requests[i], prompts[i], outputs[i], elapsed, len(run))
                for i in range(len(requests))]

    def _completion(self, request: Request, prompt: str, out: Any, elapsed: float, batch_size: int) -> Completion:
        gen = out.outputs[0]
        thinking = bool(request.thinking and self.thinking_supported)
        meta = {
            "thinking": "unsupported" if request.thinking and not self.thinking_supported else ("on" if thinking else "off"),
            "batch_size": batch_size,
            "constrained": request.constraint is not None or bool(forced_tools(request)),
        }
        started = thinking and prompt.rstrip().endswith("<think>")
        completion = completion_from_text(
            gen.text,
            prompt_tokens=len(out.prompt_token_ids or []),
            completion_tokens=len(gen.token_ids or []),
            finish_reason=gen.finish_reason,
            latency_s=elapsed,  # one batched call: every request shares its wall time
            thinking_started=started,
            meta=meta,
        )
        if request.tool_choice == "none":  # no call may come back: whatever was written stays text
            completion = replace(completion, text=split_reasoning(gen.text, started=started)[1].strip(), tool_calls=[])
        return completion

    def close(self) -> None:
        self.llm = None
