"""``cpdagthink reproduce``: the recipes' runs planned once each, computed, and folded into one book."""

from __future__ import annotations

import subprocess
import sys

import pytest

from cpdagthink.book.chapters import NOTEBOOKS, chapter_values
from cpdagthink.book.plan import plan_book, plan_chapters
from cpdagthink.book.recipes import RECIPES, selected
from cpdagthink.book.reproduce import book_design, plan_recipes, setting_overrides, settings


@pytest.fixture
def offline(test_csv, tmp_path, monkeypatch):
    """The recipes on the symbolic agent, small, in a temporary folder, Paraphrase-OOD as its generated stand-in."""
    monkeypatch.setenv("CORR2CAUSE_CSV", str(test_csv))
    return {"backend": "reference", "limit": 3, "temperature": 0.7, "out_root": str(tmp_path / "runs"),
            "cache_dir": str(tmp_path / "cache"), "ood_split": "generated:paraphrase", "stress_families": []}


def test_a_setting_takes_the_papers_design_and_the_user_wins():
    setting = RECIPES[0].settings[0]
    given = setting_overrides(setting, {})
    assert (given["limit"], given["max_tokens_turn1"], given["backend"], given["model"]) == (0, 16384, "vllm",
                                                                                             "Qwen/Qwen3.5-27B")
    assert given["backend_options"] == {"max_model_len": 32768}
    mine = setting_overrides(setting, {"backend": "openai", "model": "m", "backend_options": {"base_url": "http://h"}})
    assert (mine["model"], mine["backend_options"]) == ("m", {"base_url": "http://h"})  # the paper's options dropped


def test_two_results_that_read_one_setting_share_it():
    shared = settings(selected(["SEC5", "APPENDIX_D"]))
    assert len(shared) == 1


def test_the_papers_design_is_one_book_with_three_seeds_for_01_and_one_elsewhere(offline):
    design = book_design(RECIPES, offline)
    assert design["01:seeds"] == [0, 1, 2] and design["seeds"] == [0]
    assert all(design[f"{c}:seeds"] == [0] for c in ("02", "03", "04", "05", "06"))
    book = {r.folder for r in plan_book(design)}
    recipes = {r.folder for r in plan_recipes(RECIPES, offline)}
    assert book <= recipes
    in_book = [s for s in settings(RECIPES) if s.model == "Qwen/Qwen3.5-27B" and "split" not in s.parameters]
    alone = plan_chapters([(s.chapter, chapter_values(NOTEBOOKS / f"{s.chapter}.ipynb", setting_overrides(s, offline)))
                           for s in in_book])
    assert {r.folder for r in alone} == book  # the in-book settings alone plan exactly the book's runs


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cpdagthink", *args], capture_output=True, text=True, timeout=600)


def test_reproduce_computes_exactly_the_planned_runs_and_then_has_nothing_left(offline, tmp_path):
    flags = ["TABLE3", "--backend", "reference", "--limit", "3", "-p", f"out_root={offline['out_root']}",
             "-p", f"cache_dir={offline['cache_dir']}"]
    planned = cli("reproduce", *flags, "--dry-run")
    assert planned.returncode == 0, planned.stderr
    assert len([line for line in planned.stdout.splitlines() if line.endswith("(0 of 3 rows recorded)")]) == 6
    done = cli("reproduce", *flags)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "6 runs, 6 to compute"  # what it then computed
    again = cli("reproduce", *flags, "--dry-run")
    assert "total: 0 calls" in again.stdout and again.stdout.count("(3 of 3 rows recorded)") == 6
    folders = sorted(p.name for p in (tmp_path / "runs").iterdir())
    assert len(folders) == 6 and sum("probe-" in f for f in folders) == 5


def test_list_prints_the_recipes_and_a_missing_recipe_is_refused():
    listed = cli("reproduce", "--list")
    assert listed.returncode == 0 and all(f"\n{r.key}: " in listed.stdout for r in RECIPES)
    none = cli("reproduce")
    assert none.returncode == 2 and "--list shows them" in none.stderr


def test_the_one_books_grid_line_plans_each_chapters_own_seeds(offline):
    """The `make grid` line's parameters, as Snakemake's config gives them, plan three seeds for chapter 01."""
    from cpdagthink.workflow import plan_grid

    grid = plan_grid({"backend": "reference", "limit": 3, "temperature": 0.7, "seeds": "[0]", "01:seeds": "[0,1,2]",
                      "only": '["01", "04"]', "out_root": offline["out_root"], "cache_dir": offline["cache_dir"]})
    assert sorted(grid.groups) == [f"reference-default-seed{s}" for s in (0, 1, 2)]
    assert sorted(grid.chapters["01_main_results"].groups) == sorted(grid.groups)
    assert list(grid.chapters["04_probes"].groups) == ["reference-default-seed0"]


def test_the_one_books_commands_select_its_chapters_and_scope_their_parameters():
    from cpdagthink.book.reproduce import design_commands

    book, grid = design_commands(book_design(selected(["SEC5", "TABLE3"]), {}))
    assert book.startswith("cpdagthink book --only 03 04 --backend vllm --model Qwen/Qwen3.5-27B")
    assert "--budgets paper" in book and "'03:models=[\"Qwen/Qwen3.5-9B\"]'" in book
    assert "'ONLY=03 04'" in grid and "BUDGETS=paper" in grid
