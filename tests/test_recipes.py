"""The recipe table: every figure the book quotes from the paper has one, and it states the paper's design."""

from __future__ import annotations

import csv

import pytest

from cpdagthink.book.chapters import NOTEBOOKS, notebook_parameters
from cpdagthink.book.recipes import BY_KEY, MAIN_SEEDS, RECIPES, recipe, recipe_listing, selected
from cpdagthink.paths import PAPER_REPORTED


def figures() -> list[dict[str, str]]:
    with PAPER_REPORTED.open(encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


@pytest.mark.parametrize("row", figures(), ids=lambda r: r["key"])
def test_every_figure_of_the_paper_figures_appendix_has_a_recipe(row):
    assert row["recipe"] in BY_KEY, f"{row['key']} ({row['section']}) names no recipe: add one to recipes.py"


def test_every_recipe_reproduces_some_reported_figure():
    named = {row["recipe"] for row in figures()}
    assert [r.key for r in RECIPES if r.key not in named] == []


def test_the_results_the_paper_reports_each_have_their_recipe():
    wanted = {"TABLE1", "FIGURE2", "SEC4_3", "SEC5", "TABLE3", "SEC7_1", "APPENDIX_A1", "APPENDIX_B", "APPENDIX_C",
              "APPENDIX_D"}
    assert wanted <= set(BY_KEY)
    assert len(BY_KEY["TABLE1"].settings) == 4  # Qwen3.5-27B ID, Qwen3.6-27B ID, Paraphrase-OOD, GPT-5.4-mini
    assert {s.model for s in BY_KEY["SEC5"].settings[0:1]} == {"Qwen/Qwen3.5-27B"}
    assert BY_KEY["SEC5"].settings[0].parameters["models"] == ["Qwen/Qwen3.5-9B"]  # both scales


def test_three_seeds_for_the_main_comparison_and_one_elsewhere():
    for r in RECIPES:
        for s in r.settings:
            main = r.key == "APPENDIX_B"
            assert s.seeds == (MAIN_SEEDS if main else (0,)), (r.key, s)


def test_every_setting_names_parameters_its_chapter_takes():
    for r in RECIPES:
        for s in r.settings:
            assert set(s.parameters) <= notebook_parameters(NOTEBOOKS / f"{s.chapter}.ipynb"), (r.key, s.chapter)


def test_what_the_paper_leaves_unstated_is_said_with_the_value_used():
    assert all(any("budgets" in u and "'paper'" in u for u in r.unstated) for r in RECIPES)
    assert any("medium" in u for u in BY_KEY["APPENDIX_A1"].unstated)


def test_the_listing_shows_every_recipe_and_paper_selects_all():
    listing = recipe_listing()
    assert all(f"\n{r.key}: " in listing for r in RECIPES)
    assert selected(["paper"]) == list(RECIPES) and selected(["table3", "TABLE1"]) == [BY_KEY["TABLE1"], BY_KEY["TABLE3"]]
    with pytest.raises(ValueError, match="the recipes are: TABLE1"):
        recipe("TABLE9")
