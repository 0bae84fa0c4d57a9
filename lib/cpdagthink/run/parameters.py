"""Notebook parameters as papermill delivers them, turned into what the notebooks declare.

papermill's ``-p NAME VALUE`` reads VALUE as a bool, None, int or float when it looks like one and passes
any other text through as a string. So ``-p probes '["scramble_full", "drop_premise"]'`` arrives as that
string (iterating it gives characters) and ``-p seeds 1`` as the number 1. A list parameter accepts all the
ways a user writes a list on a command line: a JSON or Python list, or a single item.
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
