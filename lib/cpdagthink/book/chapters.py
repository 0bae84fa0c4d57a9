"""What describes the book's chapters: the notebooks, the parameters each declares and their defaults, the
render-only switch, and the command that re-executes a chapter with the parameters it ran with.

The modules that run chapters (``build``), make their pages (``experiments``, ``readings``) and plan their runs
(``plan``) all read the chapters from here, so none of them needs another to know what a chapter is.
"""

from __future__ import annotations

import ast
import io
import json
import os
import shlex
import tokenize
from dataclasses import dataclass
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


def _parameters_cell(path: Path) -> str:
    """The source of the notebook's cell tagged ``parameters``."""
    import nbformat

    for cell in nbformat.read(path, as_version=4).cells:
        if "parameters" in cell.get("metadata", {}).get("tags", []):
            return cell.source
    raise ValueError(f"{path.name} has no cell tagged 'parameters'")


def _assignments(source: str) -> list[tuple[str, ast.Assign]]:
    """``(name, assignment)`` of each top-level assignment to a name in ``source``."""
    return [(t.id, node) for node in ast.parse(source).body if isinstance(node, ast.Assign)
            for t in node.targets if isinstance(t, ast.Name)]


def _parameter_assignments(path: Path) -> list[tuple[str, Any]]:
    """``(name, value node)`` of each assignment in the notebook's cell tagged ``parameters``."""
    return [(name, node.value) for name, node in _assignments(_parameters_cell(path))]


@dataclass(frozen=True)
class ChapterParameter:
    """One parameter of a chapter as its parameters cell writes it: the name, the default's source text and
    the cell's comments on it (the lines just above it and the end of its own lines), for ``--list-parameters``."""

    name: str
    default: str
    help: str


def chapter_parameters(path: Path) -> list[ChapterParameter]:
    """The parameters of the notebook at ``path`` in the cell's order, each with its default as written and
    its comments as help (papermill's ``--help-notebook``, read from the same cell the build reads)."""
    source = _parameters_cell(path)
    lines = source.splitlines()
    comments = {token.start[0]: token.string.lstrip("#").strip()
                for token in tokenize.generate_tokens(io.StringIO(source).readline)
                if token.type == tokenize.COMMENT}
    found = []
    for name, node in _assignments(source):
        above, line = [], node.lineno - 1
        while line in comments and lines[line - 1].lstrip().startswith("#"):  # a comment block right above
            above.insert(0, comments[line])
            line -= 1
        own = [comments[k] for k in range(node.lineno, (node.end_lineno or node.lineno) + 1) if k in comments]
        found.append(ChapterParameter(name, ast.get_source_segment(source, node.value) or "",
                                      "; ".join(text for text in [" ".join(above), *own] if text)))
    return found


def describe_parameters(only: list[str] | None = None) -> str:
    """The parameters of each selected chapter (:func:`select_notebooks`) as plain text: the chapter's name,
    then one ``name = default`` line per parameter with its help indented below it, for ``book -p`` and
    ``plan -p`` (``cpdagthink book --only 04 --list-parameters``)."""
    blocks = []
    for notebook in select_notebooks(only):
        lines = [notebook.stem]
        for parameter in chapter_parameters(notebook):
            default = parameter.default.replace("\n", "\n  ")  # a list the cell spreads over lines stays aligned
            lines.append(f"  {parameter.name} = {default}")
            if parameter.help:
                lines.append(f"      {parameter.help}")
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


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
