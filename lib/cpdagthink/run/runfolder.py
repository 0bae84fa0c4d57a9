"""A run folder on disk: its lock, its records and its JSON files, safe under kills and concurrent use.

- One writer at a time: :meth:`RunFolder.locked` holds an exclusive ``fcntl.flock`` on ``.lock``; a second
  run into the same folder fails at once with :class:`RunLockedError` instead of duplicating records.
- Nothing good is dropped: reading keeps every valid line, sets each bad one aside in
  ``records.rejected.jsonl`` with its line number, and ignores a repeated id (first wins).
- Nothing is half-written: rewrites go through a temporary file and a rename; the temporary files of a writer
  killed before its rename are removed when the lock is next taken, and a bad line already set aside is not
  set aside again.
- A folder that holds its run whole is read as it is (:func:`completeness`): rendering a page from it needs no
  backend, no model and no lock, and changes nothing in it (it may be a read-only copy from another machine).
- One identity: a folder holds the run its ``metadata.json`` names (``run``, the
  :meth:`~cpdagthink.run.spec.RunSpec.identity`); completeness and resuming both compare that, and a
  ``metadata.json`` of an earlier format is upgraded as it is read (:func:`read_metadata`).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Sequence

from pydantic import BaseModel, ValidationError
from pydantic_core import PydanticSerializationError

from ..errors import CpdagthinkError
from ..files import jsonl_lines, remove_stale_temporaries, write_atomic
from ..method.conditions import parse_answer
from .records import SCHEMA_VERSION, RunMetadata, RunRecord, RunSummary

if TYPE_CHECKING:
    from .config import RunConfig
    from ..causal.instance import Instance

RECORDS = "records.jsonl"
REJECTED_LINES = "records.rejected.jsonl"
METADATA = "metadata.json"
CONFIG = "config.json"
SUMMARY = "summary.json"
LOCK = ".lock"


class RunFolderError(CpdagthinkError, ValueError):
    """The folder cannot hold a run (it is a file, or it cannot be written)."""


class RunLockedError(RunFolderError):
    """Another run is writing into this folder right now."""


def _write(path: Path, text: str) -> None:
    """:func:`~cpdagthink.files.write_atomic`, a failure (a full disk) raised as :class:`RunFolderError` naming
    the file."""
    try:
        write_atomic(path, text)
    except OSError as error:
        raise RunFolderError(f"cannot write {path}: {error.strerror or error}") from None


@dataclass(frozen=True)
class BadLine:
    """A line of ``records.jsonl`` that is not a record, kept with where it stood and why."""

    line: int
    text: str
    error: str
    record_id: str | None = None  # a record whose answer disagrees with its output (:func:`answer_mismatch`)


def answer_mismatch(record: RunRecord) -> str | None:
    """Why a record's ``answer`` is not what its recorded output says (an edited record), or None: the answer
    of a posed record is :func:`~cpdagthink.method.conditions.parse_answer` of its final turn's text."""
    if record.problem is not None or not record.turns:
        return None
    said = parse_answer(record.last_text)
    if record.answer == said:
        return None
    return (f"record {record.id}: its answer is {json.dumps(record.answer)} but its final turn's text reads "
            f"{json.dumps(said)}")


def dump_json(model: BaseModel, **options: Any) -> str:
    """``model.model_dump_json(**options)``, a Ctrl-C that lands in one of its computed fields raised as the
    :class:`KeyboardInterrupt` it was: pydantic wraps what a field raises while it serializes into a
    ``PydanticSerializationError``, so a run stopped while it wrote a record ended as an error, not interrupted."""
    try:
        return model.model_dump_json(**options)
    except PydanticSerializationError as error:
        if "KeyboardInterrupt" in str(error):
            raise KeyboardInterrupt("interrupted while a record was written") from None
        raise


def parse_records(text: str) -> tuple[list[RunRecord], list[BadLine]]:
    """Every valid record of a records file (first of each id) and every bad line; a torn last line is bad
    too, and so is a record whose answer disagrees with its recorded output (:func:`answer_mismatch`)."""
    records, bad, seen = [], [], set()
    for number, line in enumerate(jsonl_lines(text), start=1):
        if not line.strip():
            continue
        try:
            record = RunRecord.model_validate_json(line)
        except ValidationError as error:
            bad.append(BadLine(number, line, str(error).splitlines()[0]))
            continue
        if (mismatch := answer_mismatch(record)) is not None:
            bad.append(BadLine(number, line, mismatch, record.id))
            continue
        if record.id not in seen:
            seen.add(record.id)
            records.append(record)
    return records, bad


def read_records(folder: str | Path) -> list[RunRecord]:
    """The valid records of a run folder, in file order (a reader never changes the folder): the order they were
    made, which on a streaming backend is the order they finished; :func:`completeness` gives them in the order
    asked."""
    path = Path(folder) / RECORDS
    if not path.is_file():
        return []
    return parse_records(path.read_text(encoding="utf-8", errors="replace"))[0]


