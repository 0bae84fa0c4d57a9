"""The main job end to end: every notebook executed by papermill, the Jupyter Book built, real HTML checked.

The reference agent stands in for a model so the build takes seconds; the local-model path of the same
notebooks is what `make book` runs (and `benchmarks/book.py` times).
"""

from __future__ import annotations

import re
import shutil

import pytest

from cpdagthink.book import NOTEBOOKS, build, notebook_parameters, select_notebooks
from cpdagthink.data import PROJECT_ROOT

CHAPTERS = ["01_main_results", "02_complexity", "03_ablations", "04_probes", "05_audit", "06_failure_gallery"]


def test_every_notebook_declares_its_parameters():
    for name in CHAPTERS:
        params = notebook_parameters(NOTEBOOKS / f"{name}.ipynb")
        assert {"backend", "model", "split", "data", "limit", "seeds"} <= params, name


def test_a_chapter_prefix_that_matches_nothing_is_refused_with_the_chapters(tmp_path):
    assert [n.stem for n in select_notebooks(["01", "04"])] == ["01_main_results", "04_probes"]
    with pytest.raises(ValueError, match="no chapter starts with 'nosuch'; the chapters are: 01_main_results, "
                                         "02_complexity"):
        build({}, only=["01", "nosuch"], root=tmp_path)
    assert not (tmp_path / "book").exists()  # refused before any work


def test_an_unknown_backend_is_refused_before_any_notebook_runs(tmp_path):
    with pytest.raises(ValueError, match="unknown backend 'nosuch'; choose one of: local, openai"):
        build({"backend": "nosuch"}, only=["01"], root=tmp_path)
    assert not (tmp_path / "book").exists()


@pytest.mark.slow
def test_book_builds_with_tables_and_figures(test_csv, tmp_path, monkeypatch):
    monkeypatch.setenv("CORR2CAUSE_CSV", str(test_csv))
    for name in ("_config.yml", "_toc.yml"):
        shutil.copy(PROJECT_ROOT / name, tmp_path / name)
    (tmp_path / "book").mkdir()
    shutil.copy(PROJECT_ROOT / "book" / "intro.md", tmp_path / "book" / "intro.md")
    # Beyond the CPU defaults: a stress set and the validity-preserving probes, so those paths are built too.
    overrides = {"backend": "reference", "limit": 12, "out_root": str(tmp_path / "runs"),
                 "cache_dir": str(tmp_path / "cache"), "stress_families": ["alarm7"],
                 "probes": ["scramble_full", "drop_premise", "swap_valid_cpdag"]}
    index = build(overrides, root=tmp_path)
    assert index.is_file()
    html = {name: (tmp_path / "_build" / "html" / "book" / f"{name}.html").read_text() for name in CHAPTERS}
    for name, page in html.items():
        assert "<table" in page, name
        assert "sample of 12 instances" in page, name
        assert "Traceback" not in page, name
    for name in ("01_main_results", "02_complexity", "03_ablations", "04_probes"):
        assert "data:image/png" in html[name] or ".png" in html[name], name
    assert "paper" in html["01_main_results"] and "86.36" in html["01_main_results"]
    assert "<strong>18</strong> rows" in html["05_audit"]
    assert "alarm7: structured" in html["02_complexity"]  # the reading's line, not the code that writes it
    assert re.search(r"valid-CPDAG swap changes it by [+-]\d", html["04_probes"])
