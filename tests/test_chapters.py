"""What describes the chapters: their parameters and defaults, the render-only switch, the command that
re-executes a chapter."""

from __future__ import annotations

import pytest

from cpdagthink.book.chapters import (ENV_RENDER_ONLY, NOTEBOOKS, ChapterParameter, chapter_parameters, chapter_values,
                                      notebook_defaults, notebook_parameters, render_only, reproduce_command)


def test_reproduce_command_lists_what_differs_from_the_notebook_defaults():
    namespace = notebook_defaults(NOTEBOOKS / "04_probes.ipynb") | {
        "backend": "reference", "limit": 0, "probes": ["scramble_full", "drop_premise"], "model": None,
        "interactive_widgets": False, "split": "1"}
    # a string that reads back as JSON is quoted; lists as JSON; the shell sees one word per parameter
    assert reproduce_command("04_probes", namespace) == (
        """cpdagthink book --only 04 -p backend=reference -p 'split="1"' -p limit=0 """
        """-p 'probes=["scramble_full", "drop_premise"]'""")
    assert reproduce_command("04_probes", notebook_defaults(NOTEBOOKS / "04_probes.ipynb")) == \
        "cpdagthink book --only 04"


def test_a_chapter_runs_with_its_defaults_and_only_the_overrides_it_declares():
    notebook = NOTEBOOKS / "04_probes.ipynb"
    assert notebook_defaults(notebook)["limit"] != 3 and "limit" in notebook_parameters(notebook)
    values = chapter_values(notebook, {"limit": 3, "not_a_parameter_anywhere": 1})
    assert values == notebook_defaults(notebook) | {"limit": 3}


@pytest.mark.parametrize(("value", "expected"), [("1", True), ("true", True), (" Yes ", True), ("0", False),
                                                 ("", False)])
def test_render_only_is_read_from_the_environment(monkeypatch, value, expected):
    monkeypatch.setenv(ENV_RENDER_ONLY, value)
    assert render_only() is expected


@pytest.mark.slow
def test_the_printed_reproduce_command_runs_as_printed_from_a_fresh_shell_offline(tmp_path, test_csv):
    """A checkout with the workspace copy beside it (as this project is laid out), no $CORR2CAUSE_CSV, no hub:
    the command a page prints builds that page."""
    import os
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    from cpdagthink.paths import PROJECT_ROOT

    checkout, shared = tmp_path / "project", tmp_path / "shared" / "corr2cause"
    shared.mkdir(parents=True)
    shutil.copyfile(test_csv, shared / "test.csv")
    checkout.mkdir()
    shutil.copytree(PROJECT_ROOT / "lib", checkout / "lib", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("notebooks", "prompts", "data", "benchmarks", "_static", "_config.yml", "_toc.yml", "README.md",
                 "pyproject.toml"):
        (checkout / name).symlink_to(PROJECT_ROOT / name)
    (checkout / "book").mkdir()
    for page in (PROJECT_ROOT / "book").glob("*.md"):
        shutil.copyfile(page, checkout / "book" / page.name)
    shutil.copytree(PROJECT_ROOT / "book" / "using", checkout / "book" / "using")
    command = reproduce_command("06_failure_gallery",
                                notebook_defaults(NOTEBOOKS / "06_failure_gallery.ipynb") | {"backend": "reference"})
    assert command == "cpdagthink book --only 06 -p backend=reference"
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "HOME": str(tmp_path / "home"),
           "PYTHONPATH": str(checkout / "lib"), "CPDAGTHINK_OUTPUTS": str(tmp_path / "outputs"), "HF_HUB_OFFLINE": "1",
           **{k: os.environ[k] for k in ("CPDAGTHINK_MODEL_CACHE", "CHROME_BIN", "CPDAGTHINK_CHROMIUM") if k in os.environ}}
    done = subprocess.run(["bash", "-c", command], cwd=checkout, env=env, capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    page = (checkout / "book" / "06_failure_gallery.ipynb").read_text()
    assert "Reproduce this page" in page and str(shared / "test.csv") not in page


def test_chapter_parameters_read_each_default_as_written_and_the_comments_on_it_as_help(tmp_path):
    import nbformat

    cell = nbformat.v4.new_code_cell(
        'backend = "local"   # local | openai\n'
        'seeds = [0]\n'
        '# The first probes,\n'
        '# more below\n'
        'probes = ["a",\n'
        '          "b"]      # two of them\n'
        '\n'
        'width = limit * 2   # an expression: still a parameter the cell assigns\n')
    cell.metadata["tags"] = ["parameters"]
    notebook = tmp_path / "09_toy.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# Toy"), cell]), notebook)
    assert chapter_parameters(notebook) == [
        ChapterParameter("backend", '"local"', "local | openai"),
        ChapterParameter("seeds", "[0]", ""),  # the comment of the line above belongs to that line
        ChapterParameter("probes", '["a",\n          "b"]', "The first probes, more below; two of them"),
        ChapterParameter("width", "limit * 2", "an expression: still a parameter the cell assigns")]
    assert [p.name for p in chapter_parameters(NOTEBOOKS / "04_probes.ipynb")] == \
        list(notebook_defaults(NOTEBOOKS / "04_probes.ipynb"))


def test_a_parameter_scoped_to_a_chapter_reaches_that_chapter_only():
    from cpdagthink.book.chapters import for_chapter
    from cpdagthink.cli import book_papermill_parameters

    assert for_chapter(NOTEBOOKS / "01_main_results.ipynb", {"seeds": [0], "01:seeds": [0, 1, 2]}) == {"seeds": [0, 1, 2]}
    assert for_chapter(NOTEBOOKS / "04_probes.ipynb", {"seeds": [0], "01:seeds": [0, 1, 2]}) == {"seeds": [0]}
    given = book_papermill_parameters(["--seeds", "0", "--temperature", "0.7", "-p", "01:seeds=[0,1,2]",
                                       "--only", "01", "04"])
    assert given["01_main_results"]["seeds"] == [0, 1, 2] and given["04_probes"]["seeds"] == [0]
    with pytest.raises(ValueError, match="'04:conditions'"):  # chapter 04 declares no conditions
        book_papermill_parameters(["-p", "04:conditions=[\"structured\"]", "--only", "01", "04"])
