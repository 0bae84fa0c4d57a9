"""The generated parts of the page "Reproduce the paper" (``book/using/reproduce.md``): the recipe table as
``cpdagthink reproduce --list`` prints it, and for one worked example per engine its commands and what the plan
says it costs, as ``reproduce --dry-run`` prints it. The page is Markdown (it executes nothing), so
``scripts/reproduce_page.py`` writes these parts between its markers and ``tests/test_reproduce_page.py`` checks
that the page holds what the tool prints now.

Every figure is computed on empty run and call-cache folders (nothing is subtracted) and from the whole test
split, so it is the price of a first build, at the list prices the model profiles record (their date and source
are printed beside them); the Paraphrase-OOD split comes from the hub, so no example reads it.
"""

from __future__ import annotations

import contextlib
import io
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ..paths import PROJECT_ROOT
from .cost import Pricing
from .recipes import recipe_listing
from .reproduce import one_book_commands, reproduce

PAGE = PROJECT_ROOT / "book" / "using" / "reproduce.md"


@dataclass(frozen=True)
class Example:
    """One engine's worked example: the commands shown and the recipes they reproduce. Its dry run gives no
    prices: a model with a list price in its profile is priced at it (with its date and source), the others are
    not priced."""

    name: str
    shown: tuple[str, ...]
    recipes: tuple[str, ...]


EXAMPLES = (
    Example("vllm", ("cpdagthink reproduce APPENDIX_B TABLE3 --dry-run", "cpdagthink reproduce APPENDIX_B TABLE3"),
            ("APPENDIX_B", "TABLE3")),
    Example("api", ("export OPENAI_API_KEY=...", "cpdagthink reproduce APPENDIX_A1 --dry-run",
                    "cpdagthink reproduce APPENDIX_A1"),
            ("APPENDIX_A1",)),
    Example("grid", ("cpdagthink reproduce SEC5 APPENDIX_D TABLE3 APPENDIX_I --dry-run",
                     "cpdagthink reproduce SEC5 APPENDIX_D TABLE3 APPENDIX_I --commands"),
            ("SEC5", "APPENDIX_D", "TABLE3", "APPENDIX_I")),
)


def _dry_run(example: Example, folders: dict[str, str]) -> str:
    """What ``cpdagthink reproduce RECIPES --dry-run`` prints for the example, in ``folders``."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        reproduce(example.recipes, {}, folders, dry_run=True, pricing=Pricing())
    return out.getvalue().rstrip("\n")


def _fence(text: str, language: str = "text") -> str:
    """A fenced block of the tool's own output (a fence longer than any backtick run inside it)."""
    ticks = "`" * max(3, 1 + max((len(m) for m in re.findall(r"`+", text)), default=0))
    return f"{ticks}{language}\n{text}\n{ticks}"


def sections() -> dict[str, str]:
    """The page's generated parts by marker name: ``recipes``, and per example ``<name>-commands`` and
    ``<name>-cost``."""
    parts = {"recipes": _fence(recipe_listing())}
    with tempfile.TemporaryDirectory() as empty:
        folders = {"out_root": f"{empty}/runs", "cache_dir": f"{empty}/cache"}
        for example in EXAMPLES:
            parts[f"{example.name}-commands"] = _fence("\n".join(example.shown), "bash")
            parts[f"{example.name}-cost"] = _fence(_dry_run(example, folders).replace(empty, "$EMPTY"))
    book, grid = one_book_commands(EXAMPLES[-1].recipes, {})
    parts["grid-line"] = _fence(f"{book}\n# or, as SLURM jobs (edit workflow/profiles/slurm/ first):\n{grid}", "bash")
    return parts


MARK = re.compile(r"(<!-- generated: (?P<name>[a-z0-9-]+) -->\n)(?P<body>.*?)(<!-- end: (?P=name) -->)", re.S)


def render(page: str, parts: dict[str, str]) -> str:
    """``page`` with each marked part replaced by ``parts``' text; a part the page has no marker for, or a
    marker with no part, is an error (the page and the generator must agree)."""
    named = {m.group("name") for m in MARK.finditer(page)}
    if named != set(parts):
        raise ValueError(f"the page's markers {sorted(named)} are not the generated parts {sorted(parts)}")
    return MARK.sub(lambda m: m.group(1) + parts[m.group("name")] + "\n" + m.group(4), page)


def update(path: Path = PAGE) -> bool:
    """Write the generated parts into the page; whether it changed."""
    old = path.read_text(encoding="utf-8")
    new = render(old, sections())
    if new != old:
        path.write_text(new, encoding="utf-8")
    return new != old
