"""The console's view of a chapter while its kernel runs: runs done, rows done of rows asked, time left.

A chapter's kernel shows no progress bar (its output is the page), so ``cpdagthink book`` watches the run
folders the chapter reads instead: every record a run appends is a row done. The runs, and the rows each
asks, come from the plan (:func:`cpdagthink.book.plan.plan_book`), made in the watcher's own thread so the
chapter never waits for it.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, TextIO

from ..run.runfolder import RECORDS

__all__ = ["Watched", "chapter_progress", "planned_runs", "progress_line", "rows_done"]


@dataclass(frozen=True)
class Watched:
    """One run a chapter reads: where its records go, how many rows it asks, and its name on the console."""

    folder: Path
    asked: int
    name: str


def rows_done(folder: Path) -> int:
    """How many records ``folder`` holds (a line each; a torn last line does not count)."""
    try:
        with (folder / RECORDS).open("rb") as records:
            return sum(1 for line in records if line.endswith(b"\n") and line.strip())
    except OSError:
        return 0


def progress_line(chapter: str, runs: list[Watched], done: list[int], rows_at_start: int,
                  elapsed: float) -> str:
    """``01_main_results: 3 of 12 runs done, 40 of 96 rows; now structured seed 0 (5 of 8); about 4 min
    left``: the estimate from the rows done since the chapter started (none before the first)."""
    finished = sum(d >= r.asked for d, r in zip(done, runs))
    rows = sum(min(d, r.asked) for d, r in zip(done, runs))
    asked = sum(r.asked for r in runs)
    line = f"  {chapter}: {finished} of {len(runs)} runs done, {rows} of {asked} rows"
    current = next(((r, d) for d, r in zip(done, runs) if d < r.asked), None)
    if current is not None:
        run, count = current
        line += f"; now {run.name} ({count} of {run.asked})"
    new = rows - rows_at_start
    if new > 0 and rows < asked:
        left = (asked - rows) * elapsed / new
        line += f"; about {left / 60:.0f} min left" if left >= 90 else f"; about {left:.0f} s left"
    return line


def planned_runs(notebook: Path, overrides: dict[str, Any]) -> list[Watched]:
    """The runs the chapter ``notebook`` reads with these overrides, as the plan names them."""
    from .plan import plan_book

    runs = plan_book(overrides, only=[notebook.stem])
    return [Watched(Path(r.folder), r.instances.count,
                    f"{r.config.condition}{' ' + r.config.probe if r.config.probe else ''} "
                    f"seed {r.config.decoding.seed}") for r in runs if notebook.stem in r.chapters]


@contextlib.contextmanager
def chapter_progress(notebook: Path, overrides: dict[str, Any], interval: float = 20.0,
                     stream: TextIO | None = None,
                     plan: Callable[[Path, dict[str, Any]], list[Watched]] = planned_runs) -> Iterator[None]:
    """While the block runs (the chapter's kernel), print :func:`progress_line` every ``interval`` seconds
    when it has changed. The block is never held up or failed by the watcher: a plan it cannot make leaves
    the console as it was."""
    out = stream or sys.stdout
    stop = threading.Event()

    def watch() -> None:
        start = time.monotonic()
        try:
            runs = plan(notebook, overrides)
        except Exception:  # the chapter reports its own errors; the watcher only shows progress
            return
        if not runs:
            return
        at_start = sum(min(rows_done(r.folder), r.asked) for r in runs)
        shown = None
        while not stop.wait(interval):
            done = [rows_done(r.folder) for r in runs]
            line = progress_line(notebook.stem, runs, done, at_start, time.monotonic() - start)
            if line != shown:
                print(line, file=out, flush=True)
                shown = line

    watcher = threading.Thread(target=watch, name=f"progress-{notebook.stem}", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        stop.set()
        watcher.join(timeout=5)
