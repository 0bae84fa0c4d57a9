"""Backends: one interface (:mod:`.base`) over llama.cpp on CPU, OpenAI-compatible APIs and offline vLLM.

``make_backend("local" | "openai" | "vllm" | "reference", **options)`` builds one; the heavy libraries are imported only
when that backend is built. To register another backend, add one entry to :data:`BACKENDS` (an import path
``"module:attribute"`` relative to this package or absolute, or any callable returning a :class:`Backend`).
"""

from __future__ import annotations

import importlib
import inspect
from typing import Any, Callable

from .base import Backend, BackendError, Completion, Constraint, Request, ToolCall

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


def make_backend(name: str, **options: Any) -> Backend:
    """Build the backend registered under ``name`` with keyword ``options`` (see each backend's class).
    An option the backend does not take is refused by name, with the ones it does take."""
    factory = backend_factory(name)
    accepted = [p.name for p in inspect.signature(factory).parameters.values()
                if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    takes_any = any(p.kind is p.VAR_KEYWORD for p in inspect.signature(factory).parameters.values())
    unknown = sorted(set(options) - set(accepted))
    if unknown and not takes_any:
        raise ValueError(f"backend {name!r} does not take {', '.join(unknown)}; it takes: {', '.join(accepted) or 'no options'}")
    return factory(**options)


__all__ = [
    "BACKENDS",
    "Backend",
    "BackendError",
    "Completion",
    "Constraint",
    "Request",
    "ToolCall",
    "backend_factory",
    "make_backend",
]
