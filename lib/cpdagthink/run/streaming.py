"""Runs on a backend that serves one request at a time over the network (:attr:`Backend.streams_requests
<cpdagthink.backends.base.Backend>`, the OpenAI-compatible one): each instance goes through its turns on its
own, so its turn 2 is sent the moment its turn 1 arrives and no slot waits for the slowest call of a batch.

* :class:`Lanes`: the worker threads of one backend, shared by every run on it, so runs launched together (a
  plan group's conditions, seeds and probes) interleave on them. The backend's transport bounds the requests
  in flight across all of them (``max_concurrency``); there are :data:`LANES_PER_SLOT` lanes a slot, so that
  instances waiting out a retry's backoff, or being read and recorded, never leave a slot idle.
* :class:`Flights`: a request two runs ask at once (a probe's turn 1 is the unprobed run's) is sent once; the
  other waits for its answer and reads it from the cache.
* :class:`Health`: a request whose every attempt failed (:class:`RetriesExhausted`) leaves its instance
  unanswered and the run goes on; the run stops, resumably, only when a share ``fail_on_error`` of its last
  :data:`WINDOW` fresh requests failed so: the service looks broken (:class:`RunAborted`).
"""

from __future__ import annotations

import collections
import contextlib
import functools
import os
import queue
import threading
import weakref
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from tqdm.auto import tqdm

from ..backends.base import Backend, BackendError
from ..backends.transport import RetriesExhausted
from ..causal.instance import Instance
from ..method.chat import Completion
from .records import RunRecord

LANES_PER_SLOT = 4
# The fresh requests the health check looks back over, and how many it needs before it judges.
WINDOW = 50
LEAST = 10

__all__ = ["BudgetSpent", "Flights", "Health", "Lanes", "RetriesExhausted", "RunAborted", "Tally", "counting", "lanes_for", "stream"]


class RunAborted(BackendError):
    """The service refused every one of the first requests of a run, or failed too large a share of its last
    ones: paying for (or waiting on) the rest would be waste. The run resumes where it stopped."""


class BudgetSpent(RunAborted):
    """The next call could take the run past its ``max_cost`` (:mod:`.budget`): the run stops before sending it,
    resumably, once the calls in flight have landed."""


class Lanes:
    """``workers`` daemon threads running posted jobs first come, first served (started on first use). A job is a
    bare callable that hands on its own outcome: a grid's runs post tens of thousands at once, and a ``Future``
    each (a lock, a condition and two lists) made the heap that the garbage collector walks several times larger,
    its pauses stalling every lane."""

    def __init__(self, workers: int):
        self.workers = workers
        self._jobs: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self._started = 0
        self._lock = threading.Lock()

    def post(self, job: Callable[[], None]) -> None:
        """Run ``job()`` on a lane; it must raise nothing (a job that raises ends its lane for good)."""
        self._jobs.put(job)
        with self._lock:
            while self._started < self.workers:
                self._started += 1
                threading.Thread(target=self._work, daemon=True, name=f"lane-{self._started}").start()

    def _work(self) -> None:
        while True:
            self._jobs.get()()


_LANES: "weakref.WeakKeyDictionary[Backend, Lanes]" = weakref.WeakKeyDictionary()
_LANES_LOCK = threading.Lock()


def lanes_for(backend: Backend) -> Lanes:
    """The lanes every run on ``backend`` shares (:data:`LANES_PER_SLOT` per request it may have in flight)."""
    with _LANES_LOCK:
        if backend not in _LANES:
            _LANES[backend] = Lanes(LANES_PER_SLOT * max(1, backend.max_concurrency))
        return _LANES[backend]


