"""Prompt files under ``prompts/``: loaded by name, filled with ``string.Template`` fields, hashed.

``$pc_scaffold`` and ``$tool_name`` are filled in every prompt, so the PC instructions are one file shared by
the structured method, the baseline and the prose control (the paper's "same scaffold").
"""

from __future__ import annotations

import hashlib
from functools import lru_cache
from pathlib import Path
from string import Template

from .errors import CpdagthinkError
from .schema import TOOL_NAME
from .errors import CpdagthinkError

PROMPTS_DIR = Path(__file__).resolve().parents[2] / "prompts"
_SHARED_FIELDS = ("pc_scaffold",)


class PromptError(CpdagthinkError, KeyError):
    """A prompt file is missing or a template field was not supplied."""


@lru_cache(maxsize=64)
def raw(name: str) -> str:
    """The text of ``prompts/<name>.md``."""
    path = PROMPTS_DIR / f"{name}.md"
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


def used_files(names: tuple[str, ...]) -> dict[str, str]:
    """Hashes of the named prompts plus the shared files they include."""
    every = set(names) | {f for n in names for f in _SHARED_FIELDS if f"${f}" in raw(n)}
    return {n: file_hash(n) for n in sorted(every)}
