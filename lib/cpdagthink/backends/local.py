"""CPU backend: a GGUF model under llama-cpp-python, regex constraints through outlines.

Prompting uses the GGUF's own chat template (``tokenizer.chat_template``), rendered with jinja2 exactly as
``llama_cpp.llama_chat_format.Jinja2ChatFormatter`` does, with ``tools``, ``enable_thinking`` and
``add_generation_prompt=True``. A template without tool support (SmolLM2's plain ChatML) gets the Qwen/Hermes
tool block appended to its system message, assistant calls written as ``<tool_call>`` text and tool results
as a user ``<tool_response>`` message, so every model sees the same protocol.

Generation is a raw completion on the rendered prompt tokens. A :class:`Constraint` becomes an outlines-core
regex index (wrapped in the Hermes envelope when the constraint names a tool), compiled once per pattern and
kept on disk. By default the constrained output is plain constrained decoding: the outlines logits processor
inside ``create_completion``'s sampler, one token per step. That processor runs in a llama.cpp callback, where
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
default model. So the backend measures this once per build and model (:func:`batch_invariance`, kept on
disk) and never evaluates a batch larger than the measured size: on the stock build the loop degenerates
to one token per step, exact and no faster. It is off by default because on the build that makes it fast,
prompt prefill is about 1.7x slower (measured), and most of the book's calls are prefill-bound.

Thinking is real or absent: with a template that reads ``enable_thinking`` (Qwen3-style), ``thinking=True``
first generates an unconstrained ``<think>...</think>`` phase (at most ``thinking_budget`` tokens), then the
constrained answer; with any other template the flag has no effect and is recorded as unsupported.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import hashlib
import json
import os
import pickle
import sys
import threading
import time
from collections import OrderedDict
from pathlib import Path
from typing import Any

import numpy as np

from ..files import write_atomic
from ..method.chat import Completion, Request
from .base import Backend, BackendError, Provenance, RequestRejected
from .jump_forward import DraftLength, IndexWalker, LookupDrafter, admitted_prefix
from .models import DEFAULT_MODEL, MODELS, default_cache_dir, resolve_model
from .toolcalls import (
    THINK_CLOSE,
    THINK_OPEN,
    chat_messages,
    completion_from_text,
    envelope_regex,
    envelope_text,
    render_unparsed_calls,
)

INSTALL_HINT = "pip install -e '.[local]'  (llama-cpp-python[server]==0.3.36, outlines[llamacpp]==1.3.3, numba)"

# Appended to the system message when the chat template cannot render tools itself (same text as Qwen2.5's).
TOOLS_PREAMBLE = (
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>"
)
TOOLS_POSTAMBLE = (
    "\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
    '<tool_call></tool_call> XML tags:\n<tool_call>\n{"name": <function-name>, "arguments": '
    "<args-json-object>}\n</tool_call>"
)
CHATML = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


_PARAMS_LOCK = threading.Lock()

# How a request's sampling fields are applied (part of the identity: it decides what a seed means).
SAMPLING = (
    "greedy at temperature 0; otherwise the request's top_k, top_p, min_p, temperature and seed in llama.cpp's "
    "chain top_k -> typical(1) -> top_p -> min_p -> temp -> dist(seed), over the tokens the constraint admits; "
    "repeat_penalty=1; a token the constraint forces is taken without sampling"
)


def cpu_has_amx() -> bool:
    """Whether the CPU advertises Intel AMX (``amx_tile`` in /proc/cpuinfo)."""
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.startswith("flags"):
                    return "amx_tile" in line.split()
    except OSError:
        pass
    return False


def default_extra_buffers() -> bool:
    """Whether llama.cpp may use its extra CPU buffer types (AMX, weight repacking).

    On this machine (a Firecracker VM) the CPU advertises AMX and the kernel grants the permission, yet the
    first AMX instruction (``tilezero`` in ``ggml_backend_amx_mul_mat``) dies with SIGILL as soon as a batch
    of more than one token is evaluated, killing the process. So the default is off when AMX is advertised;
    ``CPDAGTHINK_LLAMA_EXTRA_BUFFERS=1`` (or ``=0``) overrides.
    """
    env = os.environ.get("CPDAGTHINK_LLAMA_EXTRA_BUFFERS")
    if env is not None and env.strip() != "":
        return env.strip().lower() not in ("0", "false", "no", "off")
    return not cpu_has_amx()


@contextlib.contextmanager
def llama_model_params(extra_buffers: bool):
    """Make ``llama_cpp.Llama(...)`` load with ``use_extra_bufts=extra_buffers`` (not a constructor option)."""
    import llama_cpp.llama_cpp as capi

    with _PARAMS_LOCK:
        original = capi.llama_model_default_params

        def params():
            p = original()
            p.use_extra_bufts = extra_buffers
            return p

        capi.llama_model_default_params = params
        try:
            yield
        finally:
            capi.llama_model_default_params = original


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


def _template_variables(template: str) -> set[str]:
    """Names the template reads from its context (``tools``, ``enable_thinking``, ...)."""
    import jinja2
    import jinja2.ext
    import jinja2.meta
    from jinja2.sandbox import ImmutableSandboxedEnvironment
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter

    try:
        env = ImmutableSandboxedEnvironment(
            loader=jinja2.BaseLoader(),
            trim_blocks=True,
            lstrip_blocks=True,
            extensions=[Jinja2ChatFormatter.IgnoreGenerationTags, jinja2.ext.loopcontrols],
        )
        return set(jinja2.meta.find_undeclared_variables(env.parse(template)))
    except Exception:  # noqa: BLE001 - an unparsable template is reported when rendering
        return {name for name in ("tools", "enable_thinking") if name in template}


def tools_system_block(tools: list[dict[str, Any]]) -> str:
    """The Hermes tool description for templates without tool support."""
    return TOOLS_PREAMBLE + "".join("\n" + json.dumps(t, ensure_ascii=False) for t in tools) + TOOLS_POSTAMBLE


def fallback_messages(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Messages for a template without tool support: tools in the system message, calls and results as text.

    ``messages`` are already normalised by :func:`chat_messages` (arguments as text).
    """
    out: list[dict[str, Any]] = []
    for msg in messages:
        role = msg.get("role")
        if role == "assistant" and msg.get("tool_calls"):
            calls = "\n".join(envelope_text(c["function"]["name"], c["function"]["arguments"]) for c in msg["tool_calls"])
            content = msg.get("content") or ""
            out.append({"role": "assistant", "content": (content + "\n" if content else "") + calls})
        elif role == "tool":
            block = f"<tool_response>\n{msg.get('content') or ''}\n</tool_response>"
            if out and out[-1].get("role") == "user" and out[-1].get("_tool_results"):
                out[-1]["content"] += "\n" + block
            else:
                out.append({"role": "user", "content": block, "_tool_results": True})
        else:
            out.append({"role": role, "content": msg.get("content") or ""})
    for msg in out:
        msg.pop("_tool_results", None)
    if tools:
        block = tools_system_block(tools)
        if out and out[0]["role"] == "system":
            out[0] = {"role": "system", "content": (out[0]["content"] + "\n\n" if out[0]["content"] else "") + block}
        else:
            out.insert(0, {"role": "system", "content": block})
    return out


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


