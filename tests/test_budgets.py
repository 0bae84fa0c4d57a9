"""One default set of token budgets everywhere, and named sets every documented command agrees with."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cpdagthink.book.chapters import NOTEBOOKS, notebook_defaults
from cpdagthink.method.budgets import BUDGET_SETS, DEFAULT, DEFAULT_BUDGETS, budget_set
from cpdagthink.method.decoding import Decoding
from cpdagthink.paths import PROJECT_ROOT
from cpdagthink.run.config import RunParameters
from cpdagthink.workflow import book_parameters

DOCS = [PROJECT_ROOT / "README.md", *sorted((PROJECT_ROOT / "book").glob("*.md")),
        *sorted((PROJECT_ROOT / "book" / "using").glob("*.md"))]


def test_the_default_set_is_the_committed_books_so_its_records_are_served_again():
    assert DEFAULT_BUDGETS == "book" and (DEFAULT.turn1, DEFAULT.answer) == (512, 128)


def test_run_prompt_and_every_chapter_default_to_the_same_budgets():
    assert (Decoding().max_tokens_turn1, Decoding().max_tokens_answer) == (DEFAULT.turn1, DEFAULT.answer)
    parameters = RunParameters()
    assert (parameters.max_tokens_turn1, parameters.max_tokens_answer) == (DEFAULT.turn1, DEFAULT.answer)
    for notebook in sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb")):
        defaults = notebook_defaults(notebook)
        assert {k: defaults[k] for k in DEFAULT.as_parameters()} == DEFAULT.as_parameters(), notebook.name


def test_an_unknown_set_is_refused_with_the_choices():
    with pytest.raises(ValueError, match="choose one of book, paper"):
        budget_set("huge")


def test_the_grid_reads_a_named_set_and_an_explicit_budget_wins():
    _, parameters = book_parameters({"budgets": "paper", "max_tokens_answer": 99})
    assert parameters == {"max_tokens_turn1": BUDGET_SETS["paper"].turn1, "max_tokens_answer": 99}


@pytest.mark.parametrize("path", DOCS, ids=lambda p: p.name)
def test_no_documented_command_spells_budgets_by_number(path: Path):
    """A page that types numbers asks for other runs than one naming the set: every command names a set."""
    text = path.read_text(encoding="utf-8")
    assert not re.search(r"--max-tokens-(turn1|answer) \d|(TURN1|ANSWER)_TOKENS=\d|max_tokens_turn1 \d", text)


def test_the_budgets_are_stated_once_with_their_numbers_and_reason():
    text = (PROJECT_ROOT / "book" / "using" / "rerunning.md").read_text(encoding="utf-8")
    stated = re.sub(r"\s+", " ", text)
    book, paper = BUDGET_SETS["book"], BUDGET_SETS["paper"]
    assert f"the set `book`: {book.turn1} tokens for turn 1 and {book.answer} for the answer" in stated
    assert f"one set, `paper`: {paper.turn1} for turn 1 and {paper.answer} for the answer" in stated
    assert "budgets are part of a run's identity" in stated
    others = [p.name for p in DOCS if p.name != "rerunning.md" and "budgets are part of a run's identity"
              in re.sub(r"\s+", " ", p.read_text(encoding="utf-8"))]
    assert others == []
