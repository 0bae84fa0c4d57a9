"""Where each chapter of the book stands: executed whole into ``book/``, being executed, or stopped part way.

``cpdagthink book`` has papermill write a chapter into ``book/.<chapter>.partial.ipynb`` while it holds the
chapter's lock (``book/.<chapter>.lock``, :func:`executing`), and renames it to ``book/<chapter>.ipynb`` only
once every code cell ran (:func:`unfinished_reason`). So an interrupted or failed execution leaves the chapter
it would have replaced as it was, with the partial notebook beside it for :func:`cpdagthink.book.build.render`
to name (:func:`read_chapters`). Why every cell is read, not papermill's verdict alone: when papermill's own
process is interrupted it marks every cell it never reached ``completed``, so a chapter stopped one second in
reads as finished by its statuses; a cell that ran has an execution count, and one that never ran has none.

A chapter without a complete execution is never a page with results: with ``--allow-partial``, its page is a
note that says so (:func:`write_placeholder`), which a later render still counts as unfinished.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from ..analysis.markup import Markdown, code, strong
from ..errors import CpdagthinkError
from .chapters import METADATA_KEY, NOTEBOOKS

PLACEHOLDER_KEY = "cpdagthink_unfinished"  # a placeholder page's notebook metadata: why its chapter has no results
# What the intro reads from each chapter's first screen (readings.first_screen writes them).
RECORD_KEYS = {"command": (), "headline": ("figure", "paper", "value", "ci_low", "ci_high", "verdict", "causes",
                                          "degenerate"),
               "configuration": ("backend", "model", "data", "sample", "instances", "positives", "negatives",
                                 "seeds", "budgets", "decoding", "tool choice")}


class ChapterBusyError(CpdagthinkError):
    """Another process is executing this chapter into the same book."""


def partial_path(book: Path, name: str) -> Path:
    """Where chapter ``name`` is executed until every cell ran (hidden: no chapter, and outside the table of
    contents' pages)."""
    return book / f".{name}.partial.ipynb"


def _lock_path(book: Path, name: str) -> Path:
    return book / f".{name}.lock"


def _try_lock(handle: Any, tries: int) -> bool:
    """Take ``handle``'s exclusive lock, trying ``tries`` times a tenth of a second apart (a render that looks
    whether the chapter is under way holds it for an instant)."""
    for attempt in range(tries):
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if attempt + 1 < tries:
                time.sleep(0.1)
    return False


@contextlib.contextmanager
def executing(book: Path, name: str) -> Iterator[Path]:
    """Hold chapter ``name``'s lock while it is executed, yielding where papermill writes it
    (:func:`partial_path`; a stopped execution's partial notebook is removed first). A second execution of the
    same chapter into the same book meanwhile is refused with :class:`ChapterBusyError`, naming the process."""
    with _lock_path(book, name).open("a+", encoding="utf-8") as handle:
        if not _try_lock(handle, tries=10):
            handle.seek(0)
            raise ChapterBusyError(f"{name} is being executed into {book} by another process (pid "
                                   f"{handle.read().strip() or 'unknown'}); wait for it to finish")
        handle.seek(0)
        handle.truncate()
        handle.write(str(os.getpid()))
        handle.flush()
        partial = partial_path(book, name)
        partial.unlink(missing_ok=True)
        try:
            yield partial
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def executing_process(book: Path, name: str) -> str | None:
    """The process executing chapter ``name`` now (its id, as its lock file says), or None when none is."""
    path = _lock_path(book, name)
    if not path.is_file():
        return None
    with path.open("r", encoding="utf-8") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return handle.read().strip() or "unknown"
        fcntl.flock(handle, fcntl.LOCK_UN)
    return None


def unfinished_reason(nb: Any) -> str | None:
    """Why a notebook's execution is not complete, or None when every code cell ran: a cell that raised (an
    interruption inside the kernel shows as its ``KeyboardInterrupt``), a cell papermill left pending, running
    or failed, or code cells without an execution count (never run, whatever their status says)."""
    for cell in nb.cells:
        errors = [o for o in cell.get("outputs", []) if o.get("output_type") == "error"]
        if errors:
            return f"a cell raised {errors[0].get('ename', 'an error')}"
        status = cell.get("metadata", {}).get("papermill", {}).get("status")
        if status in ("pending", "running", "failed"):
            return f"a cell was left {status}"
    # nbclient does not execute an empty cell, so it has no count either
    cells = [c for c in nb.cells if c.cell_type == "code" and c.source.strip()]
    never = [c for c in cells if c.get("execution_count") is None]
    if never:
        return f"{len(never)} of {len(cells)} code cells never ran"
    return None


@dataclass(frozen=True)
class Attempt:
    """An execution of a chapter that did not make its page: still under way (``process``, its id) or stopped
    (``reason``, :func:`unfinished_reason`'s)."""

    reason: str | None = None
    process: str | None = None

    def describe(self) -> str:
        if self.process is not None:
            return f"its execution is still under way in process {self.process}"
        return f"its execution did not finish, {self.reason}"

    def advice(self, name: str) -> Markdown:
        """What to do about it, as the intro and the console say it."""
        if self.process is not None:
            return Markdown("wait for it to end, then render again")
        return Markdown("run ", code(f"cpdagthink book --only {name.split('_')[0]}"), " again")


def read_notebook(path: Path) -> Any:
    """An executed notebook; one that cannot be read raises ValueError naming it and what to do."""
    import nbformat

    try:
        return nbformat.read(path, as_version=4)
    except Exception as error:  # nbformat raises JSON, validation and reader errors of several types
        raise ValueError(f"{path} is not a readable notebook ({type(error).__name__}: {error}); execute it again "
                         f"(`cpdagthink book --only {path.stem.split('_')[0]}`) or move it away") from None


def attempt(book: Path, name: str) -> Attempt | None:
    """The execution of chapter ``name`` that has not made its page, if any: under way (its lock is held) or
    stopped (its partial notebook is there)."""
    process = executing_process(book, name)
    if process is not None:
        return Attempt(process=process)
    partial = partial_path(book, name)
    if not partial.is_file():
        return None
    try:  # every cell ran, yet it is there: its process ended between the last cell and the rename
        reason = unfinished_reason(read_notebook(partial)) or "it ended before it replaced the chapter"
    except ValueError:  # killed as papermill wrote it
        reason = "its notebook was left unreadable"
    return Attempt(reason)


@dataclass(frozen=True)
class Chapter:
    """A chapter as :func:`cpdagthink.book.build.render` reads it: its first screen's record (None: it has none,
    one this version cannot read, ``stale`` says why, or no complete execution); ``unfinished``: why it has no
    complete execution, so no page with results (None: it has one); ``attempt``: a newer execution that has not
    replaced its complete one (stopped, or still under way)."""

    name: str
    record: dict[str, Any] | None
    unfinished: Attempt | None = None
    stale: str | None = None
    attempt: Attempt | None = None


def _stale(record: dict[str, Any]) -> str | None:
    """What a first-screen record lacks that the intro reads (a notebook from another version), or None."""
    for key, inner in RECORD_KEYS.items():
        if key not in record:
            return f"its first screen records no {key!r}"
        absent = [k for k in inner if not isinstance(record[key], dict) or k not in record[key]]
        if absent:
            return f"its first screen's {key!r} lacks {absent[0]!r}"
    return None


def read_chapter(book: Path, name: str) -> Chapter:
    """Chapter ``name`` of ``book`` (:class:`Chapter`): its executed notebook, when complete, and any execution
    of it that has not made its page. An executed notebook that cannot be read raises ValueError naming it."""
    newer = attempt(book, name)
    path = book / f"{name}.ipynb"
    if not path.is_file():
        return Chapter(name, None, newer or Attempt("it was never executed"))
    nb = read_notebook(path)
    reason = nb.metadata.get(PLACEHOLDER_KEY) or unfinished_reason(nb)
    if reason:  # executed in place (by papermill directly or an earlier version), or a placeholder page
        return Chapter(name, None, newer or Attempt(str(reason)))
    outputs = (o for c in nb.cells for o in c.get("outputs", []))
    record = next((o["metadata"][METADATA_KEY] for o in outputs if METADATA_KEY in o.get("metadata", {})), None)
    stale = None if record is None else _stale(record) if isinstance(record, dict) else "its first screen is not a record"
    return Chapter(name, None if stale else record, stale=stale, attempt=newer)


def toc_chapters(root: Path) -> list[str] | None:
    """The stems of the notebooks ``root/_toc.yml`` lists under ``book/`` (None: no table of contents)."""
    import yaml

    toc = root / "_toc.yml"
    if not toc.is_file():
        return None
    files: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("file"), str):
                files.append(node["file"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(yaml.safe_load(toc.read_text(encoding="utf-8")))
    return [Path(f).with_suffix("").name for f in files if Path(f).parent.name == "book"]


def executed_chapters(book: Path) -> list[Path]:
    """The executed chapter notebooks of ``book``: those the table of contents beside it lists (a stray
    notebook it does not list is no chapter of the book), or every ``NN_*.ipynb`` without one."""
    listed = toc_chapters(book.parent)
    found = sorted(book.glob("[0-9][0-9]_*.ipynb"))
    return found if listed is None else [path for path in found if path.stem in listed]


def read_chapters(book: Path) -> list[Chapter]:
    """Every chapter of ``book`` that was executed or tried (:func:`read_chapter`), in book order: those with an
    executed notebook (:func:`executed_chapters`) or an execution that has not made its page; a chapter the
    table of contents lists that was never tried is not one of them."""
    tried = {p.stem for p in executed_chapters(book)}
    listed = toc_chapters(book.parent)
    for partial in book.glob(".[0-9][0-9]_*.partial.ipynb"):
        name = partial.name[1:-len(".partial.ipynb")]
        if listed is None or name in listed:
            tried.add(name)
    return [read_chapter(book, name) for name in sorted(tried)]


def never_executed(book: Path, chapters: list[Chapter]) -> list[str]:
    """The chapters the table of contents beside ``book`` lists that were never executed nor tried (not among
    ``chapters``, :func:`read_chapters`'): a book built with ``--only``, or stopped before papermill began."""
    known = {c.name for c in chapters}
    return [name for name in toc_chapters(book.parent) or [] if name not in known]


def _title(name: str) -> str:
    """The chapter's heading line as its notebook writes it (the project's own Markdown), else its name."""
    source = NOTEBOOKS / f"{name}.ipynb"
    with contextlib.suppress(ValueError):
        for cell in read_notebook(source).cells if source.is_file() else []:
            if cell.cell_type == "markdown" and cell.source.startswith("# "):
                return cell.source.splitlines()[0]
    return "# " + Markdown(name).source()


def write_placeholder(book: Path, chapter: Chapter) -> Path:
    """Make chapter ``chapter``'s page a note that its execution did not finish, with no results (only for a
    chapter without a complete execution: ``chapter.unfinished``). An incomplete notebook executed in place is
    moved to its partial notebook first, unless a newer one is there."""
    import nbformat

    assert chapter.unfinished is not None
    path, partial = book / f"{chapter.name}.ipynb", partial_path(book, chapter.name)
    if path.is_file() and not partial.exists() and PLACEHOLDER_KEY not in read_notebook(path).metadata:
        path.replace(partial)
    note = Markdown(strong("This chapter has no results:"), " ", chapter.unfinished.describe(), "; ",
                    chapter.unfinished.advice(chapter.name), ".")
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(_title(chapter.name)),
                                         nbformat.v4.new_markdown_cell(note.source())])
    nb.metadata[PLACEHOLDER_KEY] = chapter.unfinished.reason or "it was still under way when its page was made"
    nbformat.write(nb, path)
    return path


