"""Run a condition over instances: cached model calls, one typed record per finished instance, resumable.

On a backend that computes whole batches (an offline engine), work proceeds in chunks: turn 1 for the whole
chunk in one batched backend call, then turn 2, then the chunk's records are appended and flushed. On one that
serves one request at a time over the network (:attr:`Backend.streams_requests`), each instance goes through its
turns on its own and its record is appended the moment its last turn arrives (:mod:`.streaming`); a request that
fails every attempt leaves its instance unanswered (``summary.json``'s ``not_answered``) and the run goes on. A run killed midway restarts after its last written record; a
finished run re-run makes zero model calls because every call is content-addressed in the cache. The run
folder is locked while a run writes to it (:mod:`.runfolder`), and a record is only reused for the very
same row (its id and its content).
"""

from __future__ import annotations

import contextlib
import functools
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Iterable, Sequence

from ..backends.base import Backend, PartialBatchError
from ..causal.instance import Instance
from ..causal.oracle import OracleLabel, UnfaithfulFactsError, label_text
from ..causal.premise import PremiseError
from ..method.chat import Completion, Request
from ..method.conditions import (
    Condition,
    Emitted,
    Flow,
    Intervention,
    Turn2Input,
    first_request,
    get_condition,
    intervene,
    parse_answer,
    read_emitted,
    second_request,
)
from ..method.decoding import Decoding
from ..method.interventions import get_probe
from .cache import CallCache, former_identities
from .config import RunConfig
from .provenance import session_metadata
from .records import (InterventionRecord, RecordMark, RepairRecord, RunMetadata, RunRecord, RunSummary, Spent,
                      ToolCallRecord, TurnRecord, json_sha256)
from .gathering import Gathering, Seat, send_batch
from .repair import repair_round
from .resumable import RunMismatchError, check_resumable  # noqa: F401 - RunMismatchError: raised by run_config
from .runfolder import CONFIG, METADATA, SUMMARY, RunFolder, RunFolderError, read_metadata, read_records
from .budget import Spending
from .streaming import BudgetSpent, Health, RunAborted, Tally, ask_once, counting, lanes_for, stream

ABORT_AFTER_REJECTIONS = 5