_TOKEN_DATA = np.dtype([("id", np.intc), ("logit", np.single), ("p", np.single)], align=True)  # llama_token_data


# The batch check runs at a context like a turn-1 prompt's (1.4k-1.8k tokens) and tries batches up to this size.
INVARIANCE_CONTEXT = 1024
INVARIANCE_ROWS = 8


def logits_row(llm: Any, i: int) -> np.ndarray:
    """The logits of row ``i`` of the last evaluated batch (-1: its last row), a view into llama.cpp's buffer
    that stays valid until the next evaluation."""
    import llama_cpp

    return np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(llm.ctx, i), shape=(llm.n_vocab(),))


def evaluate_rows(llm: Any, tokens: list[int]) -> list[np.ndarray]:
    """Evaluate ``tokens`` after ``llm``'s KV cache in one batch: the logits of every row (views, see
    :func:`logits_row`). ``Llama.eval`` keeps only the last row's."""
    past = llm.n_tokens
    llm._ctx.kv_cache_seq_rm(-1, past, -1)
    llm._batch.set_batch(batch=tokens, n_past=past, logits_all=True)
    llm._ctx.decode(llm._batch)
    llm.input_ids[past:past + len(tokens)] = tokens
    llm.n_tokens = past + len(tokens)
    return [logits_row(llm, i) for i in range(len(tokens))]


