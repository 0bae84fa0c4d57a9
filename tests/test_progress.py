"""The console's view of a chapter while it runs (book/progress.py), on real run folders."""

from __future__ import annotations

import io
import threading
import time
from pathlib import Path

from cpdagthink.book.progress import Watched, chapter_progress, progress_line, rows_done


def _records(folder: Path, count: int, torn: bool = False) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "records.jsonl").write_text("".join('{"id": %d}\n' % i for i in range(count)) + ('{"id"' if torn else ""))


def test_rows_done_counts_whole_records_only(tmp_path):
    assert rows_done(tmp_path / "absent") == 0
    _records(tmp_path / "run", 3, torn=True)
    assert rows_done(tmp_path / "run") == 3


def test_the_line_names_the_runs_done_the_current_run_and_the_time_left(tmp_path):
    runs = [Watched(tmp_path / "a", 4, "structured seed 0"), Watched(tmp_path / "b", 4, "baseline_enhanced seed 0")]
    assert progress_line("01_main_results", runs, [4, 1], rows_at_start=0, elapsed=50) == (
        "  01_main_results: 1 of 2 runs done, 5 of 8 rows; now baseline_enhanced seed 0 (1 of 4); about 30 s left")
    assert progress_line("01_main_results", runs, [4, 1], rows_at_start=5, elapsed=50) == (
        "  01_main_results: 1 of 2 runs done, 5 of 8 rows; now baseline_enhanced seed 0 (1 of 4)")  # no rate yet
    assert progress_line("01_main_results", runs, [4, 2], rows_at_start=0, elapsed=600).endswith("about 3 min left")
    assert progress_line("01_main_results", runs, [4, 4], 0, 9) == "  01_main_results: 2 of 2 runs done, 8 of 8 rows"


def test_the_watcher_prints_each_change_while_the_chapter_runs_and_stops_with_it(tmp_path):
    runs = [Watched(tmp_path / "a", 2, "structured seed 0")]
    out = io.StringIO()
    with chapter_progress(tmp_path / "01_main_results.ipynb", {}, interval=0.05, stream=out,
                          plan=lambda notebook, overrides: runs):
        _records(tmp_path / "a", 1)
        time.sleep(0.3)
        _records(tmp_path / "a", 2)
        time.sleep(0.3)
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("  01_main_results: 0 of 1 runs done, 1 of 2 rows; now structured seed 0 (1 of 2)")
    assert lines[-1] == "  01_main_results: 1 of 1 runs done, 2 of 2 rows" and len(lines) == 2
    assert not any(t.name.startswith("progress-") for t in threading.enumerate())


def test_a_plan_the_watcher_cannot_make_leaves_the_chapter_and_the_console_alone(tmp_path):
    def broken(notebook, overrides):
        raise ValueError("no such split")

    out = io.StringIO()
    with chapter_progress(tmp_path / "02_complexity.ipynb", {}, interval=0.01, stream=out, plan=broken):
        time.sleep(0.1)
    assert out.getvalue() == ""


def test_the_plan_of_a_real_chapter_names_its_runs_and_rows(tmp_path, test_csv):
    from cpdagthink.book.progress import planned_runs
    from cpdagthink.paths import PROJECT_ROOT

    overrides = {"backend": "reference", "data": str(test_csv), "limit": 4, "out_root": str(tmp_path / "runs"),
                 "cache_dir": str(tmp_path / "cache")}
    runs = planned_runs(PROJECT_ROOT / "notebooks" / "06_failure_gallery.ipynb", overrides)
    assert runs and all(r.asked == 4 and str(r.folder).startswith(str(tmp_path / "runs")) for r in runs)
    assert all(" seed 0" in r.name for r in runs)
