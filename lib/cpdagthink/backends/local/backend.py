"""CPU backend: a GGUF model under llama-cpp-python, regex constraints through outlines.

Prompting uses the GGUF's own chat template (``tokenizer.chat_template``), rendered by :mod:`.chat_template`
exactly as ``llama_cpp.llama_chat_format.Jinja2ChatFormatter`` does; a template without tool support gets
the Hermes tool protocol as text, so every model sees the same protocol.

Generation is a raw completion on the rendered prompt tokens, evaluated after the longest prefix kept of
them in whole batches (:mod:`.kept_states`), so that what a call computes never depends on the calls before.
A :class:`Constraint` becomes an outlines-core regex index (wrapped in the Hermes envelope when the constraint
names a tool), compiled once per pattern and kept on disk (:mod:`.regex_indexes`). By default the constrained
output is plain constrained decoding: the outlines logits processor inside ``create_completion``'s sampler,
one token per step. That processor runs in a llama.cpp callback, where
an exception would be swallowed and leave the output silently unconstrained (this is what happens without
numba): here any such error fails the call loudly.

``jump_forward=True`` (opt-in) decodes with this module's own loop (:mod:`.jump_forward`): tokens the
constraint forces are appended without sampling, and drafted guesses are checked in the same batch; the
other positions are chosen among the admitted tokens, greedily at temperature 0, otherwise by the llama.cpp
sampler chain top_k -> typical(1) -> top_p -> min_p -> temperature -> dist(seed), the chain
``create_completion`` builds. It is exact only where a row of a batch is computed bit for bit as a
one-token step, which depends on how llama.cpp was built: the stock build switches matrix kernels at two
tokens (llamafile's sgemm), so rows differ by up to ~0.5 in the logits and near-ties flip; a build with
``-DGGML_LLAMAFILE=OFF`` (``make llama-exact``) gives identical rows for batches of up to 7 tokens on the
default model. So the backend measures this once per build and model (:func:`.jump_forward.batch_invariance`,
kept on disk) and never evaluates a batch larger than the measured size: on the stock build the loop degenerates
to one token per step, exact and no faster. It is off by default because on the build that makes it fast,
prompt prefill is about 1.7x slower (measured), and most of the book's calls are prefill-bound.

Thinking is real or absent: with a template that reads ``enable_thinking`` (Qwen3-style), ``thinking=True``
first generates an unconstrained ``<think>...</think>`` phase (at most ``thinking_budget`` tokens), then the
constrained answer; with any other template the flag has no effect and is recorded as unsupported.
"""

from __future__ import annotations

import functools
import hashlib
import json
import sys
import threading
import time
from pathlib import Path
from typing import Annotated, Any

import numpy as np
from pydantic import Field

from ...method.chat import Completion, Request
from ..base import Backend, BackendError, Provenance, RequestRejected
from .jump_forward import (
    INVARIANCE_CONTEXT,
    INVARIANCE_ROWS,
    IndexWalker,
    batch_invariance,
    decode_constrained,
    read_invariance,
    verified_rows,
    write_invariance,
)
from .chat_template import CHATML, TOOLS_POSTAMBLE, TOOLS_PREAMBLE, ChatTemplate
from ..profiles import RecommendedSampling
from .models import DEFAULT_MODEL, MODELS, default_cache_dir, resolve_model
from .core_share import CoreShare, next_threads, thread_invariance
from .kept_states import KeptPrefixes
from .state_store import StateStore
from .llama_loading import default_extra_buffers, llama_model_params, load_model
from .regex_indexes import RegexIndexes, compile_index, token_texts
from ..toolcalls import THINK_CLOSE, THINK_OPEN, completion_from_text, envelope_regex

# The ranges of llama.cpp's sizes, declared once in the signature: a context shorter than a prompt of this
# method cannot serve it, one over 1M tokens no GGUF here was trained for; more threads than any machine has
# only makes them wait on each other.
MIN_CONTEXT = 256
MAX_CONTEXT = 1 << 20
MAX_THREADS = 1024

INSTALL_HINT = "pip install -e '.[local]'  (llama-cpp-python[server]==0.3.36, outlines[llamacpp]==1.3.3, numba)"