def batch_invariance(llm: Any, tokens: list[int], max_rows: int) -> dict[int, float]:
    """For k = 2..max_rows, the largest absolute difference between the logits of the last ``max_rows + 2``
    tokens evaluated one per step and with the first k of them in one batch (its k rows, then two one-token
    steps that read the batch's KV entries), after the same context. 0.0 means bit for bit the same."""
    context, probe = tokens[:-(max_rows + 2)], tokens[-(max_rows + 2):]
    llm.reset()
    llm.eval(context)
    start = llm.n_tokens
    reference = [evaluate_rows(llm, [token])[0].copy() for token in probe]
    diffs: dict[int, float] = {}
    for k in range(2, max_rows + 1):
        llm.n_tokens = start
        rows = [row.copy() for row in evaluate_rows(llm, probe[:k])]
        rows += [evaluate_rows(llm, [token])[0].copy() for token in probe[k:k + 2]]
        diffs[k] = max(float(np.max(np.abs(a - b))) for a, b in zip(rows, reference))
    llm.reset()
    return diffs


def verified_rows(diffs: dict[int, float]) -> int:
    """The largest k such that batches of 2..k tokens all matched one-token steps exactly (1: none did)."""
    rows = 1
    for k in sorted(diffs):
        if diffs[k] != 0.0:  # NaN fails too
            break
        rows = k
    return rows


def _invariance_sha256(setting: list[Any], diffs: dict[int, float]) -> str:
    """The checksum a stored batch check carries: over the build and model it was measured on and its values."""
    measured = {str(rows): diff for rows, diff in sorted(diffs.items())}
    return hashlib.sha256(json.dumps([setting, measured]).encode()).hexdigest()


def write_invariance(path: Path, setting: list[Any], diffs: dict[int, float]) -> None:
    """Keep a batch check (:func:`batch_invariance`) for the build and model ``setting`` names, with its checksum."""
    record = {"setting": setting, "max_abs_diff": diffs, "sha256": _invariance_sha256(setting, diffs)}
    write_atomic(path, json.dumps(record, indent=1))


def read_invariance(path: Path, setting: list[Any]) -> dict[int, float] | None:
    """The batch check kept at ``path`` for ``setting``; None (measure again) when it is absent, unreadable,
    made for another build or model, or altered since it was measured (its checksum does not match): a
    difference edited to 0 would otherwise let jump-forward batch where rows are not exact."""
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
        diffs = {int(rows): float(diff) for rows, diff in record["max_abs_diff"].items()}
        kept_for, checksum = record["setting"], record["sha256"]
    except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError):
        return None
    if kept_for != setting or checksum != _invariance_sha256(setting, diffs):
        return None
    return diffs