class Flights:
    """The requests being asked in this process, by cache folder and key, so that one asked by two runs at
    once is paid once."""

    def __init__(self) -> None:
        self._asking: dict[tuple[Path, str], threading.Event] = {}
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def claim(self, folder: Path, key: str) -> Iterator[bool]:
        """True: this thread asks for ``key`` (others wait until the block ends); False: another thread asked for
        it and has finished (its answer is in the cache, unless it failed)."""
        with self._lock:
            asking = self._asking.get((folder, key))
            if asking is None:
                mine = self._asking[(folder, key)] = threading.Event()
        if asking is not None:
            asking.wait()
            yield False
            return
        try:
            yield True
        finally:
            with self._lock:
                del self._asking[(folder, key)]
            mine.set()


FLIGHTS = Flights()


def ask_once(folder: Path, key: str, read: Callable[[], Completion | None],
             ask: Callable[[], Completion]) -> tuple[Completion, bool]:
    """``key``'s completion and whether it was read rather than asked: ``ask()`` (which caches what it gets) when
    no other thread is asking for it, else what that one kept (``read()``), asking again if it kept nothing."""
    while True:
        with FLIGHTS.claim(folder, key) as mine:
            if mine:
                # another thread may have asked and kept it between the caller's look in the cache and this claim
                found = read()
                return (found, True) if found is not None else (ask(), False)
        found = read()
        if found is not None:
            return found, True


class Health:
    """The outcomes of a run's last :data:`WINDOW` fresh requests; :meth:`check` stops the run when a share
    ``fail_on_error`` or more of them failed every attempt (at least :data:`LEAST` seen; None: never)."""

    def __init__(self, fail_on_error: float | None):
        self.fail_on_error = fail_on_error
        self._last: collections.deque[bool] = collections.deque(maxlen=WINDOW)
        self.first_failure: str | None = None

    def answered(self, record: RunRecord) -> None:
        self._last.extend(False for t in record.turns if not t.cache_hit)

    def failed(self, reason: str) -> None:
        self._last.append(True)
        self.first_failure = self.first_failure or reason

    def check(self) -> None:
        failed, seen = sum(self._last), len(self._last)
        if self.fail_on_error and seen >= LEAST and failed >= self.fail_on_error * seen:
            raise RunAborted(f"the service looks broken: {failed} of the last {seen} requests failed every attempt "
                             f"(fail_on_error {self.fail_on_error:g}); stopping, resumably. First failure: "
                             f"{self.first_failure}")


def stream(todo: Sequence[Instance], make: Callable[[Instance], RunRecord], lanes: Lanes, health: Health,
           keep: Callable[[RunRecord], None], stop: threading.Event) -> dict[str, str]:
    """Make the record of each of ``todo`` on its own (``make``, on ``lanes``) and ``keep`` each in the order
    they finish; return the instances left unanswered (their request failed every attempt), each with why.
    A fatal error (a key refused, quota spent), :class:`RunAborted` from ``health``, or ``stop`` set (raised as
    :class:`KeyboardInterrupt`: the runs made together were interrupted) stops waiting: what has not started is
    dropped, what is in flight still lands in the cache. :class:`BudgetSpent` stops the run too, once the
    instances in flight (their calls paid for within the budget) are kept."""
    ended = threading.Event()  # set when this stops waiting: a job not yet begun is then dropped
    # Each job hands its outcome to this run on a queue, as it ends: waiting over the pending jobs instead costs a
    # pass over every one per wake-up, quadratic in a run's instances (1162 a run at paper scale).
    arrived: queue.SimpleQueue[Outcome] = queue.SimpleQueue()
    for instance in todo:
        lanes.post(functools.partial(_one, ended, make, instance, arrived))
    left, unanswered = len(todo), {}
    spent: BudgetSpent | None = None
    try:
        while left:
            done = _arrivals(arrived, timeout=0.2)
            left -= len(done)
            spent = _collect(done, keep, health, unanswered) or spent
            if spent is None:
                health.check()
            if stop.is_set():
                raise KeyboardInterrupt("interrupted: the runs on this backend were stopped")
    finally:
        ended.set()
    if spent is not None:
        raise spent
    return unanswered


