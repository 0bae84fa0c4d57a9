"""What describes the book's chapters: the notebooks, the parameters each declares and their defaults, the
render-only switch, and the command that re-executes a chapter with the parameters it ran with.

The modules that run chapters (``build``), make their pages (``experiments``, ``readings``) and plan their runs
(``plan``) all read the chapters from here, so none of them needs another to know what a chapter is.
"""

from __future__ import annotations

import ast
import json
import os
import shlex
from pathlib import Path
from typing import Any, Mapping

from ..errors import CpdagthinkError
from ..paths import PROJECT_ROOT
from .site import require_checkout

NOTEBOOKS = PROJECT_ROOT / "notebooks"
ENV_RENDER_ONLY = "CPDAGTHINK_RENDER_ONLY"
METADATA_KEY = "cpdagthink"  # in a first screen's output metadata: the record the intro reads


class RenderOnlyError(CpdagthinkError):
    """Render-only (:data:`ENV_RENDER_ONLY`) and a run is not complete: it must be computed elsewhere first."""


def render_only() -> bool:
    """Pages are made from complete run folders only, with no backend built (:data:`ENV_RENDER_ONLY` set)."""
    return os.environ.get(ENV_RENDER_ONLY, "").strip().lower() in ("1", "true", "yes")


def select_notebooks(only: list[str] | None = None) -> list[Path]:
    """Every chapter, or those whose names start with an entry of ``only``; an entry that matches no
    chapter is refused with the list of chapters (a typo must not build an empty book). Without the checkout's
    notebooks folder (a package install) there is no chapter to list: that is said instead."""
    require_checkout(NOTEBOOKS)
    notebooks = sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
    if not only:
        return notebooks
    unmatched = [prefix for prefix in only if not any(n.name.startswith(prefix) for n in notebooks)]
    if unmatched:
        raise ValueError(f"no chapter starts with {', '.join(map(repr, unmatched))}; the chapters are: "
                         + ", ".join(n.stem for n in notebooks))
    return [n for n in notebooks if any(n.name.startswith(prefix) for prefix in only)]


def _parameter_assignments(path: Path) -> list[tuple[str, Any]]:
    """``(name, value node)`` of each assignment in the notebook's cell tagged ``parameters``."""
    import nbformat

    for cell in nbformat.read(path, as_version=4).cells:
        if "parameters" in cell.get("metadata", {}).get("tags", []):
            return [(t.id, node.value) for node in ast.parse(cell.source).body if isinstance(node, ast.Assign)
                    for t in node.targets if isinstance(t, ast.Name)]
    raise ValueError(f"{path.name} has no cell tagged 'parameters'")


def notebook_parameters(path: Path) -> set[str]:
    """Names assigned in the notebook's cell tagged ``parameters``."""
    return {name for name, _ in _parameter_assignments(path)}


def notebook_defaults(path: Path) -> dict[str, Any]:
    """The parameters cell's values that are literals (``limit = 4``, ``seeds = [0]``), by name."""
    defaults = {}
    for name, node in _parameter_assignments(path):
        try:
            defaults[name] = ast.literal_eval(node)
        except (ValueError, TypeError, SyntaxError):
            continue  # an expression: not a run parameter
    return defaults


SCOPE = ":"  # ``01:seeds``: a parameter given only to the chapters whose names start with ``01``


def scoped_name(name: str) -> tuple[str | None, str]:
    """``(chapter prefix, parameter)`` of an override's name: ``("01", "seeds")`` for ``01:seeds``, ``(None,
    "seeds")`` for one every chapter is given."""
    prefix, sep, parameter = name.rpartition(SCOPE)
    return (prefix, parameter) if sep else (None, name)


def for_chapter(notebook: Path, overrides: Mapping[str, Any]) -> dict[str, Any]:
    """The overrides ``notebook`` is given: those of every chapter, then those scoped to it (``01:seeds``),
    which win; so one book gives its chapters different values (three seeds for 01, one elsewhere)."""
    chapter: dict[str, Any] = {}
    scoped: dict[str, Any] = {}
    for name, value in overrides.items():
        prefix, parameter = scoped_name(name)
        if prefix is None:
            chapter[name] = value
        elif notebook.name.startswith(prefix):
            scoped[parameter] = value
    return {**chapter, **scoped}


def chapter_values(notebook: Path, overrides: dict[str, Any]) -> dict[str, Any]:
    """The parameters a notebook runs with: its parameters cell's defaults, and the overrides it declares (a
    chapter ignores the others, as papermill is only given these; :func:`for_chapter` resolves scoped ones)."""
    accepted = notebook_parameters(notebook)
    overrides = for_chapter(notebook, overrides)
    return {**notebook_defaults(notebook), **{k: v for k, v in overrides.items() if k in accepted}}


def reproduce_command(chapter: str, namespace: Mapping[str, Any]) -> str:
    """The command that re-executes one chapter with the parameters it ran with: ``cpdagthink book --only NN``
    and one ``-p name=value`` per parameter that differs from the notebook's default."""
    defaults = notebook_defaults(NOTEBOOKS / f"{chapter}.ipynb")
    parts = ["cpdagthink", "book", "--only", chapter.split("_")[0]]
    for name, default in defaults.items():
        value = namespace.get(name, default)
        if name == "interactive_widgets" or value == default:
            continue
        text = value if isinstance(value, str) and _is_plain(value) else json.dumps(value)
        parts += ["-p", shlex.quote(f"{name}={text}")]
    return " ".join(parts)


def _is_plain(text: str) -> bool:
    """A string that ``-p name=value`` reads back as that same string (not as a number, list or null)."""
    try:
        json.loads(text)
    except ValueError:
        return True
    return False