def read_json(path: Path) -> dict[str, Any] | None:
    """A run folder's JSON object file (``config.json``, ``metadata.json``, ``summary.json``); None when it is
    absent or not an object. Invalid JSON raises :class:`RunFolderError`."""
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise RunFolderError(f"{path} is not valid JSON ({error}); move it away to start this run afresh") from None
    return data if isinstance(data, dict) else None


def difference(asked: Any, held: Any, path: str) -> str:
    """The first field where two JSON values differ, with both values: ``run.decoding.temperature: 0.7 asked,
    0.5 in the folder``."""
    if isinstance(asked, dict) and isinstance(held, dict):
        key = next(k for k in sorted({*asked, *held}, key=str)
                   if k not in asked or k not in held or asked[k] != held[k])
        if key in asked and key in held:
            return difference(asked[key], held[key], f"{path}.{key}")
        return f"{path}.{key}: " + (f"{json.dumps(asked[key])} asked, absent in the folder" if key in asked
                                    else f"absent from this run, {json.dumps(held[key])} in the folder")
    if isinstance(asked, list) and isinstance(held, list) and len(asked) == len(held):
        index = next(i for i, (a, h) in enumerate(zip(asked, held)) if a != h)
        return difference(asked[index], held[index], f"{path}[{index}]")
    return f"{path}: {json.dumps(asked)} asked, {json.dumps(held)} in the folder"


@dataclass(frozen=True)
class Completeness:
    """Whether a run folder holds one run whole. Complete: ``records`` are the asked instances' records, in
    the order asked, and ``missing`` is None; else ``missing`` says what is missing or differs."""

    records: list[RunRecord]
    missing: str | None = None

    @property
    def complete(self) -> bool:
        return self.missing is None


def read_metadata(folder: str | Path) -> RunMetadata | None:
    """A run folder's ``metadata.json`` as a :class:`RunMetadata` (one written by an earlier version upgraded as
    it is read, with the ``config.json`` beside it); None when absent. :class:`RunFolderError` when it is not JSON
    or not run metadata."""
    path = Path(folder)
    data = read_json(path / METADATA)
    if data is None:
        return None
    try:
        return RunMetadata.model_validate(data, context={"config": read_json(path / CONFIG)})
    except ValidationError as error:
        raise RunFolderError(f"{path / METADATA} is not run metadata ({error.errors()[0]['msg']})") from None


def _run_missing(path: Path, config: "RunConfig") -> str | None:
    """Why ``path`` does not hold the finished run ``config`` (None: it does), its records aside."""
    if not path.is_dir():
        return "no run folder"
    summary = read_json(path / SUMMARY)
    if summary is None:
        return "no summary.json: its run never ended"
    if summary.get("status") != "finished":
        why = f": {summary['message']}" if summary.get("message") else ""
        return f"its last session did not finish (status {summary.get('status')!r}{why})"
    metadata = read_metadata(path)
    if metadata is None:
        return "no metadata.json"
    if metadata.record_schema != SCHEMA_VERSION:
        return f"records of schema {metadata.record_schema}, this version writes {SCHEMA_VERSION}"
    if metadata.run != (asked := config.spec.identity()):
        return f"made as another run ({difference(asked, metadata.run, 'run')})"
    if metadata.thinking_supported is None:
        return "its metadata.json does not say whether the model has a thinking mode (written before it did)"
    return None


def _records_missing(path: Path, instances: Sequence["Instance"]) -> tuple[str | None, list[RunRecord]]:
    """Why the records of ``path`` are not those of ``instances`` (None: they are), and the records when they are."""
    found, bad = parse_records((path / RECORDS).read_text(encoding="utf-8", errors="replace")
                               if (path / RECORDS).is_file() else "")
    edited = [line for line in bad if line.record_id is not None]
    if edited:
        return (f"{RECORDS} line {edited[0].line} does not hold what its model said ({edited[0].error})"
                + (f", and {len(edited) - 1} more such line(s)" if len(edited) > 1 else "")), []
    records = {r.id: r for r in found}
    absent = [i.id for i in instances if i.id not in records]
    if absent:
        return f"{len(absent)} of {len(instances)} asked instances have no record (first: {absent[0]})", []
    other = [i.id for i in instances if records[i.id].content_sha256 != i.content_sha256]
    if other:
        return (f"{len(other)} record(s) answer a row of the same id but other content (first: {other[0]}), "
                "e.g. an edited CSV"), []
    return None, [records[i.id] for i in instances]


