"""Where batch mode writes its batches down (:class:`BatchState`): a run's state folder (``batches/`` in its
folder), or the folders of runs made together whose requests share batches, so that nothing is submitted twice
and no answer is lost across a kill (:mod:`.batches`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import AbstractSet, Any, Mapping

from pydantic import BaseModel

from ...files import jsonl_lines, write_atomic

TERMINAL = ("completed", "failed", "expired", "cancelled")
STATE_FOLDER = "batches"  # in a run folder


class BatchRecord(BaseModel):
    """One batch as the state folder keeps it: written before submission (``status`` ``submitting``), then with
    the service's id, then with each status seen."""

    tag: str  # sha256 of the input file
    service: str
    endpoint: str
    custom_ids: list[str]
    submitted_at: float
    batch_id: str | None = None
    status: str = "submitting"
    counts: dict[str, int] = {}
    message: str | None = None  # why a batch failed
    cancel_asked: bool = False  # cancelled from here (``cpdagthink batches --cancel``): a rerun goes on without stopping

    @property
    def name(self) -> str:
        return self.tag[:24]


class BatchState:
    """Where batches are written down: a run's state folder, with ``<name>.json`` per batch, ``<name>.output.jsonl``
    and ``<name>.errors.jsonl`` once downloaded, ``<name>.input.jsonl`` for a service that reads its input from
    disk. Or the state folders of runs whose requests go in the same batches (:meth:`shared`): each keeps the
    batches holding any of its run's requests, listing those requests only, and of their downloaded files the
    lines of those requests only (a book's runs need not each hold every run's answers); read together, they
    are one state."""

    def __init__(self, folder: str | Path):
        self.folder = Path(folder)
        self.asked: dict[Path, AbstractSet[str] | None] = {self.folder: None}  # folder -> its requests (None: all)

    @classmethod
    def shared(cls, asked: Mapping[Path, AbstractSet[str]]) -> "BatchState":
        """The state folders of several runs, each with the ``custom_id`` of every request its run sends."""
        state = cls(next(iter(asked)))
        state.asked = {Path(folder): ids for folder, ids in asked.items()}
        return state

    @property
    def runs(self) -> list[Path]:
        """The run folders whose state this is."""
        return [folder.parent for folder in self.asked]

    def _holding(self, record: BatchRecord) -> dict[Path, AbstractSet[str] | None]:
        """The folders that keep ``record`` (those whose run asked any of its requests), with their requests."""
        return {f: ids for f, ids in self.asked.items() if ids is None or not ids.isdisjoint(record.custom_ids)}

    def records(self) -> list[BatchRecord]:
        """Every batch written down, oldest first; one kept in several folders is read as one (:func:`_merged`)."""
        found: dict[str, BatchRecord] = {}
        for folder in (f for f in self.asked if f.is_dir()):
            for path in sorted(folder.glob("*.json")):
                record = BatchRecord.model_validate_json(path.read_text())
                found[record.tag] = _merged(found[record.tag], record) if record.tag in found else record
        return sorted(found.values(), key=lambda r: r.submitted_at)

    def save(self, record: BatchRecord) -> None:
        for folder, ids in self._holding(record).items():
            kept = record if ids is None else record.model_copy(
                update={"custom_ids": [c for c in record.custom_ids if c in ids]})
            write_atomic(folder / f"{record.name}.json", kept.model_dump_json(indent=1))

    def forget(self, record: BatchRecord) -> None:
        """Remove ``record`` from every folder (a batch the service never received)."""
        for folder in self.asked:
            (folder / f"{record.name}.json").unlink(missing_ok=True)

    def paths(self, record: BatchRecord) -> list[Path]:
        """The files ``record`` is written down in."""
        return [folder / f"{record.name}.json" for folder in self._holding(record)]

    def file(self, record: BatchRecord, kind: str) -> Path:
        """Where a file of ``record`` is written whole (a service's input and output): the first folder keeping it."""
        return next(iter(self._holding(record)), self.folder) / f"{record.name}.{kind}.jsonl"

    def keep(self, record: BatchRecord, kind: str, data: bytes | None) -> None:
        """Keep a downloaded file of ``record``: in each folder keeping it, the lines of that folder's requests."""
        if data is None:
            return
        text = data.decode()
        lines = [(line, _custom_id(line)) for line in text.splitlines(keepends=True)]
        for folder, ids in self._holding(record).items():
            kept = text if ids is None else "".join(line for line, cid in lines if cid in ids)
            write_atomic(folder / f"{record.name}.{kind}.jsonl", kept)

    def lines(self, record: BatchRecord, kind: str) -> list[dict[str, Any]]:
        """The lines of a downloaded file of ``record``, from every folder (each request's once)."""
        found: dict[Any, dict[str, Any]] = {}
        for folder in self.asked:
            path = folder / f"{record.name}.{kind}.jsonl"
            for line in read_lines(path.read_text()) if path.is_file() else []:
                found.setdefault(line.get("custom_id"), line)
        return list(found.values())


def _merged(held: BatchRecord, other: BatchRecord) -> BatchRecord:
    """One batch as two folders keep it: the requests of both, at the state of the copy least far along (a copy
    that has ended was ended in a session that kept the lines of its own folder's requests only, so the batch is
    polled again for the others'), one with its id before one without."""
    first, second = sorted((held, other), key=lambda r: (r.batch_id is None, r.status in TERMINAL))
    return first.model_copy(update={"custom_ids": list(dict.fromkeys(first.custom_ids + second.custom_ids)),
                                    "cancel_asked": first.cancel_asked or second.cancel_asked})


def _custom_id(line: str) -> Any:
    """The ``custom_id`` of one line of a downloaded file (None when the line is not a JSON object)."""
    try:
        value = json.loads(line)
    except ValueError:
        return None
    return value.get("custom_id") if isinstance(value, dict) else None


def read_lines(text: str) -> list[dict[str, Any]]:
    """The JSON objects of a JSONL file's lines; a line that is not one (cut by a kill mid-write) is left out, so
    its request counts as unanswered."""
    found = []
    for line in jsonl_lines(text):
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            found.append(value)
    return found
