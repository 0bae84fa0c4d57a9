"""Several configured runs made together on one backend (:func:`run_configs`): at once where the backend streams
requests, so that they draw on one pool of its ``max_concurrency`` slots and no slot idles while any of them has
work (:mod:`.streaming`); at once where it gathers runs (batch files), so that each turn's requests of every run
go in one round (:mod:`.gathering`); one after the other on a backend that computes whole batches."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from ..backends.base import Backend
from ..causal.instance import Instance
from ..method.conditions import Intervention
from .config import RunConfig
from .gathering import Gathering
from .runner import RunResult, run_config
from .streaming import Tally

__all__ = ["Planned", "run_configs"]


@dataclass(frozen=True)
class Planned:
    """One run of several made together (:func:`run_configs`): its config, its rows, its folder (None: the one
    ``config`` names) and the probe function (None: the one ``config`` names)."""

    config: RunConfig
    instances: Sequence[Instance]
    out: str | Path | None = None
    intervention: Intervention | None = None


def run_configs(runs: Sequence[Planned], backend: Backend, *, progress: bool = True) -> list[RunResult]:
    """Several configured runs on one backend (:func:`run_config` each), their results in order. On a backend
    that streams requests they run at once, drawing on one pool of its ``max_concurrency`` slots (so no slot idles
    while any run has work) under one progress line of instances and calls, and the first error of any is raised
    once every run has ended (each run's folder says how it ended); on one that gathers runs, likewise, each
    turn's requests of them all sent as one call (:class:`.Gathering`, served on the calling thread); otherwise
    one after the other, stopping at the first error. Ctrl-C stops every run, each resumable."""
    if not (backend.streams_requests or backend.gathers_runs) or len(runs) < 2:
        return [run_config(r.config, backend, r.instances, r.out, intervention=r.intervention, progress=progress)
                for r in runs]
    # A run asked twice (two readings of one chapter need it) is made once: two sessions of one folder at once
    # would find it locked by the other.
    folders = [Path(r.out) if r.out is not None else r.config.folder(list(r.instances)) for r in runs]
    maker = {folder: k for k, folder in reversed(list(enumerate(folders)))}  # each folder's first run
    made = _at_once({k: runs[k] for k in sorted(maker.values())}, backend, progress)
    outcomes = [made[maker[folder]] for folder in folders]
    failed = next((o for o in outcomes if isinstance(o, BaseException)), None)
    if failed is not None:
        raise failed
    return outcomes  # type: ignore[return-value]


def _at_once(runs: dict[int, Planned], backend: Backend, progress: bool) -> dict[int, RunResult | BaseException]:
    """Each of ``runs`` on a thread of its own, over one :class:`Tally` (and on a backend that gathers runs, one
    :class:`Gathering` whose rounds this thread serves): its result or the error it ended with."""
    tally = Tally(f"{len(runs)} runs", progress)
    gathering = Gathering(backend, len(runs)) if backend.gathers_runs else None
    outcomes: dict[int, RunResult | BaseException] = {}

    def work(k: int) -> None:
        r = runs[k]
        try:
            outcomes[k] = run_config(r.config, backend, r.instances, r.out, intervention=r.intervention, tally=tally,
                                     gathering=gathering)
        except BaseException as error:  # noqa: BLE001 - raised on the caller's thread
            outcomes[k] = error
        finally:
            if gathering is not None:
                gathering.leave()

    threads = [threading.Thread(target=work, args=(k,), daemon=True, name=f"run-{k}") for k in runs]
    try:
        for thread in threads:
            thread.start()
        if gathering is not None:  # here, so that Ctrl-C reaches the round it waits for
            gathering.serve_while(lambda: any(thread.is_alive() for thread in threads))
        for thread in threads:
            while thread.is_alive():
                thread.join(timeout=0.2)  # in short steps, so Ctrl-C reaches this thread at once
    except KeyboardInterrupt:
        tally.stop.set()  # every run stops as interrupted, writing its summary
        if gathering is not None:
            gathering.stop()
        for thread in threads:
            thread.join()
        raise
    finally:
        tally.close()
    return outcomes
