"""Threads that leave a busy machine's cores to their neighbours, and change no output (backends/local/core_share.py)."""

from __future__ import annotations

import os
import time

import pytest

from cpdagthink.backends.local.core_share import CoreShare, next_threads, thread_invariance
from cpdagthink.method.chat import Request

HZ = os.sysconf("SC_CLK_TCK")


def _stat(path, busy_s: dict[int, float]) -> None:
    """A /proc/stat whose CPUs have spent ``busy_s`` seconds busy (user) and 1000 s idle each."""
    lines = ["cpu  0 0 0 0 0 0 0 0 0 0"]
    lines += [f"cpu{cpu} {round(seconds * HZ)} 0 0 {1000 * HZ} 0 0 0 0 0 0" for cpu, seconds in sorted(busy_s.items())]
    path.write_text("\n".join(lines + ["intr 0", "ctxt 0"]) + "\n")


class _Clock:
    """Seconds that pass only when a test says so, so that a loaded machine's slow sleeps change no window."""

    def __init__(self):
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _share(tmp_path, monkeypatch, cpus=(0, 1)) -> tuple[CoreShare, object, _Clock]:
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(cpus))
    stat = tmp_path / "stat"
    _stat(stat, {0: 10.0, 1: 10.0, 7: 10.0})
    clock = _Clock()
    return CoreShare(stat, clock=clock, own=lambda: 0.0), stat, clock


def test_a_neighbour_on_one_core_leaves_one_thread(tmp_path, monkeypatch):
    share, stat, clock = _share(tmp_path, monkeypatch)
    clock.now += 0.5
    # cpu7 is not this process's: a neighbour there takes nothing of its cores
    _stat(stat, {0: 10.5, 1: 10.0, 7: 10.5})
    assert share.others() == pytest.approx(1.0)  # 0.5 s busy in a 0.5 s window


def test_threads_are_the_cores_the_others_leave(tmp_path, monkeypatch):
    share, stat, clock = _share(tmp_path, monkeypatch)
    clock.now += 0.4
    _stat(stat, {0: 10.4, 1: 10.0, 7: 10.0})
    assert share.threads(2) == 1
    clock.now += 0.4  # the neighbour is gone: both cores again
    assert share.threads(2) == 2
    clock.now += 0.4
    _stat(stat, {0: 10.8, 1: 10.4, 7: 10.0})  # both cores taken: still one thread, never none
    assert share.threads(2) == 1
    clock.now += 0.4
    _stat(stat, {0: 11.2, 1: 10.4, 7: 10.0})  # this process's own 0.4 s is not a neighbour's
    own = share._own
    share._own = lambda: own() + 0.4
    assert share.threads(2) == 2


def test_the_first_reading_waits_out_the_shortest_interval_and_later_short_ones_keep_the_threads(tmp_path, monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    stat = tmp_path / "stat"
    _stat(stat, {0: 10.0, 1: 10.0})
    share = CoreShare(stat)  # the system's clock: the first reading sleeps
    start = time.monotonic()
    assert share.threads(2) == 2
    assert time.monotonic() - start >= 0.15
    assert share.threads(2) is None  # right after: too short a window to tell


def test_no_proc_stat_keeps_the_threads(tmp_path, monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    share = CoreShare(tmp_path / "absent")
    assert share.threads(2) is None


class _Busy:
    """A neighbour that always holds one of two cores."""

    def threads(self, most: int) -> int:
        return 1


@pytest.mark.slow
def test_fewer_threads_compute_the_same_text_where_the_build_measures_them_alike(smol):
    capi = smol._llama_cpp
    diffs = smol.thread_invariance
    assert set(diffs) == {1}
    request = Request(messages=({"role": "user", "content": "Name three colours."},), max_tokens=24, thinking=False)
    smol._cores, smol._threads_now = None, smol.n_threads
    two = smol.complete(request).raw
    assert capi.llama_n_threads(smol.llm.ctx) == 2
    smol._cores = _Busy()
    smol.reset_context()
    one = smol.complete(request).raw
    # the build computes one thread as it computes two (measured), so the busy machine's call used one
    assert diffs[1] == 0.0 and capi.llama_n_threads(smol.llm.ctx) == 1
    assert one == two
    smol._cores, smol._threads_now = None, smol.n_threads
    capi.llama_set_n_threads(smol.llm.ctx, 2, 2)


@pytest.mark.slow
def test_thread_invariance_measures_from_an_empty_context(smol):
    tokens = smol.tokenize("The quick brown fox jumps over the lazy dog. " * 12)
    diffs = thread_invariance(smol.llm, smol._llama_cpp, tokens, 2)
    smol.reset_context()
    assert diffs == {1: 0.0}
    assert smol.llm.n_tokens == 0 and smol._llama_cpp.llama_n_threads(smol.llm.ctx) == 2


def test_a_build_that_computes_fewer_threads_otherwise_keeps_them():
    measured = []

    def invariance(diff):
        def measure():
            measured.append(diff)
            return {1: diff}
        return measure

    assert next_threads(_Busy(), 2, 2, invariance(1e-3)) == 2
    assert next_threads(_Busy(), 2, 2, invariance(0.0)) == 1
    assert next_threads(None, 2, 2, invariance(0.0)) == 2
    assert measured == [1e-3, 0.0]  # measured only where fewer threads were wanted