# An instance, its record (None: not made) and the error that left it without one (None: none).
Outcome = tuple[Instance, "RunRecord | None", "BaseException | None"]


def _one(ended: threading.Event, make: Callable[[Instance], RunRecord], instance: Instance,
         arrived: "queue.SimpleQueue[Outcome]") -> None:
    """``make(instance)`` on a lane, unless the run ``ended`` before the lane got to it, its outcome handed on
    ``arrived``; an error that ends the run (any but :class:`RetriesExhausted`) ends it here at once, so no
    other lane begins another instance meanwhile."""
    if ended.is_set():
        arrived.put((instance, None, None))
        return
    try:
        outcome: Outcome = (instance, make(instance), None)
    except RetriesExhausted as error:
        outcome = (instance, None, error)
    except BaseException as error:  # noqa: BLE001 - raised on the run's thread by _collect
        ended.set()
        outcome = (instance, None, error)
    arrived.put(outcome)


def _arrivals(arrived: "queue.SimpleQueue[Outcome]", timeout: float) -> list[Outcome]:
    """The outcomes handed on since the last look: the first to arrive within ``timeout`` seconds (none: an empty
    list) and every other already there."""
    try:
        done = [arrived.get(timeout=timeout)]
    except queue.Empty:
        return []
    while True:
        try:
            done.append(arrived.get_nowait())
        except queue.Empty:
            return done


def _collect(done: list[Outcome], keep: Callable[[RunRecord], None], health: Health,
             unanswered: dict[str, str]) -> "BudgetSpent | None":
    """Keep the records of the ``done`` outcomes, note those left unanswered, raise an error that ends the run;
    the budget's stop among them, if any (the others are still collected: their calls were paid for)."""
    spent = None
    for instance, record, error in done:
        if isinstance(error, RetriesExhausted):
            unanswered[instance.id] = str(error)
            health.failed(str(error))
        elif isinstance(error, BudgetSpent):
            spent = spent or error
        elif error is not None:
            raise error
        elif record is not None:  # None: dropped, the run was ending
            keep(record)
            health.answered(record)
    return spent


class Tally:
    """The progress line of one run, or of several made at once on one backend: instances done of those asked,
    and the model calls made; off without ``enabled`` or under ``TQDM_DISABLE``."""

    def __init__(self, desc: str, enabled: bool = True):
        # TQDM_DISABLE, tqdm's own switch, read here too: its notebook bar ignores it, and the book's kernels set it
        # (a page shows results, not the progress of computing them)
        quiet = os.environ.get("TQDM_DISABLE", "").strip().lower() in ("1", "true", "yes")
        self.bar = tqdm(total=0, desc=desc, unit="inst", disable=not enabled or quiet)
        self._calls: list[Any] = []
        self._lock = threading.Lock()
        self.stop = threading.Event()  # set: the streaming runs counted here stop as interrupted

    def join(self, asked: int, done: int, calls: Any) -> None:
        """Count a run in: ``asked`` instances, ``done`` of them already, ``calls()`` the calls it has made."""
        with self._lock:
            self._calls.append(calls)
            if self.bar.disable:  # a disabled bar keeps no counts
                return
            self.bar.total += asked
            self.bar.n += done
            self.bar.initial += done  # the rate counts this session's instances only
            self.bar.refresh()

    def done(self) -> None:
        """One more instance done."""
        with self._lock:
            self.bar.set_postfix_str(f"{sum(calls() for calls in self._calls)} calls", refresh=False)
            self.bar.update(1)

    def close(self) -> None:
        self.bar.close()


@contextlib.contextmanager
def counting(tally: Tally | None, desc: str, enabled: bool) -> Iterator[Tally]:
    """``tally`` (shared by runs made together), or a line of one run's own (``desc``), closed when the block ends."""
    if tally is not None:
        yield tally
        return
    own = Tally(desc, enabled)
    try:
        yield own
    finally:
        own.close()
