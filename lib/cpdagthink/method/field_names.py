"""Neutral field names: the ``CausalAnalysis`` fields renamed ``field_a`` ... ``field_f`` (a factor of the design,
:mod:`cpdagthink.method.design`), so a run can tell whether the paper's names (``skeleton``, ``v_structures``...)
carry any of the gain.

The renaming is applied wherever a field's name reaches the model: the tool's JSON schema and the regex derived
from it, the turn-1 instruction (each backticked name, with its meaning kept beside it), and the JSON of the tool
result. The DOT view names no field (only edges, and ``dir=none`` for an undirected one), so it is the same under
both levels. What the model emits under neutral names is mapped back to the paper's before it is parsed, so the
audit, the probes and the answer read one type.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from typing import Any

from .schema import FIELD_ORDER, TOOL_NAME, CausalAnalysis, analysis_schema, json_schema_regex, without_titles

NEUTRAL: dict[str, str] = dict(zip(FIELD_ORDER, ("field_a", "field_b", "field_c", "field_d", "field_e", "field_f")))
PAPER: dict[str, str] = {v: k for k, v in NEUTRAL.items()}
NEUTRAL_DESCRIPTION = ("Record the CPDAG you derived from the premise, in the six fields field_a to field_f whose "
                       "meanings the instructions give.")
_BACKTICKED = re.compile(r"`(" + "|".join(FIELD_ORDER) + r")`")


def renamed(data: dict[str, Any], names: dict[str, str]) -> dict[str, Any]:
    """``data`` with its top-level keys renamed by ``names`` (others kept), in the same order."""
    return {names.get(k, k): v for k, v in data.items()}


def neutral_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """A ``CausalAnalysis`` JSON schema with its six properties renamed (their order and types kept)."""
    return {**schema, "properties": renamed(schema["properties"], NEUTRAL),
            "required": [NEUTRAL.get(n, n) for n in schema.get("required", [])]}


@lru_cache(maxsize=256)
def neutral_regex(variables: tuple[str, ...] | None) -> str:
    """The schema-derived regex (:func:`schema.analysis_regex`) over the neutral names."""
    return json_schema_regex(neutral_schema(analysis_schema(variables)))


@lru_cache(maxsize=1)
def _neutral_tool_text() -> str:
    parameters = without_titles(neutral_schema(analysis_schema(None)))
    return json.dumps({"type": "function", "function": {"name": TOOL_NAME, "description": NEUTRAL_DESCRIPTION,
                                                        "parameters": parameters}})


def neutral_tool_definition() -> dict[str, Any]:
    """The generic tool definition (:func:`schema.tool_definition`) over the neutral names (a new dict each call)."""
    return json.loads(_neutral_tool_text())


def neutral_text(text: str) -> str:
    """An instruction with each backticked field name replaced by its neutral name.

    >>> neutral_text("- `skeleton`: every adjacent pair; the skeleton is undirected")
    '- `field_b`: every adjacent pair; the skeleton is undirected'
    """
    return _BACKTICKED.sub(lambda m: f"`{NEUTRAL[m.group(1)]}`", text)


def neutral_json(analysis: CausalAnalysis) -> str:
    """The object's compact JSON (as ``model_dump_json`` writes it) under the neutral names."""
    return json.dumps(renamed(analysis.model_dump(mode="json"), NEUTRAL), separators=(",", ":"))


def paper_arguments(arguments: str) -> dict[str, Any]:
    """Emitted neutral arguments read back under the paper's names; ``ValueError`` if they are not a JSON object
    or use a paper name (the model was never given those)."""
    data = json.loads(arguments)
    if not isinstance(data, dict):
        raise ValueError("the arguments are not a JSON object")
    paper = sorted(set(data) & set(NEUTRAL))
    if paper:
        raise ValueError(f"the paper's field names {', '.join(paper)} were emitted under neutral names")
    return renamed(data, PAPER)
