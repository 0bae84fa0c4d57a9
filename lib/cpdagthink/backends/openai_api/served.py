"""What an OpenAI-compatible server says it serves under a model's name, where it says it.

A server restarted on other weights under the same served name answers requests for that name as before, so
nothing in the requests tells the two apart. Some servers say which weights stand behind a name: vLLM lists
each served name with its ``root`` (the weights it loaded: a hub id or a folder) on ``/v1/models``; llama.cpp's
``llama-server`` lists its model as ``owned_by: "llamacpp"`` and gives the file it loaded as ``model_path`` on
``/props``; ``llama_cpp.server`` (Python), serving one model whatever name a request gives, lists it under its
alias or its file's path. OpenAI's own API and other hosted services list the name alone (no ``root``):
they say nothing more, and :func:`served_weights` is then None.

Any failure to ask (no such route, an unreachable server, a body of another shape) is "says nothing": the
question never stops a run, and a server that cannot be asked is asked by the run's own requests.
"""

from __future__ import annotations

import threading
from typing import Any
from urllib.parse import urlsplit

from ..transport import bounded, run_concurrently
from .endpoints import OPENAI_HOST

# Seconds the question may take at most (the backend's own timeout, when shorter): a server answers its
# listing at once even while it generates, and a silent one must not hold a run's start for long.
ASK_TIMEOUT_S = 5.0
# Characters of a server's answer kept (it is stored in metadata and the identity; a path is far shorter).
WEIGHTS_CHARS = 1024


def served_weights(client: Any, model: str, timeout: float) -> str | None:
    """The weights the server behind ``client`` (an ``openai.OpenAI``) says it serves under ``model``, or None
    where it says nothing that names them (module docstring)."""
    timeout = min(timeout, ASK_TIMEOUT_S)
    listing = _get_json(client, "models", timeout)
    entries = [e for e in (listing or {}).get("data") or [] if isinstance(e, dict)]
    named = [e for e in entries if e.get("id") == model]
    # A server of one model answers any name with it (llama.cpp's): its one entry is what serves.
    entry = named[0] if named else entries[0] if len(entries) == 1 else None
    if entry is None:
        return None
    weights = _weights_named(client, entry, timeout) or (entry["id"] if not named and _text(entry.get("id")) else None)
    return weights[:WEIGHTS_CHARS] if weights else None


def _weights_named(client: Any, entry: dict[str, Any], timeout: float) -> str | None:
    """The weights a listed model's ``entry`` names: vLLM's ``root``, or llama.cpp's ``model_path`` on ``/props``."""
    if _text(entry.get("root")):
        return entry["root"]
    if entry.get("owned_by") == "llamacpp":
        props = _get_json(client, _server_root(client) + "/props", timeout) or {}
        if _text(props.get("model_path")):
            return props["model_path"]
    return None


def _text(value: Any) -> bool:
    return isinstance(value, str) and bool(value)


def _server_root(client: Any) -> str:
    """The server's own address: its API's base URL without the ``/v1`` the OpenAI routes sit under
    (llama.cpp's ``/props`` is beside them)."""
    base = str(client.base_url).rstrip("/")
    return base.removesuffix("/v1")


def _get_json(client: Any, path: str, timeout: float) -> dict[str, Any] | None:
    """The JSON object a GET of ``path`` (relative to the API's base URL, or absolute) answers with, sent with
    the client's key within ``timeout`` seconds in all; None on any failure."""
    import httpx

    try:
        with bounded(timeout):
            response = client.get(path, cast_to=httpx.Response, options={"timeout": timeout})
        body = response.json()
    except Exception:  # noqa: BLE001 - a server that cannot say what it serves says nothing
        return None
    return body if isinstance(body, dict) else None


def endpoints_weights(clients: list[Any], urls: list[str], model: str, timeout: float) -> str | None:
    """What every endpoint (``clients``, recorded as ``urls``) says it serves under ``model``
    (:func:`served_weights`), asked at once on daemon threads (Ctrl-C stops the wait): one answer, or None where
    none says; a ``ValueError`` naming the endpoints where two name different weights (round-robin over them
    would mix two models in one run). OpenAI's own API is not asked: it names no weights."""
    asked = [(url, client) for url, client in zip(urls, clients) if urlsplit(url).hostname != OPENAI_HOST]
    answers = run_concurrently(lambda pair: served_weights(pair[1], model, timeout), asked, len(asked) or 1,
                               threading.Event())
    said = {url: w for (url, _), w in zip(asked, answers) if isinstance(w, str)}
    if len(set(said.values())) > 1:
        raise ValueError(f"the endpoints serve different weights under {model!r}: "
                         + "; ".join(f"{url}: {w}" for url, w in said.items()))
    return next(iter(said.values()), None)
