"""The build record: what each chapter's execution cost, measured and read back from the executed notebooks,
and the intro's prose holding no time of its own."""

from __future__ import annotations

import json
import re
import time

import nbformat
from markdown_it import MarkdownIt

from cpdagthink.book import build_record
from cpdagthink.book.build_record import METADATA_KEY, build_record as record_section, checkout, execution, measure
from cpdagthink.paths import PROJECT_ROOT
from conftest import committed_checkout


def _html(markdown) -> str:
    return MarkdownIt("commonmark", {"html": True}).enable("table").render(markdown.source())


def _notebook(path, metadata):
    nb = nbformat.v4.new_notebook()
    nb.metadata.update(metadata)
    nbformat.write(nb, path)
    return path


def test_measure_records_the_wall_time_load_machine_and_commit_of_its_block():
    record = {}
    with measure(record):
        time.sleep(0.3)
    assert record["wall_seconds"] >= 0.3
    assert len(record["load_start"]) == 3 and len(record["load_end"]) == 3
    assert record["machine"]["cores"] >= 1 and record["machine"]["memory_gib"] > 0 and record["machine"]["cpu"]
    assert re.fullmatch(r"[0-9a-f]{40}", record["commit"]) and isinstance(record["dirty"], bool)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00", record["started"])
    json.dumps(record)  # it goes into the notebook's metadata as JSON


def test_a_tree_with_changes_not_committed_is_dirty_and_one_outside_git_has_no_commit(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    head = committed_checkout(repo, "a.py")
    assert checkout(repo) == {"commit": head, "dirty": False}
    (repo / "a.py").write_text("x = 2\n")
    assert checkout(repo) == {"commit": head, "dirty": True}
    (tmp_path / "plain").mkdir()
    assert checkout(tmp_path / "plain") == {"commit": None, "dirty": None}


def test_the_record_reads_each_chapters_time_from_its_notebook_and_shows_hostile_text_literally(tmp_path):
    """Per chapter: the measured wall time and load (``cpdagthink book``), or papermill's duration for a notebook
    papermill executed directly; a CPU name or commit as hand-edited as can be reaches the page as text."""
    hostile = '<img src=x onerror="window.pwned=1"> **bold**'
    measured = {"started": "2026-12-02T00:00:00+01:00", "wall_seconds": 431.5, "load_start": [1.25, 1.0, 0.5],
                "load_end": [2.5, 1.5, 1.0], "machine": {"cores": 2, "memory_gib": 7.8, "cpu": hostile},
                "commit": "0123456789abcdef" * 2 + "01234567", "dirty": True, "render_only": True}
    one = _notebook(tmp_path / "01_a.ipynb", {METADATA_KEY: measured,
                                              "papermill": {"start_time": "2026-12-01T23:00:01", "duration": 430.0}})
    two = _notebook(tmp_path / "02_b.ipynb", {"papermill": {"start_time": "2026-12-01T23:08:00", "duration": 64.25}})
    three = _notebook(tmp_path / "03_c.ipynb", {METADATA_KEY: ["not", "a", "record"]})
    chapters = [(p.stem, execution(nbformat.read(p, as_version=4))) for p in (one, two, three)]
    rendered = {"at": "2026-12-02T00:00:00+00:00", "commit": "fedcba9876543210", "dirty": False}
    page = _html(record_section(chapters, rendered))
    assert "<img" not in page and "<strong>bold" not in page and "&lt;img src=x" in page
    rows = {m.group(1): m.group(0) for m in re.finditer(r"<tr>\s*<td>(\d\d_\w)</td>.*?</tr>", page, flags=re.S)}
    assert set(rows) == {"01_a", "02_b", "03_c"}
    assert "7 min 11 s" in rows["01_a"] and "1.25 → 2.50" in rows["01_a"] and "dirty" in rows["01_a"]
    assert "render-only" in rows["01_a"] and "render-only" not in rows["02_b"]
    assert "64.2 s" in rows["02_b"] and "not recorded" in rows["02_b"]  # no load: papermill keeps none
    assert "2026-12-01 23:08:00" in rows["02_b"] and "2026-12-01 23:00:00" in rows["01_a"]
    assert "Rendered</strong> 2026-12-02 00:00:00 UTC" in page
    assert rows["03_c"].count("not recorded") >= 3
    assert "2 cores, 7.8 GiB memory" in page and "fedcba987654" in page
    assert "8 min 15 s" in page and "(1 not recorded)" in page  # 431.5 + 64.25 s in all


def test_the_intro_and_the_chapters_prose_state_no_time_of_their_own():
    """A time on a page comes from the build record; the intro and the notebooks' Markdown cells hold none."""
    time_words = re.compile(r"\b(\d+(\.\d+)?\s?(s|sec|seconds?|min|minutes?|h|hours?)|(a|one|two|ten|twenty|thirty)"
                            r"\s+(seconds?|minutes?|hours?))\b", flags=re.I)
    texts = {"intro": (PROJECT_ROOT / "book" / "intro.md").read_text(encoding="utf-8")}
    for path in sorted((PROJECT_ROOT / "notebooks").glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        texts[path.stem] = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    found = {name: [m.group(0) for m in time_words.finditer(text)] for name, text in texts.items()}
    assert not any(found.values()), found
    assert "{include} " + build_record.RECORD in texts["intro"]
