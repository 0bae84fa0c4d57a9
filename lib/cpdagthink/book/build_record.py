"""The build record: when the book was made, from which commit, how long each chapter took to execute, on which
machine and under what load.

``cpdagthink book`` measures each chapter's execution (:func:`measure`) and writes what it measured into the
executed notebook's metadata (:data:`METADATA_KEY`), beside papermill's own ``metadata.papermill`` (its start,
end and duration, which a notebook executed by papermill directly has too). :func:`build_record` reads both
back when the book is rendered: every time a page states comes from these records.
"""

from __future__ import annotations

import contextlib
import datetime
import os
import platform
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from ..analysis.markup import Markdown, code, emphasis, number, paragraphs, strong, table
from ..paths import PROJECT_ROOT
from ..run.provenance import git_revision

METADATA_KEY = "cpdagthink_execution"  # in an executed notebook's metadata: what :func:`measure` recorded
RECORD = "build_record.md"  # written by render() into book/, included by the intro


def now() -> str:
    """The current time, UTC, to the second, in ISO 8601."""
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def checkout(root: Path = PROJECT_ROOT) -> dict[str, Any]:
    """The code's commit and whether tracked files differ from it (``dirty``), as the run metadata records them
    (:func:`~cpdagthink.run.provenance.git_revision`); both None outside a git checkout."""
    revision = git_revision(root)
    return {"commit": revision.commit, "dirty": revision.dirty} if revision else {"commit": None, "dirty": None}


def _cpu_model() -> str:
    """The processor's name as the kernel reports it (``/proc/cpuinfo``), else what Python knows of it."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace").splitlines():
            key, _, value = line.partition(":")
            if key.strip() in ("model name", "Model", "cpu model") and value.strip():
                return value.strip()
    return platform.processor() or platform.machine() or "unknown"


def machine() -> dict[str, Any]:
    """This machine: its logical cores, its memory (GiB, None where the system does not say) and its CPU model."""
    try:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    except (ValueError, OSError, AttributeError):
        memory = None
    return {"cores": os.cpu_count(), "memory_gib": None if memory is None else round(memory, 1), "cpu": _cpu_model()}


def _load() -> list[float] | None:
    """The 1-, 5- and 15-minute load averages (None where the system keeps none)."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except (OSError, AttributeError):
        return None


@contextlib.contextmanager
def measure(record: dict[str, Any]) -> Iterator[None]:
    """Fill ``record`` with what the block's execution cost: its start (UTC), wall time in seconds, the load
    averages at its start and end, the machine, and the code's commit."""
    record.update(started=now(), load_start=_load(), machine=machine(), **checkout())
    start = time.perf_counter()
    try:
        yield
    finally:
        record.update(wall_seconds=round(time.perf_counter() - start, 1), load_end=_load())


def execution(nb: Any) -> dict[str, Any]:
    """What an executed notebook records of its execution: :func:`measure`'s record (empty when it was executed
    other than by ``cpdagthink book``) with papermill's start and duration (``papermill_*``) where it has them."""
    metadata = nb.get("metadata", {})
    mine, papermill = metadata.get(METADATA_KEY), metadata.get("papermill")
    record = dict(mine) if isinstance(mine, dict) else {}  # a hand-edited notebook may hold anything
    papermill = papermill if isinstance(papermill, dict) else {}
    record["papermill_start"] = papermill.get("start_time")
    record["papermill_seconds"] = papermill.get("duration")
    return record


