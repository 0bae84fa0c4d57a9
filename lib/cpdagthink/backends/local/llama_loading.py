"""Loading a GGUF model into llama.cpp on a CPU: the extra buffer types it may use, and the one way the
backend and the server load it."""

from __future__ import annotations

import contextlib
import os
import threading
from pathlib import Path
from typing import Any

from ..base import BackendError

__all__ = ["cpu_has_amx", "default_extra_buffers", "llama_model_params", "load_model", "quiet_llama_log"]

_PARAMS_LOCK = threading.Lock()

# ggml's log levels as the bundled llama.cpp numbers them (ggml.h: 1 debug, 2 info, 3 warn, 4 error, 5 the
# continuation of the previous line). llama-cpp-python's own callback reads them with an older numbering, 3 as
# an error, so with verbose=False a warning such as ``n_ctx_seq (...) > n_ctx_train (...)`` still printed on
# every load, into a chapter's page when a notebook loads the model.
_GGML_ERROR, _GGML_CONTINUE = 4, 5
_LOG: dict[str, Any] = {"verbose": False, "last": 0, "callback": None}


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


def _log_line(level: int, text: bytes, _user_data: Any) -> None:
    """llama.cpp's log: every line when loaded verbose, else its errors only, written to the process's standard
    error as native code writes (in a book's kernel that is the chapter's kernel log, not the page)."""
    if level != _GGML_CONTINUE:
        _LOG["last"] = level
    if _LOG["verbose"] or _LOG["last"] >= _GGML_ERROR:
        try:
            os.write(2, text)
        except OSError:  # no standard error to write to: the line is dropped, as the console would drop it
            pass


def quiet_llama_log(llama_cpp: Any, verbose: bool) -> None:
    """Send llama.cpp's log through :func:`_log_line` (all lines if ``verbose``, else errors only). The callback
    is process-wide and kept here so it outlives the call."""
    import ctypes

    _LOG["verbose"] = verbose
    if _LOG["callback"] is None:
        _LOG["callback"] = llama_cpp.llama_log_callback(_log_line)
    llama_cpp.llama_log_set(_LOG["callback"], ctypes.c_void_p(0))


def load_model(llama_cpp: Any, path: Path, extra_buffers: bool, *, n_ctx: int, n_threads: int, n_batch: int,
               seed: int, verbose: bool) -> Any:
    """The GGUF at ``path`` loaded on CPU (its threads for prompt batches too), with llama.cpp's log as
    :func:`quiet_llama_log` sets it."""
    quiet_llama_log(llama_cpp, verbose)
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
