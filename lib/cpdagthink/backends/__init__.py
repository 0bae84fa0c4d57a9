"""Backends: one interface (:mod:`.base`) over llama.cpp on CPU, OpenAI-compatible APIs and offline vLLM.

``make_backend("local" | "openai" | "vllm" | "reference", **options)`` builds one; the heavy libraries are imported only
when that backend is built. To register another backend, add one entry to :data:`BACKENDS` (an import path
``"module:attribute"`` relative to this package or absolute, or any callable returning a :class:`Backend`).
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Mapping
from typing import Any, Callable

from ..method.chat import Completion, Constraint, Request, ToolCall
from .base import Backend, BackendError

BACKENDS: dict[str, str | Callable[..., Backend]] = {
    "local": ".local:LocalBackend",
    "openai": ".openai_api:OpenAIBackend",
    "vllm": ".vllm_offline:VLLMBackend",
    "reference": ".reference:ReferenceBackend",
}


def backend_factory(name: str) -> Callable[..., Backend]:
    """The class or callable registered under ``name``."""
    if name not in BACKENDS:
        raise ValueError(f"unknown backend {name!r}; choose one of: {', '.join(sorted(BACKENDS))}")
    entry = BACKENDS[name]
    if callable(entry):
        return entry
    module_name, _, attribute = entry.partition(":")
    module = importlib.import_module(module_name, package=__name__ if module_name.startswith(".") else None)
    return getattr(module, attribute)


def check_options(name: str, options: Mapping[str, Any]) -> None:
    """Refuse, by name and with the ones it does take, an option the backend ``name`` does not take. Cheap:
    it reads the factory's signature without building anything, so configurations check it up front."""
    parameters = inspect.signature(backend_factory(name)).parameters.values()
    accepted = [p.name for p in parameters if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    takes_any = any(p.kind is p.VAR_KEYWORD for p in parameters)
    unknown = sorted(set(options) - set(accepted))
    if unknown and not takes_any:
        raise ValueError(f"backend {name!r} does not take {', '.join(unknown)}; it takes: {', '.join(accepted) or 'no options'}")


def make_backend(name: str, **options: Any) -> Backend:
    """Build the backend registered under ``name`` with keyword ``options`` (see each backend's class);
    options are checked first (:func:`check_options`)."""
    check_options(name, options)
    return backend_factory(name)(**options)


__all__ = [
    "BACKENDS",
    "Backend",
    "BackendError",
    "Completion",
    "Constraint",
    "Request",
    "ToolCall",
    "backend_factory",
    "check_options",
    "make_backend",
]
