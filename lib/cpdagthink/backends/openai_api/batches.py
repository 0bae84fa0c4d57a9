"""Batch mode: a turn's requests sent as batch files (the OpenAI Batch API, or ``vllm run-batch`` on the node),
at half the price and in a separate rate-limit pool on the service, turn by turn over a whole run.

Each request is one JSONL line (``custom_id``, ``method``, ``url``, ``body``) whose ``custom_id`` is the call's
cache key, so an answer lands in the same cache entry and the same record as a direct call's. A turn's lines
are split into files at the service's limits (:data:`MAX_REQUESTS` lines, :data:`MAX_BYTES` bytes:
:func:`split_lines`), one batch per file, all submitted before any is waited for.

Nothing is paid twice: each batch is written down in the state folder (:class:`BatchState`; a run keeps it in
its folder, ``batches/``) before it is submitted (tagged with its input file's sha256, which the batch's
metadata carries too) and again with its id once the service has it; a session that starts finds the batches
written there that cover its requests and waits for those instead of submitting them again (a batch whose id
never reached the folder is found at the service by its tag). Each downloaded output and error file is kept
beside its record until the run is done with it. Runs made together send their requests in the same batches
(:meth:`BatchState.shared`): each run's folder then keeps every batch holding any of its requests, so a run
collected again alone, or with the others, polls it instead of submitting it again.

How each ending is handled (:meth:`BatchRounds.run`): ``completed``, its lines matched by ``custom_id`` (an
answer that cannot be read counts as an error line); error lines sent again in the next round up to
``retries`` times, then answered as refused with the service's reason (an HTTP 400/413/422 at once, as a direct
call's); ``expired``, its finished lines kept and the rest sent again; ``failed`` at validation, the service's
message raised and the same file never sent again; ``cancelled`` (by the user at the service), what finished
kept and the run stopped (:class:`BatchStopped`), so a rerun goes on with the rest. ``Ctrl-C`` leaves the
batches running and says how to collect or cancel them.
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Protocol, Sequence

from ..base import BackendError
from .batch_state import TERMINAL, BatchRecord, BatchState
from .responses import MalformedAnswer

MAX_REQUESTS = 50_000  # requests in one batch input file (the service's limit)
MAX_BYTES = 200_000_000  # bytes of one batch input file: under the service's 200 MB however a MB is counted
REFUSED_STATUS = (400, 413, 422)  # the request itself is at fault: refused at once, as a direct call's would be
TAG_KEY = "cpdagthink_input"  # the batch metadata key holding the input file's sha256
# What the command line says to run about a run folder's batches (each folder's command, for runs made together).
RESUME_HINT = "rerun the same command to collect them (nothing is submitted twice), or cancel them with: {commands}"
CANCEL_COMMAND = "cpdagthink batches --cancel {folder}"


class BatchStopped(BackendError):
    """A batch ended in a way that stops the run: ``failed`` at validation or ``cancelled`` at the service.
    ``answers`` holds what did come back (by ``custom_id``), so the caller keeps it."""

    def __init__(self, message: str, answers: dict[str, Any]):
        self.answers = answers
        super().__init__(message)


@dataclass(frozen=True)
class Refused:
    """A request the batches did not answer: the service's reason, and its HTTP status when it gave one."""

    message: str
    status_code: int | None = None


