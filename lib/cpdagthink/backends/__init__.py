"""Backends: one interface (:mod:`.base`) over llama.cpp on CPU, OpenAI-compatible APIs and offline vLLM.

``make_backend("local" | "openai" | "vllm" | "reference", **options)`` builds one; the heavy libraries are imported only
when that backend is built. To register another backend, add one entry to :data:`BACKENDS` (an import path
``"module:attribute"`` relative to this package or absolute, or any callable returning a :class:`Backend`).
What the rest of the package must know of a backend before building it (how a grid job is sized, its model's
title, its recommended sampling, the conditions it refuses) it asks the class, :func:`backend_class`.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Iterable, Mapping
from typing import Any, Callable

from ..method.chat import Completion, Constraint, Request, ToolCall
from .base import Backend, BackendError, read_options

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


# What to do when a model is named for a backend that runs none (the reference backend: `prompt`'s default).
_RUNS_NO_MODEL = (" (it runs no model: name the backend that runs yours, e.g. --backend local for a GGUF on this "
                  "machine, openai for an OpenAI-compatible endpoint, vllm for vLLM)")


def backend_class(name: str) -> type[Backend]:
    """The :class:`Backend` class registered under ``name``, whose class-level answers (``sized_by``,
    :meth:`Backend.model_title`, ...) describe its family without building it; :class:`Backend` itself (every
    default answer) for a factory that is not a class."""
    factory = backend_factory(name)
    return factory if inspect.isclass(factory) and issubclass(factory, Backend) else Backend


def answers_without_model(name: str) -> bool:
    """Whether the backend registered under ``name`` answers without a language model (``Backend.symbolic``:
    the reference agent), so a page reads its rows as an upper bound, never as evidence about LLMs; False for a
    name nobody registered (a record of unknown origin is read as a model's)."""
    return name in BACKENDS and backend_class(name).symbolic


def check_options(name: str, options: Mapping[str, Any], whole: bool = False) -> dict[str, Any]:
    """``options`` as the backend ``name`` takes them, read against its factory's signature without building
    anything (so configurations check them up front): an option it does not take is refused by name, with the
    ones it does take; a value its annotation refuses, by name and the annotation's reason (the value is not
    quoted: it may be a URL); and, when ``options`` are ``whole`` (all it will be built with), one it needs and
    lacks (the ``openai`` backend's model), by name. Returns the values as the annotations read them (``"30"``
    for a float is 30.0, a number for a string its text)."""
    factory = backend_factory(name)
    parameters = inspect.signature(factory).parameters.values()
    accepted = [p.name for p in parameters if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    takes_any = any(p.kind is p.VAR_KEYWORD for p in parameters)
    unknown = sorted(set(options) - set(accepted))
    if unknown and not takes_any:
        raise ValueError(f"backend {name!r} does not take {', '.join(unknown)}; it takes: {', '.join(accepted) or 'no options'}"
                         + (_RUNS_NO_MODEL if "model" in unknown else ""))
    if whole:
        _refuse_missing(name, parameters, options)
    return read_options(factory, name, options)


def _refuse_missing(name: str, parameters: Iterable[inspect.Parameter], options: Mapping[str, Any]) -> None:
    """Refuse, by name and the flag that gives it, an option backend ``name`` needs (no default) and lacks:
    its factory would fail with a TypeError."""
    needed = [p.name for p in parameters if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
              and p.default is p.empty and p.name not in options]
    if needed:
        given = "--model NAME" if needed == ["model"] else f"-o {needed[0]}=VALUE"
        raise ValueError(f"backend {name!r} needs {', '.join(needed)}: give it with {given}")


def make_backend(name: str, **options: Any) -> Backend:
    """Build the backend registered under ``name`` with keyword ``options`` (see each backend's class);
    options are checked first (:func:`check_options`), as all it is built with."""
    check_options(name, options, whole=True)
    return backend_factory(name)(**options)


__all__ = [
    "BACKENDS",
    "Backend",
    "BackendError",
    "Completion",
    "Constraint",
    "Request",
    "ToolCall",
    "answers_without_model",
    "backend_class",
    "backend_factory",
    "check_options",
    "make_backend",
]