# How a request's sampling fields are applied (part of the identity: it decides what a seed means).
SAMPLING = (
    "greedy at temperature 0; otherwise the request's top_k, top_p, min_p, temperature and seed in llama.cpp's "
    "chain top_k -> typical(1) -> top_p -> min_p -> temp -> dist(seed), over the tokens the constraint admits; "
    "repeat_penalty=1; a token the constraint forces is taken without sampling"
)


def serve(argv: list[str] | None = None) -> None:
    """``python -m llama_cpp.server`` with the same extra-buffer setting as :class:`LocalBackend`.

    Usage: ``python -m cpdagthink.backends.local --model FILE.gguf --chat_format chatml-function-calling ...``
    (``--model`` also accepts a short name such as ``smollm2-135m``).
    """
    import runpy

    args = list(sys.argv[1:] if argv is None else argv)
    if "--model" in args:
        i = args.index("--model") + 1
        if i < len(args) and not args[i].endswith(".gguf"):
            args[i] = str(resolve_model(args[i]).path)
    sys.argv = ["llama_cpp.server", *args]
    with llama_model_params(default_extra_buffers()):  # the server loads its model inside this block
        runpy.run_module("llama_cpp.server", run_name="__main__")


@functools.lru_cache(maxsize=64)
def _schema_regex_cached(schema_json: str) -> str:
    from outlines_core.json_schema import build_regex_from_schema

    return build_regex_from_schema(schema_json, whitespace_pattern=r"[ ]?")


def _schema_regex(schema: dict[str, Any]) -> str:
    return _schema_regex_cached(json.dumps(schema))  # key order kept: it is the field order


def output_regex(request: Request) -> str | None:
    """The regex the whole assistant output must match, or None for free generation.

    A constraint naming a tool is wrapped in the Hermes envelope; without a constraint, a forced tool choice
    (a tool name, or ``"required"``) constrains the call to the tool's own JSON schema, as API servers do.
    """
    c = request.constraint
    if c is not None:
        return envelope_regex(c.tool, c.regex) if c.tool else c.regex
    choice = request.tool_choice
    if not request.tools or choice in (None, "auto", "none"):
        return None
    tools = [t.get("function", t) for t in request.tools]
    if choice != "required":
        tools = [t for t in tools if t.get("name") == choice]
        if not tools:
            raise BackendError(f"tool_choice {choice!r} names no tool in the request")
    options = [envelope_regex(t["name"], _schema_regex(t.get("parameters") or {"type": "object"})) for t in tools]
    return options[0] if len(options) == 1 else "|".join(f"(?:{o})" for o in options)


class _GuardedProcessor:
    """Runs the outlines processor and keeps the first exception instead of letting ctypes swallow it."""

    def __init__(self, inner: Any, eos_id: int):
        self.inner = inner
        self.eos_id = eos_id
        self.error: BaseException | None = None
        self.calls = 0

    def __call__(self, input_ids, logits):
        self.calls += 1
        if self.error is None:
            try:
                return self.inner(input_ids, logits)
            except BaseException as exc:  # noqa: BLE001 - re-raised after generation
                self.error = exc
        out = np.full_like(logits, -np.inf)
        out[self.eos_id] = 0.0  # stop as fast as possible; the call then fails with the recorded error
        return out


