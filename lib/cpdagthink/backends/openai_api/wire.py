"""One direct call of an OpenAI-compatible API as the openai client's typed ``create`` sends it, without the
client's per-call work that changes nothing for this backend's payloads.

Why not ``create``: it runs every keyword argument through ``maybe_transform`` (a walk of the whole payload,
the tools' schema included, against the parameters' TypedDict annotations, for aliases, dates and files) and
reads the answer through its raw-response wrapper. On a streaming run that was about half the backend's CPU
per call, and a run with 64 requests in flight on two cores is bound by that CPU. The payloads
:mod:`.payloads` builds are plain JSON (dicts, lists, strings, numbers) that no parameter aliases or formats,
so the transform hands them back unchanged but for the order of their keys, which is the order of
``create``'s parameters. :func:`call_for` orders them so, and the call goes through the client's own ``post``
(its base URL, auth, headers, connection pool, timeouts and error mapping are kept), so the body on the wire
is ``create``'s byte for byte: tests/test_wire.py sends both through the installed client and compares. The
answer comes back as the raw ``httpx.Response`` and is read into the client's typed object
(:func:`.responses.typed`: no validation, as the client reads answers) once the request has given its slot back.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import json
from typing import Any

from .responses import typed

# ``create``'s parameters that are request options, not body fields: extra_body is merged into the body by the
# client (after the ordered fields, as ``create`` has it), the rest are never sent by this backend.
_OPTIONS = ("self", "extra_headers", "extra_query", "extra_body", "timeout")


@dataclasses.dataclass(frozen=True)
class Call:
    """One request ready to send: the path under the client's base URL, the body in ``create``'s key order,
    the client's request options, and the client's type of the answer."""

    path: str
    body: dict[str, Any]
    options: dict[str, Any]
    kind: type

    def send(self, client: Any) -> Any:
        """POST it on ``client``; the ``httpx.Response`` (an error status raises the client's own exceptions)."""
        import httpx

        return client.post(self.path, body=self.body, options=self.options, cast_to=httpx.Response)

    def read(self, response: Any) -> Any:
        """The answer's body read into the client's typed object; ValueError when the body is not a JSON object
        (a body of JSON's other shapes or none: the server's fault, retried like a 5xx)."""
        data = json.loads(response.content)
        if not isinstance(data, dict):
            raise ValueError(f"the body is a JSON {type(data).__name__}, not an object")
        return typed(self.kind, data)


@functools.lru_cache(maxsize=None)
def _api(api: str) -> tuple[str, tuple[str, ...], type]:
    """(path, body fields in the order ``create`` builds its body, the answer's type) of the client's ``create``
    for ``api``: its parameters' order, less those that are request options."""
    if api == "responses":
        from openai.resources.responses import Responses as resource
        from openai.types.responses import Response as kind
        path = "/responses"
    else:
        from openai.resources.chat.completions import Completions as resource  # type: ignore[assignment]
        from openai.types.chat import ChatCompletion as kind  # type: ignore[assignment]
        path = "/chat/completions"
    fields = tuple(name for name in inspect.signature(resource.create).parameters if name not in _OPTIONS)
    return path, fields, kind


def prepare(api: str) -> None:
    """Import the client's types and read ``create``'s parameters for ``api`` now, once: the first calls of a run
    made at once would otherwise each wait on that import before sending."""
    _api(api)


def call_for(api: str, kwargs: dict[str, Any]) -> Call:
    """The :class:`Call` that ``client.chat.completions.create(**kwargs)`` (``api`` "chat") or
    ``client.responses.create(**kwargs)`` ("responses") would make. TypeError for a keyword ``create`` does not
    take, as ``create`` raises."""
    path, fields, kind = _api(api)
    unknown = sorted(set(kwargs) - set(fields) - {"extra_body"})
    if unknown:
        raise TypeError(f"create() got unexpected keyword arguments {unknown}")
    # the bearer key alone, as ``create`` asks: a bare ``post`` would send an admin key the environment holds too
    options: dict[str, Any] = {"security": {"bearer_auth": True}}
    if kwargs.get("extra_body") is not None:
        options["extra_json"] = kwargs["extra_body"]
    return Call(path, {name: kwargs[name] for name in fields if name in kwargs}, options, kind)
