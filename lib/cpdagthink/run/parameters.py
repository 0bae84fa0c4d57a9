"""Notebook parameters as papermill delivers them, turned into what the notebooks declare.

papermill's ``-p NAME VALUE`` reads VALUE as a bool, None, int or float when it looks like one and passes
any other text through as a string. So ``-p probes '["scramble_full", "drop_premise"]'`` arrives as that
string (iterating it gives characters) and ``-p seeds 1`` as the number 1. A list parameter accepts all the
ways a user writes a list on a command line: a JSON or Python list, or a single item. The backend's own
options arrive as a dict, a JSON object, or ``KEY=VALUE`` words (``cpdagthink run -o``, ``make
BACKEND_OPTIONS=...``): :func:`coerce_options` makes each a dict.
"""

from __future__ import annotations

import ast
import json
from typing import Any


def json_or_text(text: str) -> Any:
    """A parameter value given as text (``book -p name=value``, a Snakemake ``--config`` entry): read as JSON
    where it is JSON (numbers, lists, null, true), else the text itself (``reference``)."""
    try:
        return json.loads(text)
    except ValueError:
        return text


def coerce_list(value: Any, name: str = "parameter") -> list[Any] | None:
    """``value`` as a list: a list or tuple as is, a string holding a JSON or Python list parsed, a single
    item wrapped (``"alarm7"`` -> ``["alarm7"]``, ``1`` -> ``[1]``); None stays None (a parameter's "unset").

    Raises ValueError naming ``name`` for a string that opens a list but is not one.
    """
    if value is None or isinstance(value, list):
        return value
    if isinstance(value, tuple):
        return list(value)
    if isinstance(value, str) and value.strip().startswith("["):
        return _parse_list(value.strip(), name)
    return [value]


def _parse_list(text: str, name: str) -> list[Any]:
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError:
        try:
            parsed = ast.literal_eval(text)  # Python spelling: single quotes, a trailing comma
        except (ValueError, SyntaxError) as error:
            raise ValueError(f"{name}: {text!r} is not a list; write it as JSON, e.g. '[\"a\", \"b\"]'") from error
    if not isinstance(parsed, list):
        raise ValueError(f"{name}: {text!r} is not a list; write it as JSON, e.g. '[\"a\", \"b\"]'")
    return parsed


def coerce_lists(**values: Any) -> tuple[list[Any] | None, ...]:
    """:func:`coerce_list` on each keyword argument, in the order given (errors name the parameter), so a
    notebook writes ``seeds, probes = coerce_lists(seeds=seeds, probes=probes)``."""
    return tuple(coerce_list(value, name) for name, value in values.items())


def option_pair(text: str) -> tuple[str, Any]:
    """``KEY=VALUE`` of ``-o``/``--backend-option``: the key a Python name, the value read by :func:`json_or_text`
    (``max_model_len=32768`` gives a number, ``base_url=["http://a/v1","http://b/v1"]`` a list).

    Raises ValueError for text without ``=`` or whose key is not a name.
    """
    key, sep, value = text.partition("=")
    if not sep:  # not quoted: the word may be a pasted key
        raise ValueError("a backend option is KEY=VALUE, e.g. max_model_len=32768; one word has no '='")
    if not key.isidentifier():
        raise ValueError(f"a backend option is KEY=VALUE with KEY a name, e.g. max_model_len=32768; got {key!r}")
    return key, json_or_text(value)


def coerce_options(value: Any, name: str = "backend_options") -> dict[str, Any]:
    """Backend options as a dict: a dict as is, None as none, a JSON object, or ``KEY=VALUE`` words (a string
    of them separated by white space, or a list of them) read by :func:`option_pair`, a later key winning.

    Raises ValueError naming ``name`` for anything else.
    """
    if value is None:
        return {}
    if isinstance(value, dict):
        return value
    if isinstance(value, str) and value.strip().startswith("{"):
        parsed = json_or_text(value)
        if isinstance(parsed, dict):
            return parsed
    words = value.split() if isinstance(value, str) else value
    if isinstance(words, (list, tuple)) and all(isinstance(w, str) for w in words):
        try:
            return dict(option_pair(w) for w in words)
        except ValueError as error:
            raise ValueError(f"{name}: {error}") from None
    raise ValueError(f"{name}: expected a dict, a JSON object or KEY=VALUE words, e.g. "
                     "'{\"max_model_len\": 32768}' or 'max_model_len=32768'")