def chapter_notes(others: Sequence[Chapter], untried: Sequence[str] = (),
                  title: Callable[[str], str] = str) -> list[Markdown]:
    """The intro's account of the chapters it does not show whole: those without a complete execution or made by
    another version (not counted), those whose page is an earlier complete execution while a newer one did not
    finish or is under way (counted), each with why and what to do, and ``untried``, those never executed;
    each chapter named by ``title`` (the page's title, not the notebook's file name)."""
    def again(name: str) -> Markdown:
        return Markdown("run ", code(f"cpdagthink book --only {name.split('_')[0]}"), " again")

    missing = [Markdown(title(c.name), ": ", c.unfinished.describe(), ", so it has no page with results; ",
                        c.unfinished.advice(c.name)) if c.unfinished else
               Markdown(title(c.name), ": ", f"made by another version ({c.stale})", "; ", again(c.name))
               for c in others if c.unfinished or c.stale]
    kept = [Markdown(title(c.name), ": ", "its latest execution", c.attempt.describe().removeprefix("its execution"),
                     "; its page is its previous complete execution ",
                     Markdown("until it ends") if c.attempt.process is not None else
                     Markdown("(", c.attempt.advice(c.name), " to replace it)"))
            for c in others if c.attempt and not c.unfinished]
    never = [Markdown(strong("Chapters not executed yet:"), " ", ", ".join(map(title, untried)), "; run ",
                      code(f"cpdagthink book --only {' '.join(n.split('_')[0] for n in untried)}"))] if untried else []
    return ([Markdown(strong("Chapters not counted here:"), " ", Markdown("; ").join(missing))] if missing else []) + (
        [Markdown(strong("Chapters kept from an earlier execution:"), " ", Markdown("; ").join(kept))] if kept else []
    ) + never
