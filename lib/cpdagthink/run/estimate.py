"""What a run will still ask of its model, before it runs: the calls, their requests' size and budgets, and what
earlier runs of the same model measured per call (``cpdagthink plan`` and ``reproduce --dry-run`` price it).

The calls are counted as the runner makes them (:func:`cpdagthink.run.runner.pose` decides which rows are
posed; a one-turn condition makes one call per posed row, the others two), less what is already done: the
records the run folder holds, and the calls the call cache answers (turn 1, and turn 2 where turn 1 is cached
and rebuilds it). The cache is keyed by the identity of what computes; a backend that must load its model to
know it (vLLM, llama.cpp) is not built here: the identity comes from a run folder of the same backend and model
(its ``metadata.json``), and where none has one the cache is not consulted, which the estimate says. Calls of
one plan's runs that send the same request are counted once (the later run finds it cached); a turn 2 whose
turn 1 is not answered yet cannot be compared so, so a probe that leaves a graph as it was makes the count an
upper bound by that call.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from statistics import fmean
from typing import Any, Sequence

from ..causal.instance import Instance
from ..method.chat import Request
from ..method.conditions import Flow, get_condition
from .cache import CallCache
from .config import RunConfig
from .inspection import second_turn
from .records import RunMetadata
from .runfolder import METADATA, read_metadata, read_records
from .runner import pose

CHARS_PER_TOKEN = 4  # an English prompt with JSON tools, where no model tokenizer has counted one


@dataclass(frozen=True)
class Measured:
    """Means per call of earlier runs of the same backend and model, by turn (index 0: turn 1): prompt and
    completion tokens as the model's own tokenizer counted them (its records), and seconds per call (fresh
    calls only), with the folders they were read from."""

    prompt: tuple[float | None, float | None] = (None, None)
    completion: tuple[float | None, float | None] = (None, None)
    latency_s: float | None = None
    folders: tuple[str, ...] = ()


@dataclass
class Pending:
    """The calls a run still makes and what they cost in tokens; ``counted_by`` says how the prompt tokens were
    counted, ``cache`` how the call cache was consulted."""

    rows: int
    done: int = 0
    calls_by_turn: list[int] = field(default_factory=lambda: [0, 0])
    cached: int = 0
    prompt_chars_by_turn: list[int] = field(default_factory=lambda: [0, 0])
    second_unbuilt: int = 0  # turn-2 calls whose request needs turn 1's answer first: their size is estimated
    first_chars_mean: float = 0.0  # of the turn-1 requests of every posed row, cached or not
    ceiling: int = 0
    cache: str = "not consulted"

    @property
    def calls(self) -> int:
        return sum(self.calls_by_turn)


def _request_chars(request: Request) -> int:
    """The characters a request sends: its messages' text and its tools' schema."""
    return sum(len(str(m.get("content") or "")) for m in request.messages) + len(json.dumps(list(request.tools)))


def _same_model(metadata: RunMetadata, config: RunConfig) -> bool:
    return metadata.run.get("backend") == config.backend and metadata.run.get("model") == config.model


def earlier_runs(config: RunConfig) -> list[tuple[Path, RunMetadata]]:
    """Run folders under the run's ``out_root`` made by the same backend and model, with their metadata."""
    found = []
    for path in sorted(Path(config.out_root).glob(f"*/{METADATA}")):
        try:
            metadata = read_metadata(path.parent)
        except ValueError:
            continue  # a broken folder measures nothing
        if metadata is not None and _same_model(metadata, config):
            found.append((path.parent, metadata))
    return found


def measured(config: RunConfig, earlier: Sequence[tuple[Path, RunMetadata]]) -> Measured:
    """The means of the earlier runs of the same condition (any seed, probe or sample), fresh calls only for the
    latency; empty where none has a record."""
    prompt: list[list[int]] = [[], []]
    completion: list[list[int]] = [[], []]
    latency: list[float] = []
    folders = []
    for folder, metadata in earlier:
        if metadata.condition.get("name") != config.condition:
            continue
        records = read_records(folder)
        for record in records:
            for k, turn in enumerate(record.turns[:2]):
                prompt[k] += [turn.prompt_tokens] if turn.prompt_tokens else []
                completion[k] += [turn.completion_tokens] if turn.completion_tokens else []
                latency += [turn.latency_s] if not turn.cache_hit and turn.latency_s else []
        folders += [folder.name] if records else []

    def mean(values: list[Any]) -> float | None:
        return fmean(values) if values else None

    return Measured((mean(prompt[0]), mean(prompt[1])), (mean(completion[0]), mean(completion[1])), mean(latency),
                    tuple(folders))