class AdmittedSampler:
    """Chooses the next token among those the constraint admits.

    Temperature 0 takes the highest logit (the lowest id on a tie, as llama.cpp's greedy sampler does);
    otherwise the admitted candidates go through the llama.cpp chain ``create_completion`` builds for the
    same settings, seeded with the request's seed. Dropping the tokens the constraint excludes before the
    chain gives the distribution masking them to -inf gives. A single admitted token is taken as is: it
    has probability 1, and no random draw is spent on it, so jump-forward leaves the draws unchanged.
    """

    def __init__(self, request: Request):
        self.chain = None
        if request.temperature > 0:
            from llama_cpp._internals import LlamaSampler

            chain = LlamaSampler()
            chain.add_top_k(request.top_k)
            chain.add_typical(1.0, 1)
            chain.add_top_p(request.top_p, 1)
            chain.add_min_p(request.min_p, 1)
            chain.add_temp(request.temperature)
            chain.add_dist(request.seed)
            self.chain = chain

    def choose(self, logits: np.ndarray, admitted: np.ndarray) -> int:
        if len(admitted) == 1:
            return int(admitted[0])
        scores = logits[admitted]
        if self.chain is None:
            return int(admitted[int(np.argmax(scores))])
        import llama_cpp

        candidates = np.zeros(len(admitted), dtype=_TOKEN_DATA)
        candidates["id"] = admitted
        candidates["logit"] = scores
        array = llama_cpp.llama_token_data_array(
            data=candidates.ctypes.data_as(llama_cpp.llama_token_data_p), size=len(admitted), selected=-1, sorted=False
        )
        llama_cpp.llama_sampler_apply(self.chain.sampler, ctypes.byref(array))
        token = int(candidates["id"][array.selected])
        self.chain.accept(token)
        return token

    def close(self) -> None:
        if self.chain is not None:
            self.chain.close()