@dataclass
class CachedBackend:
    """A backend behind the call cache; counts the calls it really made. ``one_by_one``: each missing request is
    asked alone on the calling thread (a streaming run's lane), once in the process however many runs ask it;
    ``seat``: the missing requests go with those of the runs made together (:mod:`.gathering`)."""

    backend: Backend
    cache: CallCache
    calls: int = 0
    one_by_one: bool = False
    spending: Spending | None = None  # the run's budget, checked before each fresh call is sent
    seat: Seat | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def complete_batch(self, requests: Sequence[Request]) -> list[tuple[Completion, bool]]:
        """Completions in order, each with ``cache_hit``; only misses reach the model, in one batch. When the
        batch stops on an error, every completion that finished is cached before the error is raised, so a
        rerun pays only for what was lost."""
        identity = self.backend.identity()
        if not self.backend.thinking_supported:
            # The switch cannot change what such a model sees: one request, one cache entry.
            requests = [replace(r, thinking=False) for r in requests]
        formers = former_identities(identity, getattr(self.backend, "base_urls", None))
        every = [r.cache_keys([identity, *formers]) for r in requests]  # each request's key, then its former ones
        keys, found = [k[0] for k in every], [self.cache.get(k[0], k[1:]) for k in every]
        hits = [c is not None for c in found]
        missing = [i for i, c in enumerate(found) if c is None]
        self.cache.require_writable(len(missing))
        if missing:
            fresh = self._ask([requests[i] for i in missing], [keys[i] for i in missing])
            for i, (completion, hit) in zip(missing, fresh):
                found[i], hits[i] = completion, hit
        return list(zip(found, hits))

    def _ask(self, requests: list[Request], keys: list[str]) -> list[tuple[Completion, bool]]:
        """Each request's completion, cached under its key as it comes, and whether it was read from the cache
        after all (another run in this process asked for it meanwhile): one by one (:attr:`one_by_one`), or in
        one batch (:meth:`_ask_batch`)."""
        if self.one_by_one:
            return [self._ask_alone(request, key) for request, key in zip(requests, keys)]
        return self._ask_batch(requests, keys)

    def _ask_alone(self, request: Request, key: str) -> tuple[Completion, bool]:
        """One request, asked once in the process (:func:`.streaming.ask_once`) and cached the moment it arrives."""
        def ask() -> Completion:
            with self._reserved([request]):
                completion = self.backend.complete_or_rejected(request)
                self._keep([key], [completion], [request])
            return completion

        return ask_once(self.cache.directory, key, lambda: self.cache.get(key), ask)

    def _ask_batch(self, requests: list[Request], keys: list[str]) -> list[tuple[Completion, bool]]:
        """The model's completions of ``requests`` in one batch (:func:`.gathering.send_batch`; with the other
        runs' where this run has a :attr:`seat`), each cached under its ``keys`` by the run that paid for it (a
        request another run of the round asked first comes back as a cache hit); when the batch stops on an
        error or is interrupted, what finished (the ``completions`` the error carries) is cached first."""
        with self._reserved(requests):
            try:
                fresh = (self.seat.ask(requests, keys) if self.seat is not None
                         else [(c, False) for c in send_batch(self.backend, requests)])
            # a batch that stopped on an error, or Ctrl-C (SIGTERM at a job's time limit) mid-batch
            except (PartialBatchError, KeyboardInterrupt) as stopped:
                self._keep(keys, getattr(stopped, "completions", ()), requests)
                raise
            self._keep(keys, [None if hit else completion for completion, hit in fresh], requests)
        return fresh

    def _reserved(self, requests: Sequence[Request]) -> Any:
        """The budget's hold on ``requests`` while they are sent (:meth:`Spending.reserve`; none without one)."""
        return self.spending.reserve(requests) if self.spending else contextlib.nullcontext()

    def _keep(self, keys: list[str], completions: Sequence[Completion | None], requests: Sequence[Request]) -> None:
        """Cache, count and pay for what the model answered to ``requests`` (None: no answer); a refusal is not
        cached, so a later run (e.g. with a longer context) asks again."""
        if self.spending:
            self.spending.paid(requests, completions)
        for key, completion in zip(keys, completions):
            if completion is None:
                continue
            with self._lock:
                self.calls += 1
            if "rejected" not in completion.meta:
                self.cache.put(key, completion)



def _turn_record(request: Request, completion: Completion, cache_hit: bool) -> TurnRecord:
    return TurnRecord(
        messages_sha256=json_sha256(list(request.messages)),
        request_sha256=json_sha256(request.to_json()),
        raw=completion.raw or completion.text,
        text=completion.text,
        reasoning=completion.reasoning,
        tool_calls=[ToolCallRecord(name=c.name, arguments=c.arguments) for c in completion.tool_calls],
        finish_reason=completion.finish_reason,
        cache_hit=cache_hit,
        prompt_tokens=completion.prompt_tokens,
        completion_tokens=completion.completion_tokens,
        latency_s=completion.latency_s,
        meta=completion.meta,
    )


def _oracle_verdict(instance: Instance) -> OracleLabel:
    """The oracle's verdict; a label of None where it has none: an unfaithful premise (with its problem), or text
    it cannot read (e.g. a hypothesis in a wording it does not know). A model needs no parse, so such a row is
    posed all the same and scored against its published label alone."""
    return _verdict_of(instance.text)


@functools.lru_cache(maxsize=8192)
def _verdict_of(text: str) -> OracleLabel:
    """:func:`_oracle_verdict` of a row's text, worked out once per process: every condition, seed and probe of
    a grid poses the same rows (the paper's grid: 39 runs of 1162)."""
    try:
        return label_text(text)
    except PremiseError:
        return OracleLabel(None)