def input_line(custom_id: str, url: str, body: dict[str, Any]) -> bytes:
    """One line of a batch input file."""
    return json.dumps({"custom_id": custom_id, "method": "POST", "url": url, "body": body},
                      ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


def split_lines(lines: Sequence[bytes], max_requests: int = MAX_REQUESTS, max_bytes: int = MAX_BYTES) -> list[list[bytes]]:
    """``lines`` in order, cut into files of at most ``max_requests`` lines and ``max_bytes`` bytes each. A line
    over ``max_bytes`` alone cannot be sent in any file: ValueError."""
    files: list[list[bytes]] = []
    size = 0
    for line in lines:
        if len(line) > max_bytes:
            raise ValueError(f"one request is {len(line)} bytes, over the {max_bytes} bytes a batch file may hold")
        if not files or len(files[-1]) >= max_requests or size + len(line) > max_bytes:
            files.append([])
            size = 0
        files[-1].append(line)
        size += len(line)
    return files


def line_error(line: dict[str, Any]) -> tuple[Any, str]:
    """(code, message) of an output or error line that is not an answer, in each shape it comes in: the Batch
    API's (the HTTP error in ``response.body.error``, or a line-level ``error`` object such as ``batch_expired``)
    and ``vllm run-batch``'s (``response.body`` null and ``error`` the server's error response, ``{"error":
    {...}}``, or a bare string for a URL it does not serve)."""
    body = (line.get("response") or {}).get("body")
    error = line.get("error")
    if isinstance(error, str):
        return None, error
    for found in (body.get("error") if isinstance(body, dict) else None,
                  error.get("error") if isinstance(error, dict) else None, error):
        if isinstance(found, dict) and (found.get("message") or found.get("code")):
            return found.get("code"), str(found.get("message") or "no reason given")
    return None, "no reason given"


@dataclass(frozen=True)
class Poll:
    """What the service says of a batch: its status and counts, and once it ended its files and failure."""

    status: str
    counts: dict[str, int] = field(default_factory=dict)
    output: bytes | None = None
    errors: bytes | None = None
    message: str | None = None


class BatchService(Protocol):
    """Where batch files run: the OpenAI Batch API (:class:`OpenAIBatches`) or ``vllm run-batch``."""

    name: str
    where: str  # the public address or command, as a call's ``meta["base_url"]``

    def submit(self, endpoint: str, data: bytes, tag: str, state: BatchState, record: BatchRecord) -> str:
        """Submit one input file; the batch's id."""

    def find(self, tag: str) -> str | None:
        """The id of a batch submitted with ``tag`` whose id was never written down, if the service has one."""

    def poll(self, record: BatchRecord, state: BatchState) -> Poll:
        """The batch's state; its output and error files' bytes once it ended."""

    def cancel(self, batch_id: str) -> None:
        """Ask the service to cancel the batch."""


def _duration(seconds: float) -> str:
    seconds = int(seconds)
    hours, rest = divmod(seconds, 3600)
    return (f"{hours}h" if hours else "") + f"{rest // 60}m{rest % 60:02d}s"


def progress_line(record: BatchRecord, now: float) -> str:
    """How a batch stands, on one line: status, counts and the time since it was submitted."""
    c = record.counts
    counts = f"{c.get('completed', 0)} of {c.get('total', len(record.custom_ids))} done, {c.get('failed', 0)} failed"
    name = record.batch_id or f"with input {record.name} (its id not yet known)"
    return f"batch {name} ({record.endpoint}): {record.status}, {counts}, " \
           f"{_duration(now - record.submitted_at)} since submission"


def say(line: str) -> None:
    """Progress goes to stderr, between the run's own progress bar lines."""
    print(line, file=sys.stderr, flush=True)


@dataclass
class _Round:
    """What one session of :meth:`BatchRounds.run` has settled so far."""

    pending: dict[str, dict[str, Any]]
    answers: dict[str, Any] = field(default_factory=dict)
    tries: Counter = field(default_factory=Counter)
    stops: list[str] = field(default_factory=list)


class BatchRounds:
    """Requests through batch files until each is answered or refused (module docstring). ``poll_s``: seconds
    between polls; ``retries``: rounds an error line is sent again; ``max_requests``/``max_bytes``: a file's
    limits (the service's by default); ``report``: where progress lines go."""

    def __init__(self, service: BatchService, state: BatchState, *, poll_s: float = 30.0, retries: int = 4,
                 report: Callable[[str], None] = say, report_every_s: float = 60.0):
        self.service, self.state, self.poll_s, self.retries = service, state, poll_s, retries
        self.report, self.report_every_s = report, report_every_s
        self.max_requests, self.max_bytes = MAX_REQUESTS, MAX_BYTES
        self.running: list[BatchRecord] = []  # batches this session waits for (what Ctrl-C leaves running)
        self.submitted = 0  # batches submitted by this object (for tests and cost accounting)

    def run(self, items: dict[str, dict[str, Any]], endpoint: str, read: Callable[[str, dict[str, Any], str], Any]
            ) -> dict[str, Any]:
        """Each of ``items`` (``custom_id`` -> request body) answered: ``read(custom_id, body, batch_id)`` of its
        answer, or :class:`Refused`. Raises :class:`BatchStopped` (with the answers so far) when a batch
        failed or was cancelled; an interruption carries the answers so far as its ``answers``."""
        work = _Round(dict(items))
        earlier = self._adopt(work.pending)
        try:
            while work.pending:
                for record in [r for r in earlier if r.status in TERMINAL]:
                    self._settle(record, work, read, fresh=False)
                self.running = [r for r in earlier if r.status not in TERMINAL]
                covered = {c for r in self.running for c in r.custom_ids}
                self.running += self._submit({k: v for k, v in work.pending.items() if k not in covered}, endpoint, work)
                for record in self._wait():
                    self._settle(record, work, read, fresh=True)
                if work.stops:
                    raise BatchStopped("; ".join(work.stops), work.answers)
                earlier = []
        except KeyboardInterrupt as stopped:
            self._left_running()
            stopped.answers = work.answers
            raise
        return work.answers

    def _adopt(self, pending: dict[str, Any]) -> list[BatchRecord]:
        """The batches written down before that cover some of ``pending``, except failed ones; one whose id never
        reached the folder is looked for at the service by its tag, and forgotten when it is not there."""
        adopted = []
        for record in self.state.records():
            if record.status == "failed" or not pending.keys() & set(record.custom_ids):
                continue
            if record.batch_id is None:
                record.batch_id = self.service.find(record.tag)
                if record.batch_id is None:
                    self.state.forget(record)
                    continue
                record.status = "validating"
                self.state.save(record)
            if record.status not in TERMINAL:
                self.report(f"batch {record.batch_id} was submitted earlier: waiting for it, not submitting again")
            adopted.append(record)
        return adopted

    def _submit(self, items: dict[str, dict[str, Any]], endpoint: str, work: _Round) -> list[BatchRecord]:
        """One batch per file of ``items``, each written down before it is sent; a file that failed validation
        before is not sent again (its message joins ``work.stops``)."""
        failed = {r.tag: r for r in self.state.records() if r.status == "failed"}
        made = []
        for lines in split_lines([input_line(k, endpoint, b) for k, b in items.items()], self.max_requests,
                                 self.max_bytes):
            data = b"".join(lines)
            tag = hashlib.sha256(data).hexdigest()
            if tag in failed:
                where = " and ".join(map(str, self.state.paths(failed[tag])))
                work.stops.append(f"this batch file failed at the service before and is not sent again until its "
                                  f"cause changes: {failed[tag].message} (to send it as it is, e.g. once a full "
                                  f"queue has emptied, remove {where})")
                continue
            record = BatchRecord(tag=tag, service=self.service.name, endpoint=endpoint, submitted_at=time.time(),
                                 custom_ids=[json.loads(line)["custom_id"] for line in lines])
            self.state.save(record)  # before the service has it: a kill now is found by the tag
            record.batch_id = self.service.submit(endpoint, data, tag, self.state, record)
            record.status = "validating"
            self.state.save(record)
            self.submitted += 1
            self.report(f"batch {record.batch_id}: {len(lines)} requests submitted to {self.service.where}")
            made.append(record)
        return made

    def _wait(self) -> Iterator[BatchRecord]:
        """Poll :attr:`running` until each batch ends; yield each as it ends, its files kept in the state folder."""
        said = 0.0
        while self.running:
            changed = False
            for record in list(self.running):
                changed |= self._update(record)
                if record.status in TERMINAL:
                    self.running.remove(record)
                    self.report(progress_line(record, time.time()))
                    yield record
            if self.running and (changed or time.time() - said >= self.report_every_s):
                said = time.time()
                for record in self.running:
                    self.report(progress_line(record, said))
            if self.running:
                time.sleep(self.poll_s)

    def _update(self, record: BatchRecord) -> bool:
        """Ask the service how ``record`` stands and write it down (with its files once it ended); whether its
        status or counts changed."""
        poll = self.service.poll(record, self.state)
        changed = (poll.status, poll.counts) != (record.status, record.counts)
        record.status, record.counts, record.message = poll.status, poll.counts or record.counts, poll.message
        if poll.status in TERMINAL:
            self.state.keep(record, "output", poll.output)
            self.state.keep(record, "errors", poll.errors)
        self.state.save(record)
        return changed

    def refresh(self) -> None:
        """Ask the service how each batch of the state folder that had not ended stands now (``cpdagthink batches
        --refresh``); a run that collects them later reads what ended from the folder."""
        for record in self.state.records():
            if record.batch_id and record.status not in TERMINAL:
                self._update(record)

    def _settle(self, record: BatchRecord, work: _Round, read: Callable[..., Any], *, fresh: bool) -> None:
        """Take what an ended batch answered; decide for each other request of it (module docstring). Only an
        ending seen in this session stops the run: one found ended in the folder was reported when it ended."""
        if record.status == "failed":
            if fresh:
                work.stops.append(f"batch {record.batch_id} failed at the service: {record.message}")
            return
        seen = set()
        for line in self.state.lines(record, "output") + self.state.lines(record, "errors"):
            cid = line.get("custom_id")
            if cid in work.pending:
                seen.add(cid)
                self._line(cid, line, record, work, read)
        for cid in set(record.custom_ids) & work.pending.keys() - seen:
            self._error(cid, "the batch returned no line for this request", work)
        if record.status == "cancelled" and fresh and not record.cancel_asked:
            left = len(set(record.custom_ids) & work.pending.keys())
            work.stops.append(f"batch {record.batch_id} was cancelled at the service; {left} of its requests were "
                              "not answered: rerun to send them again")

    def _line(self, cid: str, line: dict[str, Any], record: BatchRecord, work: _Round, read: Callable[..., Any]) -> None:
        response = line.get("response") or {}
        status = response.get("status_code")
        if status == 200:
            try:
                work.answers[cid] = read(cid, response.get("body"), record.batch_id)
                del work.pending[cid]
            except MalformedAnswer as malformed:
                self._error(cid, f"HTTP 200 but the body is not a well-formed answer ({malformed})", work)
            return
        code, message = line_error(line)
        if status in REFUSED_STATUS:
            work.answers[cid] = Refused(f"HTTP {status}: {message}", status)
            del work.pending[cid]
        elif code == "batch_cancelled":
            pass  # sent again by a rerun
        else:
            self._error(cid, f"HTTP {status}: {message}" if status else f"{code}: {message}", work)

    def _error(self, cid: str, reason: str, work: _Round) -> None:
        """An error line (an expired request counts as one): sent again next round, or refused once the
        retries are spent."""
        work.tries[cid] += 1
        if work.tries[cid] > self.retries:
            work.answers[cid] = Refused(f"not answered by {work.tries[cid]} batch rounds; the last: {reason}")
            del work.pending[cid]

    def _left_running(self) -> None:
        if self.running:
            ids = ", ".join(str(r.batch_id) for r in self.running)
            self.report(f"interrupted: {len(self.running)} batch(es) keep running at the service ({ids}); "
                        + RESUME_HINT.format(commands="; ".join(CANCEL_COMMAND.format(folder=f)
                                                                for f in self.state.runs)))

    def cancel_all(self) -> list[str]:
        """Ask the service to cancel every batch of the state folder that has not ended; their ids."""
        cancelled = []
        for record in self.state.records():
            if record.batch_id and record.status not in TERMINAL:
                self.service.cancel(record.batch_id)
                record.status, record.cancel_asked = "cancelling", True
                self.state.save(record)
                cancelled.append(record.batch_id)
        return cancelled


class OpenAIBatches:
    """The OpenAI Batch API (or a service that keeps its rules) through the backend's client: ``call(fn)`` runs
    ``fn(client)`` with the backend's retries and time bound (:meth:`~.transport.Transport.request`)."""

    name = "openai"

    def __init__(self, call: Callable[[Callable[[Any], Any]], Any], where: str):
        self.call, self.where = call, where

    def submit(self, endpoint: str, data: bytes, tag: str, state: BatchState, record: BatchRecord) -> str:
        file = self.call(lambda c: c.files.create(file=(f"{record.name}.jsonl", data), purpose="batch"))
        batch = self.call(lambda c: c.batches.create(input_file_id=file.id, endpoint=endpoint,
                                                     completion_window="24h", metadata={TAG_KEY: tag}))
        return batch.id

    def find(self, tag: str, pages: int = 10) -> str | None:
        """The newest batch (of the last ``pages`` hundred) whose metadata carries ``tag``."""
        after = None
        for _ in range(pages):
            page = self.call(lambda c: c.batches.list(limit=100, **({"after": after} if after else {})))
            found = next((b.id for b in page.data if (b.metadata or {}).get(TAG_KEY) == tag), None)
            if found or not page.has_more or not page.data:
                return found
            after = page.data[-1].id
        return None

    def poll(self, record: BatchRecord, state: BatchState) -> Poll:
        batch = self.call(lambda c: c.batches.retrieve(record.batch_id))
        counts = batch.request_counts.model_dump() if batch.request_counts else {}
        if batch.status not in TERMINAL:
            return Poll(batch.status, counts)
        errors = (batch.errors.data or []) if batch.errors else []
        message = "; ".join(f"line {e.line}: {e.message} ({e.code})" if e.line else f"{e.message} ({e.code})"
                            for e in errors[:5]) or None
        return Poll(batch.status, counts, self._content(batch.output_file_id), self._content(batch.error_file_id),
                    message)

    def _content(self, file_id: str | None) -> bytes | None:
        return None if not file_id else self.call(lambda c: c.files.content(file_id).content)

    def cancel(self, batch_id: str) -> None:
        self.call(lambda c: c.batches.cancel(batch_id))