class LocalBackend(Backend):
    """A GGUF chat model on CPU. ``model``: a short name from :data:`models.MODELS` or a ``.gguf`` path.

    ``jump_forward=True`` decodes constrained output with this module's exact loop (module docstring),
    drafting up to ``draft_tokens`` tokens per step where the llama.cpp build computes such batches exactly.
    The states of evaluated prompts are kept under ``cache_dir/kept-states`` for every process of the same
    model and build to reuse (:mod:`.kept_states`), in at most ``kept_states_gib`` GiB (0: none kept).
    ``share_cores`` (default) computes each call on as many of the ``n_threads`` as other processes leave
    cores free, where the build computes that many threads bit for bit alike (:mod:`.core_share`);
    ``share_cores=False`` always computes on ``n_threads``.
    """

    name = "local"
    sized_by = ("threads", "n_threads")  # a grid job holds the CPU threads llama.cpp computes on

    @classmethod
    def model_title(cls, model: str | None) -> str:
        """The registry's title for a short name, the file name of a ``.gguf`` path."""
        spec = MODELS.get(model or DEFAULT_MODEL)
        return spec.title if spec else Path(str(model)).name

    @classmethod
    def recommended_sampling(cls, model: str | None, thinking: bool) -> RecommendedSampling | None:
        """The registry's record for a short name (a ``.gguf`` path has none)."""
        spec = MODELS.get(model or DEFAULT_MODEL)
        return spec.recommended_sampling if spec else None

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        *,
        n_ctx: Annotated[int, Field(ge=MIN_CONTEXT, le=MAX_CONTEXT)] = 16384,
        n_threads: Annotated[int, Field(ge=1, le=MAX_THREADS)] = 2,
        # kept prefixes are reused in whole batches; larger ones prefill no faster here
        n_batch: Annotated[int, Field(ge=1, le=MAX_CONTEXT)] = 128,
        seed: int = 0,
        cache_dir: str | None = None,
        chat_template: str | None = None,
        thinking_budget: Annotated[int, Field(ge=0)] = 1024,
        max_cached_regexes: Annotated[int, Field(ge=1)] = 32,
        extra_buffers: bool | None = None,
        kept_states_gib: Annotated[float, Field(ge=0, allow_inf_nan=False)] = 4.0,
        jump_forward: bool = False,
        draft_tokens: Annotated[int, Field(ge=1)] = 6,
        share_cores: bool = True,
        verbose: bool = False,
    ):
        llama_cpp = _import_llama_cpp()
        self.model_file = resolve_model(model, cache_dir)
        self.n_ctx = n_ctx
        self.n_threads = n_threads
        self.thinking_budget = thinking_budget
        self.jump_forward = jump_forward
        self.draft_tokens = draft_tokens
        self.extra_buffers = default_extra_buffers() if extra_buffers is None else extra_buffers
        self.llm = load_model(llama_cpp, self.model_file.path, self.extra_buffers, n_ctx=n_ctx, n_threads=n_threads,
                              n_batch=n_batch, seed=seed, verbose=verbose)
        self._llama_cpp = llama_cpp
        self._eos_id = self.llm.token_eos()
        bos_id = self.llm.token_bos()
        self._bos_text = self._token_text(bos_id)
        self._add_bos = bool(self.llm._model.add_bos_token()) and bos_id != -1
        self.chat_template, self.template_source = _template_of(self.llm, chat_template)
        self._template = ChatTemplate(self.chat_template, eos_token=self._token_text(self._eos_id),
                                      bos_token=self._bos_text, name=self.model_file.name)
        self.native_tools = self._template.native_tools
        self.thinking_supported = self._template.thinking_supported
        self._lock = threading.RLock()
        self._token_texts: tuple[int, dict[str, list[int]]] | None = None
        self._cache_dir = Path(cache_dir or default_cache_dir())
        # Instances that alternate (conditions, probes, turn 2 after another instance, the next chapter's
        # process) restore the longest prefix kept of their prompt and skip that much prefill, computing what
        # a fresh context computes. The setting is what decides a prefix's KV bytes.
        setting = [self.model_file.sha256, llama_cpp.__version__, self.system_info, n_threads, self.extra_buffers,
                   self.llm.n_batch, n_ctx]
        store = (StateStore(self._cache_dir / "kept-states", setting, int(kept_states_gib * 2**30))
                 if kept_states_gib > 0 else None)
        self._prefixes = KeptPrefixes(self.llm, store)
        self._indexes = RegexIndexes(self._cache_dir / "regex-indexes", self.model_file.sha256, self._eos_id,
                                     capacity=max_cached_regexes, compile=self._compile)
        self._cores, self._threads_now = (CoreShare() if share_cores and n_threads > 1 else None), n_threads

    def _token_text(self, token: int) -> str:
        return self.llm._model.token_get_text(token) if token != -1 else ""

    # ----------------------------------------------------------------------------------------- identity
    def provenance(self) -> Provenance:
        """The GGUF file's sha256 is both revisions (the file carries its tokenizer); a registry model also
        names the pip package(s) it came from."""
        spec = MODELS.get(self.model_file.name)
        revision = f"sha256:{self.model_file.sha256}"
        return Provenance(model_revision=revision, tokenizer_revision=revision,
                          model_package=" ".join(f"{dist}=={spec.version}" for dist, _, _ in spec.parts) if spec else None)

    def identity(self) -> dict[str, Any]:
        try:
            from importlib.metadata import version

            outlines_version = version("outlines")
        except Exception:  # noqa: BLE001
            outlines_version = None
        return {
            "backend": "local",
            "model": self.model_file.name,
            "gguf_sha256": self.model_file.sha256,
            "llama_cpp": self._llama_cpp.__version__,
            "outlines": outlines_version,
            "n_ctx": self.n_ctx,
            "extra_buffers": self.extra_buffers,
            "sampling": SAMPLING,
            "decoder": self.decoder,
            "prefill": (f"every prompt evaluated as a fresh context evaluates it, in batches of {self.llm.n_batch} "
                        f"tokens (kept prefixes reused at multiples of {self.llm.n_batch})"),
            "chat_template_sha256": hashlib.sha256(self.chat_template.encode()).hexdigest(),
            "chat_template_source": self.template_source,
            "tool_format": "native-template" if self.native_tools else "system-prompt-hermes",
            "thinking": "supported" if self.thinking_supported else "unsupported",
            "thinking_budget": self.thinking_budget if self.thinking_supported else None,
            # llama.cpp compiles for the CPU it is built on: builds for other instruction sets, or without
            # llamafile, sum differently and decode other greedy outputs, so their calls are cached, and their
            # runs resumed, apart
            "llama_cpp_system": self.system_info,
        }

    @functools.cached_property
    def system_info(self) -> str:
        """What this llama.cpp build computes with: the instruction sets it was compiled for and its kernels."""
        return self._llama_cpp.llama_print_system_info().decode()

    @property
    def stock_build(self) -> bool:
        """Whether llama.cpp was built as PyPI's sdist builds by default (with llamafile's sgemm)."""
        return "LLAMAFILE = 1" in self.system_info

    @property
    def decoder(self) -> str:
        """How constrained output is decoded (part of the identity: the two decoders are cached apart)."""
        if not self.jump_forward:
            return "plain constrained"
        rows = self.batch_rows
        drafts = min(self.draft_tokens, rows - 1)
        return (f"jump-forward, batches of up to {rows} token(s) (measured bit for bit equal to one-token steps "
                f"on this build)" + (f", drafts of up to {drafts} token(s)" if drafts else ""))

    # ----------------------------------------------------------------------------------------- prompting
    def render(self, request: Request, *, thinking: bool | None = None) -> str:
        """The prompt text for ``request`` (ends with the assistant generation prompt)."""
        return self._template.render(request, request.thinking if thinking is None else thinking)

    def tokenize(self, text: str) -> list[int]:
        add_bos = self._add_bos and not (self._bos_text and text.startswith(self._bos_text))
        return self.llm.tokenize(text.encode("utf-8"), add_bos=add_bos, special=True)

    # ----------------------------------------------------------------------------------------- constraints
    def _compile(self, regex: str) -> Any:
        """The outlines-core index of ``regex`` over this model's vocabulary (:func:`.regex_indexes.compile_index`)."""
        try:
            import outlines
        except ImportError as exc:
            raise BackendError(f"regex constraints need outlines ({exc}); install with: {INSTALL_HINT}") from exc
        if self._token_texts is None:
            self._token_texts = token_texts(outlines.from_llamacpp(self.llm, chat_mode=False).tokenizer)
        eos_id, texts = self._token_texts
        try:
            return compile_index(regex, eos_id, texts)
        except Exception as exc:  # noqa: BLE001
            raise BackendError(f"outlines could not compile the constraint regex: {exc}") from exc

    def _processor(self, walker: IndexWalker) -> _GuardedProcessor:
        """A fresh guarded outlines logits processor over the walker's index (plain constrained decoding)."""
        try:
            import outlines_core.kernels.numpy  # noqa: F401 - needs numba: fail here, not in the callback
            from outlines.backends.outlines_core import OutlinesCoreLogitsProcessor
        except ImportError as exc:
            raise BackendError(f"plain constrained decoding needs numba ({exc}); install with: {INSTALL_HINT}") from exc
        return _GuardedProcessor(OutlinesCoreLogitsProcessor(walker.index, "numpy"), self._eos_id)

    # ----------------------------------------------------------------------------------------- generation
    def _generate(self, tokens: list[int], request: Request, max_tokens: int, *, regex: str | None = None,
                  stop: list[str] | None = None) -> tuple[str, int, str | None, float, dict[str, int]]:
        """Text, completion tokens, finish reason, regex compile seconds, and counts: the prompt tokens restored
        rather than evaluated (``prompt_tokens_reused``) and the own decoder's (forced and drafted tokens,
        forward passes)."""
        room = self.n_ctx - len(tokens)
        if room <= 0:
            raise RequestRejected(f"prompt of {len(tokens)} tokens does not fit n_ctx={self.n_ctx}")
        max_tokens = max(1, min(max_tokens, room))
        walker, compile_s = (None, 0.0) if regex is None else self._indexes.walker(regex)
        self._share_cores()
        reused = self._prefixes.prepare(tokens)
        try:
            if walker is not None and self.jump_forward:
                text, n, finish, counts = decode_constrained(self.llm, tokens, request, max_tokens, walker,
                                                             batch_rows=self.batch_rows, draft_tokens=self.draft_tokens)
            else:
                text, n, finish, counts = self._complete_tokens(tokens, request, max_tokens, walker, stop)
        except BaseException:
            self._prefixes.forget()
            raise
        self._prefixes.keep(tokens)
        return text, n, finish, compile_s, {"prompt_tokens_reused": reused, **counts}

    def _complete_tokens(self, tokens: list[int], request: Request, max_tokens: int, walker: IndexWalker | None,
                         stop: list[str] | None) -> tuple[str, int, str | None, dict[str, int]]:
        """``create_completion`` after :meth:`KeptPrefixes.prepare`, under the outlines processor of ``walker``
        (None: unconstrained): text, completion tokens, finish reason, and no decoder counts."""
        guard = self._processor(walker) if walker is not None else None
        out = self.llm.create_completion(
            tokens,
            max_tokens=max_tokens,
            temperature=request.temperature,
            seed=request.seed,
            top_p=request.top_p,
            top_k=request.top_k,
            min_p=request.min_p,
            repeat_penalty=1.0,
            stop=stop or [],
            logits_processor=self._llama_cpp.LogitsProcessorList([guard]) if guard is not None else None,
        )
        if guard is not None and guard.error is not None:
            raise BackendError(f"constrained decoding failed inside the logits processor: {guard.error!r}") from guard.error
        choice = out["choices"][0]
        return choice["text"], int(out["usage"]["completion_tokens"]), choice.get("finish_reason"), {}

    @functools.cached_property
    def batch_rows(self) -> int:
        """The largest batch whose every row this llama.cpp build computes bit for bit as a one-token step
        (1: none), measured by :func:`batch_invariance` once per build and model and kept on disk."""
        return verified_rows(self.batch_invariance())

    def batch_invariance(self) -> dict[int, float]:
        """:func:`batch_invariance` for this model and build, from the disk cache when measured before."""
        return self._build_check("batch-invariance", [INVARIANCE_CONTEXT, INVARIANCE_ROWS],
                                 lambda tokens: batch_invariance(self.llm, tokens, INVARIANCE_ROWS))

    @functools.cached_property
    def thread_invariance(self) -> dict[int, float]:
        """:func:`.core_share.thread_invariance` for this model and build, from the disk cache when measured."""
        return self._build_check("thread-invariance", [INVARIANCE_CONTEXT],
                                 lambda tokens: thread_invariance(self.llm, self._llama_cpp, tokens, self.n_threads))

    def _build_check(self, folder: str, extra: list[Any], measure: Any) -> dict[int, float]:
        """What ``measure`` finds of this build's arithmetic on a fixed text of :data:`INVARIANCE_CONTEXT`
        tokens, kept on disk under ``folder`` for the build, model and ``extra`` settings it was measured with."""
        setting = [self.model_file.sha256, self._llama_cpp.__version__, self.system_info, self.n_threads,
                   self.extra_buffers, *extra]
        key = hashlib.sha256(json.dumps(setting).encode()).hexdigest()
        path = self._cache_dir / folder / f"{key}.json"
        stored = read_invariance(path, setting)
        if stored is not None:
            return stored
        tokens = self.tokenize("\n".join([TOOLS_PREAMBLE, SAMPLING, TOOLS_POSTAMBLE, CHATML]))
        while len(tokens) < INVARIANCE_CONTEXT:
            tokens += tokens
        with self._lock:
            diffs = measure(tokens[:INVARIANCE_CONTEXT])
            self._prefixes.forget()
        write_invariance(path, setting, diffs)
        return diffs

    def _share_cores(self) -> None:
        """Compute the next call on the threads other processes leave free (:func:`.core_share.next_threads`)."""
        wanted = next_threads(self._cores, self.n_threads, self._threads_now, lambda: self.thread_invariance)
        if wanted != self._threads_now:
            self._llama_cpp.llama_set_n_threads(self.llm.ctx, wanted, wanted)
            self._threads_now = wanted

    def complete(self, request: Request) -> Completion:
        with self._lock:
            start = time.perf_counter()
            regex = output_regex(request)
            meta: dict[str, Any] = {"constrained": regex is not None}
            thinking = bool(request.thinking and self.thinking_supported)
            if request.thinking and not self.thinking_supported:
                meta["thinking"] = "unsupported"
            else:
                meta["thinking"] = "on" if thinking else "off"
            prompt = self.render(request)
            prompt_tokens = self.tokenize(prompt)
            completion_tokens = 0
            compile_s = 0.0
            prefix = ""
            budget = request.max_tokens
            if thinking:
                opened = prompt.rstrip().endswith(THINK_OPEN)
                head = "" if opened else THINK_OPEN + "\n"
                think, n, finish, _, _ = self._generate(
                    self.tokenize(prompt + head), request, min(self.thinking_budget, budget), stop=[THINK_CLOSE]
                )
                completion_tokens += n
                budget -= n
                meta["thinking_finished"] = finish == "stop"
                prefix = head + think + THINK_CLOSE + "\n\n"
            if budget > 0:
                gen_tokens = self.tokenize(prompt + prefix) if prefix else prompt_tokens
                text, n, finish, compile_s, counts = self._generate(gen_tokens, request, budget, regex=regex)
                completion_tokens += n
                meta.update(counts)
            else:
                text, finish = "", "length"
            if compile_s:
                meta["regex_compile_s"] = round(compile_s, 3)
            return completion_from_text(
                prefix + text,
                prompt_tokens=len(prompt_tokens),
                completion_tokens=completion_tokens,
                finish_reason=finish,
                latency_s=time.perf_counter() - start - compile_s,
                thinking_started=thinking,
                meta=meta,
            )

    def reset_context(self) -> None:
        """Evaluate the next prompt from its start: reuse nothing the context or the kept states hold (for
        measurements, and for code that evaluated in :attr:`llm` itself)."""
        self._prefixes.forget(states=True)

    def close(self) -> None:
        llm = getattr(self, "llm", None)
        if llm is not None:
            try:
                llm.close()
            except Exception:  # noqa: BLE001
                pass
            self.llm = None


def _template_of(llm: Any, override: str | None) -> tuple[str, str]:
    """The chat template and where it came from: ``override``, else the GGUF's own, else ChatML."""
    if override:
        return override, "override"
    found = llm.metadata.get("tokenizer.chat_template")
    return (found, "gguf") if found else (CHATML, "chatml-default")


def _import_llama_cpp() -> Any:
    try:
        import llama_cpp
    except ImportError as exc:
        raise BackendError(f"llama-cpp-python is not installed ({exc}); install with: {INSTALL_HINT}") from exc
    return llama_cpp