def pose(condition: Condition, instance: Instance, decoding: Decoding) -> tuple[Request, int | None] | str:
    """Turn 1's request and the oracle's label, or why the row cannot be posed (no call; its record says why)."""
    try:
        request, verdict = first_request(condition, instance, decoding), _oracle_verdict(instance)
    except (PremiseError, UnfaithfulFactsError) as error:
        return f"{type(error).__name__}: {error}"
    return verdict.problem or (request, verdict.label)  # no DAG satisfies it: no label to score an answer against


@dataclass
class RunResult:
    """What a session made: its folder, the asked instances with a record when it ended (their ids, in the order
    asked), its calls and its summary."""

    out_dir: Path
    recorded: list[str]
    model_calls: int
    cache_hits: int
    summary: RunSummary

    @functools.cached_property
    def records(self) -> list[RunRecord]:
        """The records of :attr:`recorded`, read from the folder when first asked for (a session keeps only
        :class:`RecordMark` s, so the runs of a grid made at once hold no records meanwhile)."""
        found = {r.id: r for r in read_records(self.out_dir)}
        return [found[i] for i in self.recorded if i in found]


@dataclass
class _Progress:
    """A session's work on its folder: the records it holds, those it adds, and what it writes when it ends."""

    folder: RunFolder
    session: "_Session"
    metadata: RunMetadata
    instances: list[Instance]
    done: list[RunRecord]
    started: float

    def run(self, chunk_size: int, progress: bool, tally: "Tally | None" = None) -> RunResult:
        """Make the missing records (chunk by chunk, or each on its own on a streaming backend), counted on
        ``tally`` (shared by runs made together; None: a line of this run's own); whatever ends the session,
        write its summary."""
        with counting(tally, self.session.condition.name, progress) as bar:
            return self._run(chunk_size, bar)

    def _run(self, chunk_size: int, bar: "Tally") -> RunResult:
        in_folder, finished = self._marks()
        todo = [i for i in self.instances if i.id not in finished]
        bar.join(len(self.instances), len(finished), lambda: self.session.cached.calls)
        status, message, unanswered = None, None, {}
        try:
            with self.folder.appender() as append:
                unanswered = self._work(todo, chunk_size, self._keeper(append, bar, finished, in_folder), bar.stop)
            message = _unanswered_message(unanswered)
        except KeyboardInterrupt as stop:  # Ctrl-C, or SIGTERM as the command line raises it
            status, message = "interrupted", str(stop) or "interrupted by Ctrl-C"
            raise
        except RunAborted as error:  # a broken service, or the budget (resumable like an interruption: "stopped")
            status, message = "stopped" if isinstance(error, BudgetSpent) else "aborted", str(error)
            raise
        except Exception as error:  # a backend that timed out or ran out of retries, a full disk, ...
            status, message = "error", f"{type(error).__name__}: {error}"
            raise
        finally:
            result = self._end(in_folder, finished, status, message, unanswered)
        return result

    def _marks(self) -> tuple[dict[str, RecordMark], dict[str, RecordMark]]:
        """The marks of the records the folder holds (the summary describes the folder, whatever is asked) and of
        those of them asked; the records themselves are let go: a session holds none it has kept."""
        in_folder = {r.id: RecordMark.of(r) for r in self.done}
        wanted = {i.id for i in self.instances}
        self.done = []
        return in_folder, {i: mark for i, mark in in_folder.items() if i in wanted}

    def _keeper(self, append: Any, bar: "Tally", finished: dict[str, RecordMark],
                in_folder: dict[str, RecordMark]) -> Any:
        """What keeps each record as it comes: appended to the folder, entered in ``finished`` and ``in_folder``
        (so an error keeps, for the summary, every record made before it), counted on the bar with the calls
        made so far, and watched for a service that refuses everything."""
        def keep(record: RunRecord) -> None:
            append(record)
            finished[record.id] = in_folder[record.id] = RecordMark.of(record)
            bar.done()
            self.session.watch(record)

        return keep

    def _work(self, todo: list[Instance], chunk_size: int, keep: Any, stop: threading.Event) -> dict[str, str]:
        """Make the records of ``todo``, each on its own on a streaming backend, else chunk by chunk; the
        instances left unanswered, each with why. A stop by the budget says what was spent once the calls in flight
        have landed."""
        try:
            if self.session.cached.one_by_one:
                return self._stream(todo, keep, stop)
            self._make(todo, chunk_size, keep)
        except BudgetSpent as error:
            spending = self.session.cached.spending
            raise BudgetSpent(spending.stopped() if spending else str(error)) from None  # once the calls in flight landed
        return {}

    def _make(self, todo: list[Instance], chunk_size: int, keep: Any) -> None:
        """Make the records of ``todo`` chunk by chunk, keeping each (:meth:`_keeper`)."""
        for start in range(0, len(todo), chunk_size):
            for record in self.session.chunk(todo[start:start + chunk_size]):
                keep(record)

    def _stream(self, todo: list[Instance], keep: Any, stop: threading.Event) -> dict[str, str]:
        """Make the records of ``todo`` each on its own (:func:`.streaming.stream`), keeping each as its last
        turn arrives, until ``stop`` is set; the instances left unanswered, each with why."""
        backend = self.session.cached.backend
        return stream(todo, self.session.one, lanes_for(backend), Health(backend.fail_on_error), keep, stop)

    def _end(self, in_folder: dict[str, RecordMark], finished: dict[str, RecordMark], status: str | None,
             message: str | None, unanswered: dict[str, str]) -> RunResult:
        """Write the session's outcome: the summary of the folder, and the metadata finished."""
        recorded = [i.id for i in self.instances if i.id in finished]
        marks, held = [finished[i] for i in recorded], list(in_folder.values())
        summary = RunSummary.of(held, len(self.instances), len(marks), model_calls=self.session.cached.calls,
                                cache_hits=self.session.hits, wall_clock_s=time.time() - self.started, status=status,
                                message=message, not_answered=unanswered)
        spending = self.session.cached.spending
        metadata = self.metadata.model_copy(update={
            "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "status": summary.status,
            "message": summary.message, "wall_clock_s": summary.wall_clock_s,
            "model_calls_this_session": summary.model_calls,
            "served_models": sorted({name for mark in marks for name in mark.served}),
            "batched_calls": sum(mark.batched for mark in held), "spent": spending.spent() if spending else None})
        self.folder.write_json(METADATA, metadata)
        self.folder.write_json(SUMMARY, summary)
        return RunResult(self.folder.path, recorded, self.session.cached.calls, self.session.hits, summary)