class LocalBackend(Backend):
    """A GGUF chat model on CPU. ``model``: a short name from :data:`models.MODELS` or a ``.gguf`` path.

    ``jump_forward=True`` decodes constrained output with this module's exact loop (module docstring),
    drafting up to ``draft_tokens`` tokens per step where the llama.cpp build computes such batches exactly.
    """

    name = "local"

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        *,
        n_ctx: int = 16384,
        n_threads: int = 2,
        n_batch: int = 512,
        seed: int = 0,
        cache_dir: str | None = None,
        chat_template: str | None = None,
        thinking_budget: int = 1024,
        max_cached_regexes: int = 32,
        extra_buffers: bool | None = None,
        ram_cache_gib: float = 4.0,
        jump_forward: bool = False,
        draft_tokens: int = 6,
        verbose: bool = False,
    ):
        try:
            import llama_cpp
            from llama_cpp.llama_chat_format import Jinja2ChatFormatter
        except ImportError as exc:
            raise BackendError(f"llama-cpp-python is not installed ({exc}); install with: {INSTALL_HINT}") from exc
        self.model_file = resolve_model(model, cache_dir)
        self.n_ctx = n_ctx
        self.n_threads = n_threads
        self.thinking_budget = thinking_budget
        self.jump_forward = jump_forward
        self.draft_tokens = draft_tokens
        self.extra_buffers = default_extra_buffers() if extra_buffers is None else extra_buffers
        try:
            with llama_model_params(self.extra_buffers):
                self.llm = llama_cpp.Llama(
                    model_path=str(self.model_file.path),
                    n_ctx=n_ctx,
                    n_threads=n_threads,
                    n_threads_batch=n_threads,
                    n_batch=n_batch,
                    n_gpu_layers=0,
                    seed=seed,
                    verbose=verbose,
                )
        except Exception as exc:  # noqa: BLE001
            raise BackendError(f"llama.cpp could not load {self.model_file.path}: {exc}") from exc
        self._llama_cpp = llama_cpp
        if ram_cache_gib > 0:
            # Keeps the KV state of recent prompts and restores the longest matching prefix, so instances
            # that alternate (conditions, probes, turn 2 after another instance) skip most of their prefill.
            self.llm.set_cache(llama_cpp.LlamaRAMCache(capacity_bytes=int(ram_cache_gib * 2**30)))
        model_obj = self.llm._model
        self._eos_id = self.llm.token_eos()
        bos_id = self.llm.token_bos()
        self._bos_text = model_obj.token_get_text(bos_id) if bos_id != -1 else ""
        eos_text = model_obj.token_get_text(self._eos_id) if self._eos_id != -1 else ""
        self._add_bos = bool(model_obj.add_bos_token()) and bos_id != -1
        self.template_source = "override" if chat_template else "gguf"
        template = chat_template or self.llm.metadata.get("tokenizer.chat_template")
        if not template:
            template, self.template_source = CHATML, "chatml-default"
        self.chat_template = template
        self._formatter = Jinja2ChatFormatter(template=template, eos_token=eos_text, bos_token=self._bos_text)
        variables = _template_variables(template)
        self.native_tools = "tools" in variables
        self.thinking_supported = "enable_thinking" in variables
        self._lock = threading.RLock()
        self._outlines_backend = None
        self._indexes: OrderedDict[str, IndexWalker] = OrderedDict()
        self._max_cached = max_cached_regexes
        self._index_dir = Path(cache_dir or default_cache_dir()) / "regex-indexes"

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
            "chat_template_sha256": hashlib.sha256(self.chat_template.encode()).hexdigest(),
            "chat_template_source": self.template_source,
            "tool_format": "native-template" if self.native_tools else "system-prompt-hermes",
            "thinking": "supported" if self.thinking_supported else "unsupported",
            "thinking_budget": self.thinking_budget if self.thinking_supported else None,
            # builds with and without llamafile sum differently: their outputs are cached apart (a key only for
            # the non-stock build, so records and caches of the stock build stay valid)
            **({} if self.stock_build else {"llama_cpp_build": "without llamafile"}),
        }

    @property
    def stock_build(self) -> bool:
        """Whether llama.cpp was built as PyPI's sdist builds by default (with llamafile's sgemm)."""
        return "LLAMAFILE = 1" in self._llama_cpp.llama_print_system_info().decode()

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
        tools = [dict(t) for t in request.tools]
        if self.native_tools:
            messages = render_unparsed_calls(chat_messages(request.messages, arguments_as="dict"))
        else:
            messages = fallback_messages(chat_messages(request.messages, arguments_as="str"), tools)
            tools = []
        kwargs: dict[str, Any] = {}
        if self.thinking_supported:
            kwargs["enable_thinking"] = request.thinking if thinking is None else thinking
        try:
            return self._formatter(messages=messages, tools=tools or None, **kwargs).prompt
        except Exception as exc:  # noqa: BLE001
            raise BackendError(f"the chat template of {self.model_file.name} failed to render: {exc}") from exc

    def tokenize(self, text: str) -> list[int]:
        add_bos = self._add_bos and not (self._bos_text and text.startswith(self._bos_text))
        return self.llm.tokenize(text.encode("utf-8"), add_bos=add_bos, special=True)

    # ----------------------------------------------------------------------------------------- constraints
    def _walker(self, regex: str) -> tuple[IndexWalker, float]:
        """The compiled index for ``regex`` (memory, then disk, else compiled now) and the compile seconds."""
        compile_s = 0.0
        walker = self._indexes.get(regex)
        if walker is None:
            index = self._load_index(regex)
            if index is None:
                try:
                    import outlines
                    from outlines.backends.outlines_core import OutlinesCoreBackend
                except ImportError as exc:
                    raise BackendError(f"regex constraints need outlines ({exc}); install with: {INSTALL_HINT}") from exc
                start = time.perf_counter()
                if self._outlines_backend is None:
                    self._outlines_backend = OutlinesCoreBackend(outlines.from_llamacpp(self.llm, chat_mode=False))
                try:
                    index = self._outlines_backend.get_regex_logits_processor(regex).index
                except Exception as exc:  # noqa: BLE001
                    raise BackendError(f"outlines could not compile the constraint regex: {exc}") from exc
                compile_s = time.perf_counter() - start
                self._save_index(regex, index)
            walker = IndexWalker(index, self._eos_id)
            self._indexes[regex] = walker
            while len(self._indexes) > self._max_cached:
                self._indexes.popitem(last=False)
        else:
            self._indexes.move_to_end(regex)
        return walker, compile_s

    def _processor(self, walker: IndexWalker) -> _GuardedProcessor:
        """A fresh guarded outlines logits processor over the walker's index (plain constrained decoding)."""
        try:
            import outlines_core.kernels.numpy  # noqa: F401 - needs numba: fail here, not in the callback
            from outlines.backends.outlines_core import OutlinesCoreLogitsProcessor
        except ImportError as exc:
            raise BackendError(f"plain constrained decoding needs numba ({exc}); install with: {INSTALL_HINT}") from exc
        return _GuardedProcessor(OutlinesCoreLogitsProcessor(walker.index, "numpy"), self._eos_id)

    def _index_path(self, regex: str) -> Path:
        key = hashlib.sha256(f"{self.model_file.sha256}\n{regex}".encode()).hexdigest()
        return self._index_dir / f"{key}.pkl"

    def _load_index(self, regex: str) -> Any | None:
        """A compiled index saved by an earlier process (compiling a 6-variable regex takes ~15 s)."""
        path = self._index_path(regex)
        if not path.is_file():
            return None
        try:
            return pickle.loads(path.read_bytes())
        except Exception:  # noqa: BLE001 - a damaged file is recompiled and overwritten
            return None

    def _save_index(self, regex: str, index: Any) -> None:
        path = self._index_path(regex)
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_suffix(f".{os.getpid()}.tmp")
        temporary.write_bytes(pickle.dumps(index))
        temporary.replace(path)

    # ----------------------------------------------------------------------------------------- generation
    def _generate(self, tokens: list[int], request: Request, max_tokens: int, *, regex: str | None = None,
                  stop: list[str] | None = None) -> tuple[str, int, str | None, float, dict[str, int]]:
        """Text, completion tokens, finish reason, regex compile seconds, and the decoder's counts (forced
        and drafted tokens, forward passes; empty without the own decoder)."""
        room = self.n_ctx - len(tokens)
        if room <= 0:
            raise RequestRejected(f"prompt of {len(tokens)} tokens does not fit n_ctx={self.n_ctx}")
        max_tokens = max(1, min(max_tokens, room))
        walker, guard, compile_s = None, None, 0.0
        if regex is not None:
            walker, compile_s = self._walker(regex)
            if self.jump_forward:
                text, n, finish, counts = self._decode_constrained(tokens, request, max_tokens, walker)
                return text, n, finish, compile_s, counts
            guard = self._processor(walker)
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
        return choice["text"], int(out["usage"]["completion_tokens"]), choice.get("finish_reason"), compile_s, {}

    def _decode_constrained(self, prompt: list[int], request: Request, max_tokens: int,
                            walker: IndexWalker) -> tuple[str, int, str, dict[str, int]]:
        """Constrained decoding with jump-forward and verified drafts: text, tokens, finish reason, counts.

        The prompt is evaluated as ``create_completion`` evaluates it. Each step then appends the tokens the
        constraint forces and evaluates the tokens not yet evaluated together with a draft, in batches of
        at most :attr:`batch_rows` tokens (the size this build computes exactly as one-token steps), and
        chooses the next token at each drafted position in turn with the rule plain decoding uses; the
        draft is kept while it equals the choice, and the first choice that differs is kept instead. So
        the output is the one token-by-token decoding gives (greedy: the same tokens; sampled: the same
        draws).
        """
        llm, capi = self.llm, self._llama_cpp
        cap = self.batch_rows
        self._restore_cached_state(prompt)
        rows = [self._prefill(prompt)]
        drafter = LookupDrafter(prompt) if self.draft_tokens > 0 and cap > 1 else None
        length = DraftLength(min(self.draft_tokens, cap - 1))
        sampler = AdmittedSampler(request)
        state, out, draft, pending, finish = walker.initial_state, [], [], [], "length"
        counts = {"forced_tokens": 0, "drafted_tokens": 0, "forward_passes": 0, "batch_rows": cap}

        def take(token: int) -> None:
            nonlocal state
            out.append(token)
            state = walker.advance(state, token)
            if drafter is not None:
                drafter.extend([token])

        try:
            while True:
                for position, logits in enumerate(rows):
                    admitted = walker.allowed(state)
                    if len(admitted) == 0:
                        raise BackendError(f"the constraint admits no token in state {state} (the regex has a dead end)")
                    token = sampler.choose(logits, admitted)
                    if position < len(draft) and token == draft[position]:
                        take(token)
                        continue
                    self._discard(len(draft) - position)  # the drafted tokens after this position
                    length.update(len(draft), position)
                    counts["drafted_tokens"] += position
                    if capi.llama_vocab_is_eog(llm._model.vocab, token):
                        finish = "stop"
                    else:
                        take(token)
                        pending = [token]
                    break
                if finish == "stop" or len(out) >= max_tokens:
                    break
                run, _ = walker.forced_run(state, max_tokens - len(out))
                for token in run:
                    take(token)
                pending += run
                counts["forced_tokens"] += len(run)
                if len(out) >= max_tokens:
                    break
                if walker.only_end(state):
                    finish = "stop"
                    break
                while len(pending) > cap:  # a long forced run: no logits needed until its end
                    evaluate_rows(llm, pending[:cap])
                    counts["forward_passes"] += 1
                    pending = pending[cap:]
                room = min(length.current, cap - len(pending), max_tokens - len(out) - 1)
                draft = admitted_prefix(walker, state, drafter.propose(room)) if drafter is not None else []
                rows = evaluate_rows(llm, pending + draft)[-(len(draft) + 1):]
                counts["forward_passes"] += 1
                pending = []
        finally:
            sampler.close()
        if llm.cache:
            llm.cache[prompt + out] = llm.save_state()
        text = llm.detokenize(out, prev_tokens=prompt).decode("utf-8", errors="ignore")
        return text, len(out), finish, counts

    def _discard(self, count: int) -> None:
        """Drop the last ``count`` evaluated tokens from the KV cache (a draft the model did not follow)."""
        if count > 0:
            self.llm.n_tokens -= count
            self.llm._ctx.kv_cache_seq_rm(-1, self.llm.n_tokens, -1)

    def _restore_cached_state(self, prompt: list[int]) -> None:
        """Load the RAM-cached KV state sharing the longest prefix with ``prompt``, as ``create_completion`` does."""
        llm = self.llm
        if not llm.cache:
            return
        try:
            item = llm.cache[prompt]
        except KeyError:
            return
        if llm.longest_token_prefix(item.input_ids.tolist(), prompt) > llm.longest_token_prefix(llm._input_ids.tolist(), prompt):
            llm.load_state(item)

    def _prefill(self, prompt: list[int]) -> np.ndarray:
        """Evaluate ``prompt`` after the longest prefix already in the KV cache, exactly as
        ``create_completion`` does (same calls, same batches): the logits after its last token."""
        llm = self.llm
        keep = min(llm.longest_token_prefix(llm._input_ids.tolist(), prompt), len(prompt) - 1)
        if keep <= 0 or not llm._ctx.kv_cache_seq_rm(-1, keep, -1):
            llm.reset()
            keep = 0
        llm.n_tokens = keep
        llm.eval(prompt[keep:])
        return logits_row(llm, -1)

    @functools.cached_property
    def batch_rows(self) -> int:
        """The largest batch whose every row this llama.cpp build computes bit for bit as a one-token step
        (1: none), measured by :func:`batch_invariance` once per build and model and kept on disk."""
        return verified_rows(self.batch_invariance())

    def batch_invariance(self) -> dict[int, float]:
        """:func:`batch_invariance` for this model and build, from the disk cache when measured before."""
        capi = self._llama_cpp
        setting = [self.model_file.sha256, capi.__version__, capi.llama_print_system_info().decode(), self.n_threads,
                   self.extra_buffers, INVARIANCE_CONTEXT, INVARIANCE_ROWS]
        key = hashlib.sha256(json.dumps(setting).encode()).hexdigest()
        path = self._index_dir.parent / "batch-invariance" / f"{key}.json"
        stored = read_invariance(path, setting)
        if stored is not None:
            return stored
        text = "\n".join([TOOLS_PREAMBLE, SAMPLING, TOOLS_POSTAMBLE, CHATML])
        tokens = self.tokenize(text)
        while len(tokens) < INVARIANCE_CONTEXT:
            tokens += tokens
        with self._lock:
            diffs = batch_invariance(self.llm, tokens[:INVARIANCE_CONTEXT], INVARIANCE_ROWS)
        write_invariance(path, setting, diffs)
        return diffs

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

    def close(self) -> None:
        llm = getattr(self, "llm", None)
        if llm is not None:
            try:
                llm.close()
            except Exception:  # noqa: BLE001
                pass
            self.llm = None


if __name__ == "__main__":
    serve()
