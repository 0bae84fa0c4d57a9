"""Runs made together on a backend that gathers them (:attr:`Backend.gathers_runs <cpdagthink.backends.base.Backend>`:
the openai backend in batch mode, where one call of ``complete_batch`` is one round of batch files and costs a
wait of up to a day, whatever its size): each run asks on a thread of its own, and its requests wait until every
run still going has asked too (or ended); then the calling thread sends them all as one call
(:meth:`Gathering.serve_while`). So a plan group in batch mode waits about one round per turn, not one per run
per turn.

A request two runs ask in one round (a probe's turn 1 is the unprobed run's) is sent once: the first run to ask
it pays for it and caches it, the other reads it as a cache hit, as it would have had the runs been made one
after the other. An error the call ends with reaches every run of the round (each with the completions of its
own requests that finished, which its cache keeps); ``Ctrl-C`` while the round waits stops every run as
interrupted, resumably.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

from ..backends.base import Backend, PartialBatchError, RequestRejected
from ..method.chat import Completion, Request

__all__ = ["Gathering", "Seat", "send_batch"]

# Seconds the serving thread waits for a round before it looks again whether any run is still going.
LOOK_S = 0.2

Answered = list[tuple[Completion, bool]]  # each request's completion, and whether another run's ask paid for it


def send_batch(backend: Backend, requests: Sequence[Request]) -> list[Completion]:
    """``backend.complete_batch(requests)``; one by one when the backend refuses the batch as a whole."""
    try:
        return backend.complete_batch(requests)
    except RequestRejected:
        return [backend.complete_or_rejected(r) for r in requests]


@dataclass
class _Ask:
    """One run's requests for a round (in its folder), and once the round is served, what it gets back."""

    folder: Path
    requests: Sequence[Request]
    keys: Sequence[str]
    answered: Answered | None = None
    error: BaseException | None = None


class Gathering:
    """The rounds of ``runs`` runs made together on ``backend`` (module docstring)."""

    def __init__(self, backend: Backend, runs: int):
        self.backend, self.active = backend, runs
        self._asks: list[_Ask] = []  # waiting for their round
        self._round: list[_Ask] = []  # in the round being served
        self._stopped = False
        self._changed = threading.Condition()

    def seat(self, folder: Path) -> "Seat":
        """Where the run of ``folder`` asks."""
        return Seat(self, Path(folder))

    def leave(self) -> None:
        """A run has ended, however: the rounds no longer wait for it."""
        with self._changed:
            self.active -= 1
            self._changed.notify_all()

    def ask(self, folder: Path, requests: Sequence[Request], keys: Sequence[str]) -> Answered:
        """On a run's thread: the completions of ``requests`` (cached under ``keys``) once the round holding them
        has been served; raises the error it ended with (:class:`PartialBatchError`, an interruption), carrying
        the completions of this run's own requests (``completions``, None where none came)."""
        ask = _Ask(Path(folder), requests, keys)
        with self._changed:
            if self._stopped:
                raise KeyboardInterrupt("interrupted by Ctrl-C")
            self._asks.append(ask)
            self._changed.notify_all()
            self._changed.wait_for(lambda: ask.answered is not None or ask.error is not None)
        if ask.error is not None:
            raise ask.error
        return ask.answered  # type: ignore[return-value]

    def serve_while(self, going: Callable[[], bool]) -> None:
        """On the calling thread, while ``going()``: each round, once every run still going has asked."""
        while going():
            with self._changed:
                ready = self._changed.wait_for(lambda: self._asks and len(self._asks) >= self.active, LOOK_S)
                if ready:
                    self._round, self._asks = self._asks, []
            if ready:
                self._serve(self._round)

    def _serve(self, asks: list[_Ask]) -> None:
        """One round: every request asked once, in one call (:func:`send_batch`), its answers handed to each
        run that asked; an interruption is raised here too, once each run has its own."""
        union: dict[str, Request] = {}
        payer: dict[str, _Ask] = {}
        for ask in asks:
            for key, request in zip(ask.keys, ask.requests):
                union.setdefault(key, request)
                payer.setdefault(key, ask)
        try:
            self.backend.attach_runs({ask.folder: ask.requests for ask in asks})
            answers = dict(zip(union, send_batch(self.backend, list(union.values()))))
        except BaseException as error:  # noqa: BLE001 - handed to every run of the round
            finished = dict(zip(union, getattr(error, "completions", None) or ()))
            self._hand_out(asks, lambda ask: _failed(error, [finished.get(k) if payer[k] is ask else None
                                                             for k in ask.keys]))
            if not isinstance(error, Exception):
                raise
            return
        with self._changed:
            for ask in asks:
                ask.answered = [(answers[k], payer[k] is not ask) for k in ask.keys]
            self._changed.notify_all()

    def _hand_out(self, asks: list[_Ask], error: Callable[[_Ask], BaseException]) -> None:
        with self._changed:
            for ask in asks:
                ask.error = error(ask)
            self._changed.notify_all()

    def stop(self) -> None:
        """``Ctrl-C``: every run waiting for a round (the one being served included, where the interruption came
        before its answers were handed out), and every one that asks from now on, is interrupted."""
        with self._changed:
            self._stopped = True
            waiting = self._asks + [a for a in self._round if a.answered is None and a.error is None]
            self._asks = []
        self._hand_out(waiting, lambda ask: _failed(KeyboardInterrupt("interrupted by Ctrl-C"), []))


def _failed(error: BaseException, completions: list[Completion | None]) -> BaseException:
    """The error one run of a round raises: a stopped batch or an interruption with the completions of its own
    requests (which its cache keeps), any other error as it is."""
    if isinstance(error, PartialBatchError):
        return PartialBatchError(error, completions)
    if isinstance(error, KeyboardInterrupt):
        stopped = KeyboardInterrupt(*error.args)
        stopped.completions = completions  # type: ignore[attr-defined]
        return stopped
    return error


@dataclass(frozen=True)
class Seat:
    """One run's place in a :class:`Gathering`: where its cached backend sends the requests it lacks."""

    gathering: Gathering
    folder: Path

    def ask(self, requests: Sequence[Request], keys: Sequence[str]) -> Answered:
        """:meth:`Gathering.ask` for this run."""
        return self.gathering.ask(self.folder, requests, keys)