def completeness(folder: str | Path, config: "RunConfig", instances: Sequence["Instance"], *,
                 records: bool = True) -> Completeness:
    """Whether ``folder`` holds the run ``config`` on ``instances`` whole, so that a page can be made from it
    alone: its last session finished (``summary.json``); its ``metadata.json`` was written by this record schema
    for the same run (:meth:`RunSpec.identity <cpdagthink.run.spec.RunSpec.identity>`: condition with its prompt
    hashes, probe, backend, model, computed options and decoding; never transport such as base URLs, timeouts
    and key variables) and says whether the model has a thinking mode; and every asked instance has a record
    of the same content. A record of a request the service refused counts: it is the run's outcome for that
    row (``cpdagthink run`` on the folder asks it again). Reads only: no lock, nothing written. Without
    ``records`` the records are checked and let go (the Completeness holds none)."""
    path = Path(folder)
    try:
        missing = _run_missing(path, config)
        missing, found = (missing, []) if missing else _records_missing(path, instances)
    except RunFolderError as error:  # a file that is not JSON: the run must be made again
        missing, found = str(error), []
    return Completeness(found if records else [], missing)


def is_complete(folder: str | Path, config: "RunConfig", instances: Sequence["Instance"]) -> bool:
    """``folder`` holds the run ``config`` on ``instances`` whole (:func:`completeness`)."""
    return completeness(folder, config, instances, records=False).complete


class RunFolder:
    """One run's folder: ``records.jsonl``, ``config.json``, ``metadata.json``, ``summary.json``."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        if self.path.exists() and not self.path.is_dir():
            raise RunFolderError(f"{self.path} is a file, not a run folder: choose another --out")
        try:
            self.path.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise RunFolderError(f"cannot create the run folder {self.path}: {error.strerror}") from error
        if not os.access(self.path, os.W_OK):
            raise RunFolderError(f"the run folder {self.path} is not writable")

    @contextlib.contextmanager
    def locked(self) -> Iterator["RunFolder"]:
        """Hold the folder's exclusive lock for the duration of a run; once held, remove what a writer killed
        before its rename left (:func:`~cpdagthink.files.remove_stale_temporaries`): no one else writes here."""
        with (self.path / LOCK).open("a+", encoding="utf-8") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                handle.seek(0)
                holder = handle.read().strip() or "unknown"
                raise RunLockedError(f"another run (pid {holder}) is writing into {self.path}; wait for it to "
                                     "finish or choose another output folder") from None
            handle.seek(0)
            handle.truncate()
            handle.write(str(os.getpid()))
            handle.flush()
            remove_stale_temporaries(self.path)
            try:
                yield self
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def load_records(self) -> list[RunRecord]:
        """The valid records, with the file rewritten (atomically) to hold exactly them; bad lines are
        appended to ``records.rejected.jsonl`` with their line numbers. Call only under :meth:`locked`."""
        path = self.path / RECORDS
        if not path.is_file():
            return []
        text = path.read_text(encoding="utf-8", errors="replace")
        records, bad = parse_records(text)
        # A kill between setting a line aside and the rewrite leaves it in the records: read again, it is not
        # set aside twice.
        known = self._set_aside()
        fresh = [line for line in bad if line.text not in known]
        if fresh:
            with (self.path / REJECTED_LINES).open("a", encoding="utf-8") as sink:
                for line in fresh:
                    sink.write(json.dumps({"line": line.line, "error": line.error, "text": line.text}) + "\n")
        self.rewrite_records(records, unless_equal=text)
        return records

    def _set_aside(self) -> set[str]:
        """The texts of the lines ``records.rejected.jsonl`` already holds (a torn entry of its own is skipped)."""
        path = self.path / REJECTED_LINES
        if not path.is_file():
            return set()
        texts = set()
        for entry in jsonl_lines(path.read_text(encoding="utf-8", errors="replace")):
            with contextlib.suppress(ValueError):
                found = json.loads(entry)
                if isinstance(found, dict) and isinstance(found.get("text"), str):
                    texts.add(found["text"])
        return texts

    def rewrite_records(self, records: list[RunRecord], unless_equal: str | None = None) -> None:
        text = "".join(r.model_dump_json() + "\n" for r in records)
        if text != unless_equal:
            _write(self.path / RECORDS, text)

    @contextlib.contextmanager
    def appender(self) -> Iterator[Any]:
        """Append records one line at a time, each handed to the system whole, so a kill loses at most the line
        being written; a write that fails (a full disk) is cut off again, leaving no torn line, and raises
        :class:`RunFolderError` naming the file."""
        path = self.path / RECORDS
        with path.open("ab", buffering=0) as sink:
            def append(record: RunRecord) -> None:
                line = memoryview((dump_json(record) + "\n").encode("utf-8"))
                end = sink.seek(0, os.SEEK_END)
                try:
                    while line:
                        line = line[os.write(sink.fileno(), line):]
                except OSError as error:
                    sink.truncate(end)
                    raise RunFolderError(f"cannot write {path}: {error.strerror or error}; "
                                         "every record before this one is kept") from None
            yield append

    def read_json(self, name: str) -> dict[str, Any] | None:
        return read_json(self.path / name)

    def write_json(self, name: str, data: dict[str, Any] | BaseModel) -> None:
        text = dump_json(data, indent=2) if isinstance(data, BaseModel) else json.dumps(data, indent=2)
        _write(self.path / name, text)

    def summary(self) -> RunSummary | None:
        data = self.read_json(SUMMARY)
        return None if data is None else RunSummary.model_validate(data)
