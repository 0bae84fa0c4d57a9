"""How many threads llama.cpp should compute on, given what other processes take of this process's CPUs.

llama.cpp's OpenMP threads meet at a barrier after every operation of every token. On a quiet machine a thread
that waits there spins, which is what makes the default fastest; beside a CPU-bound neighbour one of them is
descheduled while the others spin for it, and a call takes three times as long as on a quiet machine (worse than
the neighbour's fair share). Spinning less (``OMP_WAIT_POLICY=PASSIVE``, a small ``GOMP_SPINCOUNT``) costs 10 to
40% on a quiet machine (``benchmarks/busy_machine.py``). So the spin stays, and the threads shrink instead: before
each call, :class:`CoreShare` measures how many of this process's CPUs other processes used since the last call
(the machine's busy time on those CPUs from ``/proc/stat``, less this process's own CPU time) and leaves them
those cores. Fewer threads change no output only where the build computes every thread count bit for bit alike,
which :func:`thread_invariance` measures once per build and model; where it does not, the threads stay as set.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

PROC_STAT = Path("/proc/stat")
MIN_WINDOW_S = 0.2  # a shorter interval holds too few of /proc/stat's clock ticks to tell a neighbour from noise


def _cpus() -> set[int]:
    try:
        return set(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return set(range(os.cpu_count() or 1))


# /proc/stat counts in clock ticks, a constant of the running system.
CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _busy_seconds(cpus: set[int], stat: Path = PROC_STAT) -> float | None:
    """Seconds the CPUs ``cpus`` spent on anything but idle and I/O wait since boot (None: no /proc/stat)."""
    try:
        lines = stat.read_text().splitlines()
    except OSError:
        return None
    busy = 0
    for line in lines:
        name, *ticks = line.split()
        if name.startswith("cpu") and name[3:].isdigit() and int(name[3:]) in cpus:
            values = [int(tick) for tick in ticks[:8]]  # user nice system idle iowait irq softirq steal
            busy += sum(values) - values[3] - values[4]
    return busy / CLOCK_TICKS


def _own_seconds() -> float:
    times = os.times()
    return times.user + times.system


class CoreShare:
    """The cores other processes took from this process's CPUs over the interval since the last reading
    (``clock`` and ``own``, this process's CPU seconds, are the system's unless a test gives its own)."""

    def __init__(self, stat: Path = PROC_STAT, clock: Callable[[], float] = time.monotonic,
                 own: Callable[[], float] = _own_seconds):
        self._stat, self._clock, self._own = stat, clock, own
        self._cpus = _cpus()
        self._last = self._reading()
        self._first = True

    def _reading(self) -> tuple[float, float | None, float]:
        return self._clock(), _busy_seconds(self._cpus, self._stat), self._own()

    def others(self) -> float | None:
        """Cores other processes kept busy since the last reading, which this call starts anew; None when the
        interval is too short to tell or the system keeps no ``/proc/stat``. The first call waits out the
        shortest interval, so that a process's first model call already knows its neighbours."""
        if self._first:
            self._first = False
            time.sleep(max(0.0, MIN_WINDOW_S - (self._clock() - self._last[0])))
        now = self._reading()
        (then_t, then_busy, then_own), (now_t, now_busy, now_own) = self._last, now
        window = now_t - then_t
        if window < MIN_WINDOW_S or then_busy is None or now_busy is None:
            return None
        self._last = now
        return max(0.0, (now_busy - then_busy) - (now_own - then_own)) / window

    def threads(self, most: int) -> int | None:
        """Threads for the next call: the cores the others left (rounded), between 1 and ``most``; None: keep."""
        others = self.others()
        if others is None:
            return None
        return max(1, min(most, round(len(self._cpus) - others)))


def next_threads(share: CoreShare | None, most: int, now: int, invariance: Callable[[], dict[int, float]]) -> int:
    """The threads the next call computes on: as many of ``most`` as the others leave free, where
    ``invariance()`` (:func:`thread_invariance`, measured only when fewer are wanted) finds that many computing
    bit for bit as ``most`` do; otherwise ``now``."""
    wanted = share.threads(most) if share is not None else None
    if wanted is None or wanted == now or (wanted < most and invariance().get(wanted) != 0.0):
        return now
    return wanted


def thread_invariance(llm: Any, capi: Any, tokens: list[int], most: int) -> dict[int, float]:
    """For n = 1..most-1, the largest absolute difference between logits computed on n threads and on ``most``
    threads (0.0: bit for bit the same): the last row of ``tokens`` evaluated in batches from an empty context,
    then two one-token steps (the two kinds of matrix product a call makes). Leaves ``most`` set, the context
    empty."""
    from .jump_forward import evaluate_rows, logits_row

    rows: dict[int, list[np.ndarray]] = {}
    for n in range(most, 0, -1):
        capi.llama_set_n_threads(llm.ctx, n, n)
        llm.reset()
        llm.eval(tokens[:-2])
        rows[n] = [logits_row(llm, -1).copy()] + [evaluate_rows(llm, [token])[0].copy() for token in tokens[-2:]]
    capi.llama_set_n_threads(llm.ctx, most, most)
    llm.reset()
    return {n: max(float(np.max(np.abs(a - b))) for a, b in zip(rows[n], rows[most])) for n in range(1, most)}
