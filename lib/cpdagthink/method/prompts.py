"""Prompt files, shipped with the package (``prompts/`` in the checkout): loaded by name, filled with
``string.Template`` fields, hashed.

``$pc_scaffold``, ``$decision_rules`` and ``$tool_name`` are filled in every prompt, so the PC instructions
(the paper's "same scaffold") and the per-relation rules for deciding a hypothesis against a CPDAG are each
one file, shared word for word by the structured method's tool result, the baseline and the prose control:
those three differ only in how the graph reaches the answer (typed object, own derivation, own prose).

``$call_instruction`` is the one sentence that asks for the tool call; its file depends on the run's tool
choice (:data:`CALL_INSTRUCTIONS`), because the paper's forced setting (App. A.1) changes the prompt as well
as the API flag.
"""

from __future__ import annotations

import hashlib
from functools import lru_cache
from string import Template

from ..errors import CpdagthinkError
from ..paths import PROMPTS
from .schema import TOOL_NAME

_SHARED_FIELDS = ("pc_scaffold", "decision_rules")
CALL_INSTRUCTIONS = {"auto": "call_instruction_auto", "forced": "call_instruction_forced"}


class PromptError(CpdagthinkError, KeyError):
    """A prompt file is missing or a template field was not supplied."""


@lru_cache(maxsize=64)
def raw(name: str) -> str:
    """The text of ``prompts/<name>.md``."""
    path = PROMPTS / f"{name}.md"
    if not path.is_file():
        raise PromptError(f"no prompt file {path}")
    return path.read_text(encoding="utf-8").strip()


def file_hash(name: str) -> str:
    """sha256 of a prompt file's text (recorded in run metadata and in every record)."""
    return hashlib.sha256(raw(name).encode()).hexdigest()


def render(name: str, **fields: str) -> str:
    """Fill a prompt: shared fields first, then the caller's (``premise``, ``hypothesis``, ...)."""
    values = {"tool_name": TOOL_NAME, **{f: raw(f) for f in _SHARED_FIELDS}, **fields}
    try:
        return Template(raw(name)).substitute(values)
    except KeyError as missing:
        raise PromptError(f"prompt {name!r} needs the field {missing}") from None


def call_instruction(tool_choice: str) -> str:
    """The rendered sentence asking for the tool call under ``tool_choice`` ("auto" or "forced")."""
    if tool_choice not in CALL_INSTRUCTIONS:
        raise ValueError(f"unknown tool choice {tool_choice!r}; choose one of {', '.join(CALL_INSTRUCTIONS)}")
    return render(CALL_INSTRUCTIONS[tool_choice])


def used_files(names: tuple[str, ...]) -> dict[str, str]:
    """Hashes of the named prompts plus the shared files they include (both call instructions when a prompt
    takes one: which was used is the run's recorded tool choice)."""
    every = set(names) | {f for n in names for f in _SHARED_FIELDS if f"${f}" in raw(n)}
    if any("$call_instruction" in raw(n) for n in names):
        every |= set(CALL_INSTRUCTIONS.values())
    return {n: file_hash(n) for n in sorted(every)}