def run_config(config: RunConfig, backend: Backend, instances: Iterable[Instance], out: str | Path | None = None, *,
               intervention: Intervention | None = None, progress: bool = True,
               abort_after: int = ABORT_AFTER_REJECTIONS, tally: Tally | None = None,
               gathering: Gathering | None = None) -> RunResult:
    """Run one configured run on ``instances`` with ``backend``: the one entry of every front door, and the only
    way to run. Its condition, probe (from :data:`~cpdagthink.method.interventions.PROBES`, unless
    ``intervention`` gives the function), decoding, cache and chunk size come from ``config``, which the folder
    keeps as ``config.json``, and the run is its :attr:`~RunConfig.spec`; ``out`` defaults to the folder
    ``config`` names (:meth:`RunConfig.folder`). One :class:`RunRecord` per instance is appended to
    ``records.jsonl``, ``metadata.json`` describes the run and ``summary.json`` its outcome. ``tally``: the
    progress line it shares with runs made at once (:func:`.together.run_configs`); ``gathering``: the rounds it
    sends its requests in with them, on a backend that gathers runs (:mod:`.gathering`).

    Raises :class:`RunMismatchError` for a folder of another run or other data, :class:`RunLockedError`
    while another run writes into the folder, and :class:`RunAborted` when the first ``abort_after``
    requests of this session were all refused by the service.
    """
    instances = list(instances)
    if intervention is None and config.probe is not None:
        intervention = get_probe(config.probe)
    if intervention is not None and config.probe is None:
        raise ValueError("an intervention needs its probe's name (config.probe), which every record carries")
    chunk_size = config.chunk_size or backend.preferred_chunk_size
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be at least 1, got {chunk_size}")
    folder = RunFolder(out or config.folder(instances))
    with folder.locked():
        done = folder.load_records()
        earlier = _earlier_spending(folder)
        started = time.time()
        metadata = session_metadata(config.spec.identity(), backend, instances, done, started)
        check_resumable(folder, metadata, done, instances)
        if any(r.rejected for r in done):  # a request the service refused is asked again
            done = [r for r in done if not r.rejected]
            folder.rewrite_records(done)
        folder.write_json(METADATA, metadata)
        folder.write_json(CONFIG, config)
        if gathering is None:  # a gathered round tells the backend the folders of its runs (Backend.attach_runs)
            backend.attach_run(folder.path)
        cached = CachedBackend(backend, CallCache(config.cache_dir), one_by_one=backend.streams_requests,
                               spending=Spending(config.budget(), earlier),
                               seat=gathering.seat(folder.path) if gathering else None)
        session = _Session(get_condition(config.condition), cached, config.decoding, intervention, config.probe,
                           abort_after)
        made = _Progress(folder, session, metadata, instances, done, started)
        del done  # held by the session until it has marked them
        return made.run(chunk_size, progress, tally)