def _identity(config: RunConfig, earlier: Sequence[tuple[Path, RunMetadata]]) -> tuple[dict[str, Any], bool] | None:
    """The identity the call cache is keyed by, and whether the model has a thinking mode: the backend's own
    where building it loads nothing (``Backend.builds_cheaply``), else one recorded by a run folder of the same
    backend and model; None where none records it."""
    from ..backends import backend_class, make_backend

    if backend_class(config.backend).builds_cheaply:
        try:
            backend = make_backend(config.backend, **config.backend_arguments())
        except Exception:  # noqa: BLE001 - e.g. no key in the environment yet: the cache is read another way
            backend = None
        if backend is not None:
            try:
                return backend.identity(), backend.thinking_supported
            finally:
                backend.close()
    for _, metadata in earlier:
        if metadata.thinking_supported is not None:
            return metadata.backend, metadata.thinking_supported
    return None


def pending(config: RunConfig, instances: Sequence[Instance], folder: str | Path,
            earlier: Sequence[tuple[Path, RunMetadata]] = (), planned: set[str] | None = None) -> Pending:
    """The calls the run ``config`` on ``instances`` into ``folder`` still makes, as the runner would make them.
    ``planned``: the keys of the calls runs planned before this one make (updated here): a request one of them
    sends is answered by the cache by the time this run asks it (probes of one run share its turn 1)."""
    recorded = {r.id for r in read_records(folder)} if Path(folder, "records.jsonl").is_file() else set()
    keyed = _identity(config, earlier)
    cache = CallCache(config.cache_dir) if keyed and Path(config.cache_dir).is_dir() else None
    counter = _Counter(config, keyed, cache, set() if planned is None else planned)
    result = Pending(rows=len(instances), cache="consulted" if cache else "empty" if not Path(config.cache_dir).is_dir()
                     else "not consulted: no run of this model records its identity")
    posed_chars: list[int] = []
    for instance in instances:
        if instance.id in recorded:
            result.done += 1
            continue
        posed = pose(counter.condition, instance, config.decoding)
        if not isinstance(posed, str):  # a row not posed makes no call
            posed_chars.append(_request_chars(posed[0]))
            counter.count(instance, posed[0], result)
    result.first_chars_mean = fmean(posed_chars) if posed_chars else 0.0
    return result


@dataclass
class _Counter:
    """Counts one run's calls of a posed row into a :class:`Pending`: cached, planned by an earlier run, or made."""

    config: RunConfig
    keyed: tuple[dict[str, Any], bool] | None
    cache: CallCache | None
    planned: set[str]

    def __post_init__(self) -> None:
        self.condition = get_condition(self.config.condition)
        self.two = self.condition.flow is not Flow.ONE_TURN
        # what computes, as far as it is known: one backend and model of the plan (its group)
        self.group = {"group": self.config.spec.group, **(self.keyed[0] if self.keyed else {})}

    def known(self, request: Request) -> Any:
        """The cached answer of ``request``, True where a run planned before sends it, else None."""
        hit = _cached(self.cache, self.keyed, request)
        return hit if hit is not None else (True if _planned(self.planned, self.group, self.keyed, request) else None)

    def count(self, instance: Instance, first: Request, result: Pending) -> None:
        budget = self.config.decoding.max_tokens_answer
        hit = self.known(first)
        result.calls_by_turn[0] += hit is None
        result.prompt_chars_by_turn[0] += 0 if hit else _request_chars(first)
        result.ceiling += 0 if hit else first.max_tokens
        result.cached += hit is not None
        if not self.two:
            return
        # turn 2 is built on turn 1's answer: where it is not known yet (planned or to make), it is a call
        answer = hit if hit is not None and hit is not True else None
        second = second_turn(self.condition, instance, self.config.decoding, answer, self.config.probe).request \
            if answer is not None else None
        hit2 = self.known(second) if second is not None else None
        result.calls_by_turn[1] += hit2 is None
        result.prompt_chars_by_turn[1] += 0 if hit2 is not None or second is None else _request_chars(second)
        result.second_unbuilt += second is None
        result.ceiling += 0 if hit2 is not None else budget
        result.cached += hit2 is not None


def _planned(planned: set[str], group: dict[str, Any], keyed: tuple[dict[str, Any], bool] | None,
             request: Request) -> bool:
    """Whether a run planned before sends ``request`` to the same model (then the cache answers it here); notes
    it as planned otherwise. A model known to have no thinking switch gets one request for both settings."""
    thinking = keyed[1] if keyed else True
    key = (request if thinking else replace(request, thinking=False)).cache_key(group)
    if key in planned:
        return True
    planned.add(key)
    return False


def _cached(cache: CallCache | None, keyed: tuple[dict[str, Any], bool] | None, request: Request) -> Any:
    """The cached completion of ``request``, keyed as :class:`cpdagthink.run.runner.CachedBackend` keys it."""
    if cache is None or keyed is None:
        return None
    identity, thinking = keyed
    return cache.get((request if thinking else replace(request, thinking=False)).cache_key(identity))