def _seconds(value: Any) -> Markdown:
    """A duration in seconds as a reader reads it: seconds under two minutes, minutes and seconds above."""
    if not isinstance(value, (int, float)):
        return Markdown("not recorded")
    if value < 120:
        return Markdown(number(value, ".1f"), " s")
    return Markdown(number(int(value // 60)), " min ", number(int(value % 60)), " s")


def _when(value: Any) -> str:
    """A recorded time (ISO 8601; papermill's carry no zone and are UTC) as ``YYYY-MM-DD HH:MM:SS``, UTC."""
    try:
        moment = datetime.datetime.fromisoformat(str(value))
    except ValueError:
        return str(value)  # hand-edited: shown as it is, as text
    if moment.tzinfo is not None:
        moment = moment.astimezone(datetime.timezone.utc)
    return moment.strftime("%Y-%m-%d %H:%M:%S")


def _load_text(record: dict[str, Any]) -> Markdown:
    start, end = record.get("load_start"), record.get("load_end")
    if not (isinstance(start, list) and isinstance(end, list) and start and end):
        return Markdown("not recorded")
    return Markdown(number(start[0], ".2f"), " → ", number(end[0], ".2f"))


def _machine_text(found: Any) -> Markdown:
    if not isinstance(found, dict):
        return Markdown("not recorded")
    memory = found.get("memory_gib")
    return Markdown(number(found.get("cores")), " cores, ",
                    Markdown(number(memory, ".1f"), " GiB memory, ") if memory is not None else "",
                    str(found.get("cpu")))


def _commit_text(record: dict[str, Any]) -> Markdown:
    commit = record.get("commit")
    if not commit:
        return Markdown("not recorded")
    return Markdown(code(str(commit)[:12]), " (dirty: changes not committed)" if record.get("dirty") else "")


def wall_seconds(record: dict[str, Any]) -> Any:
    """A chapter's execution time: as measured by ``cpdagthink book``, else papermill's duration."""
    return record.get("wall_seconds", record.get("papermill_seconds"))


def _chapter_row(name: str, r: dict[str, Any], machine: bool) -> list:
    """Chapter ``name``'s row of :func:`build_record`, from its execution record ``r``; with ``machine`` its
    machine too."""
    started = r.get("started") or r.get("papermill_start")
    made = " (render-only: from complete run records)" if r.get("render_only") is True else ""
    return [name, _when(started) if started else "not recorded", _commit_text(r),
            Markdown(_seconds(wall_seconds(r)), made), _load_text(r),
            *([_machine_text(r.get("machine"))] if machine else [])]


def build_record(chapters: Sequence[tuple[str, dict[str, Any]]], rendered: dict[str, Any]) -> Markdown:
    """The build record section: ``rendered`` (the render's time, ``at``, and :func:`checkout`), and per chapter
    (``(name, execution(nb))``, in book order) when it was executed, from which commit, its execution's wall
    time, the machine (once, when every chapter ran on the same one) and its 1-minute load average at the start
    and end of the chapter."""
    machines = {repr(r["machine"]) for _, r in chapters if r.get("machine")}
    one_machine = next((r["machine"] for _, r in chapters if r.get("machine")), None) if len(machines) == 1 else None
    per_chapter = len(machines) > 1
    header = ["chapter", "executed (UTC)", "commit", "wall time", "load (1 min), start → end",
              *(["machine"] if per_chapter else [])]
    rows = [_chapter_row(name, r, per_chapter) for name, r in chapters]
    known = [t for t in map(wall_seconds, (r for _, r in chapters)) if isinstance(t, (int, float))]
    lead = Markdown(strong("Rendered"), " ", _when(rendered["at"]), " UTC from commit ", _commit_text(rendered), ".")
    if not chapters:
        return paragraphs(lead)
    missing = len(chapters) - len(known)
    return paragraphs(
        Markdown(lead, " Chapters executed: ", number(len(chapters)), "; their executions took ", _seconds(sum(known)),
                 " of wall time in all", Markdown(" (", number(missing), " not recorded)") if missing else "", ".",
                 Markdown(" Machine: ", _machine_text(one_machine), ".") if one_machine else ""),
        table(header, rows),
        emphasis("Wall time is the chapter's whole execution by papermill (its runs, or their records when they "
                 "were already complete, and its pages); the load average is the machine's, shared with whatever "
                 "else ran meanwhile, so a time is this build's and no constant of the method. Chapters executed "
                 "by papermill directly record no load; their time is papermill's."))


def write_build_record(book: Path, executed: Sequence[Path], root: Path = PROJECT_ROOT) -> Path:
    """Write ``book/`` :data:`RECORD`: :func:`build_record` of the executed chapters ``executed``, rendered now
    from the checkout at ``root``."""
    import nbformat

    chapters = [(path.stem, execution(nbformat.read(path, as_version=4))) for path in executed]
    out = book / RECORD
    out.write_text(build_record(chapters, {"at": now(), **checkout(root)}).source() + "\n", encoding="utf-8")
    return out