def _earlier_spending(folder: RunFolder) -> Spent | None:
    """What the folder's earlier sessions spent, as its ``metadata.json`` records it (None: nothing recorded, or
    metadata this version cannot read: resuming refuses such a folder where it holds records)."""
    try:
        former = read_metadata(folder.path)
    except RunFolderError:
        return None
    return former.spent if former else None


def _unanswered_message(unanswered: dict[str, str]) -> str | None:
    """How a session that left instances unanswered ended (None: it left none)."""
    if not unanswered:
        return None
    first = next(iter(unanswered))
    return (f"finished with {len(unanswered)} instance{'s' if len(unanswered) != 1 else ''} not answered (every "
            f"attempt of a request failed; running it again asks exactly these). First: {first}: {unanswered[first]}")


@dataclass
class _Session:
    """One session of a run: builds each chunk's requests, calls the cached backend, makes the records."""

    condition: Condition
    cached: "CachedBackend"
    decoding: Decoding
    intervention: Intervention | None
    intervention_name: str | None
    abort_after: int
    hits: int = 0
    fresh_rejections: int = 0
    fresh_answers: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def _pose(self, chunk: list[Instance]) -> tuple[list[tuple[Instance, Request, int | None]], dict[str, str]]:
        """Each instance with its first request and oracle label, and why each other one cannot be posed."""
        posed, problems = [], {}
        for instance, found in ((i, pose(self.condition, i, self.decoding)) for i in chunk):
            if isinstance(found, str):
                problems[instance.id] = found
            else:
                posed.append((instance, *found))
        return posed, problems

    def chunk(self, chunk: list[Instance]) -> list[RunRecord]:
        """The records of ``chunk``: turn 1 of every posed instance in one batch, then turn 2 likewise."""
        posed, problems = self._pose(chunk)
        turns = [[(request, *result)] for (_, request, _), result
                 in zip(posed, self.cached.complete_batch([request for _, request, _ in posed]))]
        tool, names = self.condition.flow is Flow.TOOL, self.condition.field_names
        emitted = [read_emitted(t[0][1], names) if tool else None for t in turns]
        given = [self._intervene(inst, e) for (inst, _, _), e in zip(posed, emitted)]
        repairs, shown = repair_round(self.condition, self.decoding, self.cached.complete_batch, [p[0] for p in posed],
                                      turns, emitted)
        if self.condition.flow is not Flow.ONE_TURN:
            # A turn 1 the service refused has nothing to build on: its turn 2 is not sent, and the record says so
            # (a refusal is never cached, so noting it on the completion changes nothing stored).
            going = [k for k, t in enumerate(turns) if "rejected" not in t[0][1].meta]
            for k in set(range(len(turns))) - set(going):
                turns[k][0][1].meta["next_turn"] = "not sent: this turn was refused"
            second = [second_request(self.condition, posed[k][0], self.decoding, turns[k][0][1], given[k], shown[k])
                      for k in going]
            for k, request, result in zip(going, second, self.cached.complete_batch(second)):
                turns[k].append((request, *result))
        made = self._records(posed, turns, emitted, given, repairs)
        return [made[i.id] if i.id in made else self._problem(i, problems[i.id]) for i in chunk]

    def one(self, instance: Instance) -> RunRecord:
        """The record of one instance, its turns asked one after the other (a streaming run's lane)."""
        return self.chunk([instance])[0]

    def _records(self, posed: list, turns: list, emitted: list, given: list, repairs: dict) -> dict[str, RunRecord]:
        return {inst.id: self._record(inst, oracle, t, e, g, repairs.get(k))
                for k, ((inst, _, oracle), t, e, g) in enumerate(zip(posed, turns, emitted, given))}

    def _intervene(self, instance: Instance, emitted: Emitted | None) -> Turn2Input | None:
        return intervene(self.intervention, instance, emitted.analysis if emitted else None, self.decoding.seed)

    def _base(self, instance: Instance) -> dict[str, Any]:
        return {"id": instance.id, "content_sha256": instance.content_sha256, "condition": self.condition.name,
                "split": instance.split, "num_variables": instance.num_variables, "template": instance.template,
                "gold_label": instance.label, "prompt_sha256": self.condition.prompt_files()}

    def _record(self, instance: Instance, oracle: int | None, turns: list[tuple[Request, Completion, bool]],
                emitted: Emitted | None, given: Turn2Input | None, repair: RepairRecord | None = None) -> RunRecord:
        with self._lock:  # records of a streaming run are made on several lanes at once
            self.hits += sum(hit for _, _, hit in turns)
        return RunRecord(
            **self._base(instance),
            oracle_label=oracle,
            turns=[_turn_record(*t) for t in turns],
            tool_flow=emitted is not None,
            emitted=emitted.analysis if emitted else None,
            emitted_error=emitted.error if emitted else None,
            intervention=None if given is None else InterventionRecord(
                name=self.intervention_name, note=given.note, include_premise=given.include_premise,
                analysis=given.analysis),
            repair=repair,
            answer=parse_answer(turns[-1][1].text),
        )

    def _problem(self, instance: Instance, problem: str) -> RunRecord:
        return RunRecord(**self._base(instance), oracle_label=None, problem=problem)

    def watch(self, record: RunRecord) -> None:
        """Stop the run when the service refused every one of its first ``abort_after`` fresh requests."""
        fresh = [t for t in record.turns if not t.cache_hit]
        if not fresh:
            return
        if record.rejected:
            self.fresh_rejections += 1
        else:
            self.fresh_answers += 1
        if self.abort_after and not self.fresh_answers and self.fresh_rejections >= self.abort_after:
            first = next(t.rejected for t in record.turns if t.rejected)
            raise RunAborted(f"the service refused each of the first {self.fresh_rejections} requests of this run; "
                             f"stopping instead of paying for the rest. Its message: {first}")
