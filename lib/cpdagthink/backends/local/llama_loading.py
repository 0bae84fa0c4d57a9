"""Loading a GGUF model into llama.cpp on a CPU: the extra buffer types it may use, and the one way the
backend and the server load it."""

from __future__ import annotations

import contextlib
import os
import threading
from pathlib import Path
from typing import Any

from ..base import BackendError

__all__ = ["cpu_has_amx", "default_extra_buffers", "llama_model_params", "load_model"]

_PARAMS_LOCK = threading.Lock()


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


def load_model(llama_cpp: Any, path: Path, extra_buffers: bool, *, n_ctx: int, n_threads: int, n_batch: int,
               seed: int, verbose: bool) -> Any:
    """The GGUF at ``path`` loaded on CPU (its threads for prompt batches too)."""
    try:
        with llama_model_params(extra_buffers):
            return llama_cpp.Llama(
                model_path=str(path),
                n_ctx=n_ctx,
                n_threads=n_threads,
                n_threads_batch=n_threads,
                n_batch=n_batch,
                n_gpu_layers=0,
                seed=seed,
                verbose=verbose,
            )
    except Exception as exc:  # noqa: BLE001
        raise BackendError(f"llama.cpp could not load {path}: {exc}") from exc
