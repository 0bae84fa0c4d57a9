"""The page "Reproduce the paper" holds what the tool prints now: its recipe table and each example's cost."""

from __future__ import annotations

import pytest

from cpdagthink.book.reproduce_page import EXAMPLES, PAGE, render, sections
from cpdagthink.paths import PROJECT_ROOT


def test_the_page_is_current(test_csv, monkeypatch):
    """Regenerate with `python scripts/reproduce_page.py` when this fails."""
    monkeypatch.setenv("CORR2CAUSE_CSV", str(test_csv))
    page = PAGE.read_text(encoding="utf-8")
    parts = sections()
    assert render(page, parts) == page
    assert {f"{e.name}-cost" for e in EXAMPLES} <= set(parts)
    assert all("total: " in parts[f"{e.name}-cost"] for e in EXAMPLES)  # computed by the plan, not typed


def test_a_marker_without_a_part_or_a_part_without_a_marker_is_refused():
    page = "<!-- generated: recipes -->\nold\n<!-- end: recipes -->\n"
    assert render(page, {"recipes": "new"}) == "<!-- generated: recipes -->\nnew\n<!-- end: recipes -->\n"
    with pytest.raises(ValueError, match="not the generated parts"):
        render(page, {"recipes": "new", "vllm-cost": "x"})


def test_the_page_is_in_the_table_of_contents():
    assert "book/using/reproduce" in (PROJECT_ROOT / "_toc.yml").read_text(encoding="utf-8")
