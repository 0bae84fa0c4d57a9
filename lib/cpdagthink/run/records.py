"""The typed run record: one :class:`RunRecord` per finished instance, one JSON line each in ``records.jsonl``,
a :class:`RunSummary` beside it, and the run's :class:`RunMetadata` (``metadata.json``).

Every reader loads these models; the definitions that decide a number live here once: what the
prediction is, when an answer is unparsed, rejected or cut off, which object turn 1 emitted and which
object turn 2 was shown.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any, Iterable, Literal

from pydantic import BaseModel, ConfigDict, ValidationInfo, computed_field, model_validator

from ..method.schema import CausalAnalysis

SCHEMA_VERSION = 2


def json_sha256(data: Any) -> str:
    """The digest records store of JSON data (messages, requests, instance lists): sha256 of its sorted-key JSON."""
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()


class ToolCallRecord(BaseModel):
    """A tool call as the model emitted it (arguments are the raw JSON text)."""

    name: str
    arguments: str


class TurnRecord(BaseModel):
    """One model call of an instance: what came back, from where, at what cost."""

    messages_sha256: str
    request_sha256: str
    raw: str = ""
    text: str = ""
    reasoning: str | None = None
    tool_calls: list[ToolCallRecord] = []
    finish_reason: str | None = None
    cache_hit: bool = False
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    meta: dict[str, Any] = {}

    @computed_field
    @property
    def rejected(self) -> str | None:
        """The service's own message when it refused this request (HTTP 400, context too long); else None."""
        return self.meta.get("rejected")

    @computed_field
    @property
    def cut_off(self) -> bool:
        """The call stopped at its token budget (its answer may be missing for that)."""
        return self.finish_reason == "length"


class InterventionRecord(BaseModel):
    """What a turn-2 probe did. The note is for the record only: the model never sees it."""

    name: str | None = None
    note: str = ""
    include_premise: bool = True
    analysis: CausalAnalysis | None = None  # the object shown in turn 2 in place of the emitted one


class RepairRecord(BaseModel):
    """A repair round (``structured_repair``): the validator's findings about turn 1's graph, sent back once, and
    the object the model emitted in reply (the one turn 2 shows when it parses; turn 1's otherwise). A valid graph
    has no findings and gets no round (``sent`` false)."""

    findings: list[str] = []
    sent: bool = False
    analysis: CausalAnalysis | None = None  # the corrected object as parsed
    error: str | None = None  # why the reply's object could not be parsed


class RunRecord(BaseModel):
    """One finished instance of one run."""

    model_config = ConfigDict(extra="ignore")  # computed fields come back on load and are recomputed

    schema_version: int = SCHEMA_VERSION
    id: str
    content_sha256: str  # the instance's content: a record is only reused for the very same row
    condition: str
    split: str
    num_variables: int
    template: str
    gold_label: int
    oracle_label: int | None  # the exact oracle's label (None: no DAG satisfies the premise, or its text is unreadable)
    prompt_sha256: dict[str, str] = {}
    turns: list[TurnRecord] = []
    tool_flow: bool = False  # turn 1 was the CausalAnalysis tool call
    emitted: CausalAnalysis | None = None  # turn 1's object as parsed (schema types only; consistency is the audit's)
    emitted_error: str | None = None  # why turn 1's object could not be parsed (tool flows)
    intervention: InterventionRecord | None = None
    repair: RepairRecord | None = None  # the repair round, for a condition that has one
    answer: Literal["YES", "NO"] | None = None  # the final turn's parsed answer
    problem: str | None = None  # the instance could not be posed (premise unparsable or unsatisfiable)

    @computed_field
    @property
    def rejected(self) -> bool:
        """Some call of this instance was refused by the service: no answer, and not the model's fault."""
        return any(t.rejected for t in self.turns)

    @computed_field
    @property
    def unparsed(self) -> bool:
        """The model answered, but not with a readable YES or NO."""
        return self.answer is None and not self.rejected and self.problem is None

    @computed_field
    @property
    def cut_off(self) -> bool:
        """Some turn stopped at its token budget."""
        return any(t.cut_off for t in self.turns)

    @computed_field
    @property
    def prediction(self) -> int | None:
        """1 for YES, 0 for NO, None without an answer (unparsed, rejected or not posed). Scoring counts a
        missing answer as not-YES and reports how many there were."""
        return None if self.answer is None else int(self.answer == "YES")

    @property
    def says_yes(self) -> bool:
        """The prediction as scored: only a YES is a positive; a missing answer counts as NO (and is counted)."""
        return self.answer == "YES"

    @property
    def shown(self) -> CausalAnalysis | None:
        """The object turn 2 saw: a probe's replacement if one ran, else turn 1's object."""
        if self.intervention is not None and self.intervention.name is not None:
            return self.intervention.analysis
        return self.emitted

    @property
    def last_text(self) -> str:
        """The final turn's visible text (the answer turn)."""
        return self.turns[-1].text if self.turns else ""


class RunSummary(BaseModel):
    """Written next to ``records.jsonl`` at the end of every session of a run (finished, stopped or failed).

    The counts describe the folder: every record it holds, whichever session wrote it. ``asked`` and
    ``asked_records`` describe this session's request (a rerun on a subset asks for fewer rows than the
    folder holds). ``message`` says why a run that did not finish stopped.
    """

    records: int  # every record in the folder
    answered: int
    unparsed: int
    rejected: int
    cut_off: int
    problems: int
    asked: int  # instances this session asked for
    asked_records: int  # of those, how many have a record after this session
    model_calls: int  # calls this session really made (cache misses)
    cache_hits: int
    wall_clock_s: float
    status: Literal["finished", "incomplete", "interrupted", "stopped", "aborted", "error"]  # stopped: by the budget
    message: str | None = None
    # The asked instances this session left without a record because a request failed every attempt, each with
    # the last error: the next session asks exactly these again (a summary written before it existed: none).
    not_answered: dict[str, str] = {}

    @classmethod
    def of(cls, folder: list["RecordMark"], asked: int, asked_records: int, *, model_calls: int, cache_hits: int,
           wall_clock_s: float, status: str | None = None, message: str | None = None,
           not_answered: dict[str, str] | None = None) -> "RunSummary":
        """The summary of a folder holding records marked ``folder`` after a session that asked for ``asked``
        instances and has records for ``asked_records`` of them; ``status`` None: finished or incomplete."""
        return cls(
            records=len(folder),
            answered=sum(m.answered for m in folder),
            unparsed=sum(m.unparsed for m in folder),
            rejected=sum(m.rejected for m in folder),
            cut_off=sum(m.cut_off for m in folder),
            problems=sum(m.problem for m in folder),
            asked=asked,
            asked_records=asked_records,
            model_calls=model_calls,
            cache_hits=cache_hits,
            wall_clock_s=round(wall_clock_s, 3),
            status=status or ("finished" if asked_records >= asked else "incomplete"),
            message=message,
            not_answered=not_answered or {},
        )


@dataclass(frozen=True)
class RecordMark:
    """What a session counts of one record for its summary and metadata, kept in the record's place: a record
    carries its turns' text, and a session of the paper's grid holds tens of thousands (the records themselves
    are on disk, read back when a caller asks for them)."""

    answered: bool
    unparsed: bool
    rejected: bool
    cut_off: bool
    problem: bool
    served: tuple[str, ...]  # the snapshots the API reported serving its turns
    batched: int  # its answered calls that came through batch files

    @classmethod
    def of(cls, record: RunRecord) -> "RecordMark":
        return cls(answered=record.answer is not None, unparsed=record.unparsed, rejected=record.rejected,
                   cut_off=record.cut_off, problem=record.problem is not None, served=tuple(served_models([record])),
                   batched=batched_calls([record]))


class Spent(BaseModel):
    """What a run's fresh model calls were billed, over all its sessions (``metadata.json``'s ``spent``): the
    tokens the service reported (a call that reported none at its worst case), and, where prices were given
    (dollars per million tokens), their cost and the run's ``max_cost``."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    calls: int = 0
    price_input: float | None = None
    price_output: float | None = None
    cost: float | None = None
    max_cost: float | None = None


class GitRevision(BaseModel):
    """The code a run ran: its git commit, and whether tracked files differed from it (``dirty``)."""

    commit: str
    dirty: bool


class Hardware(BaseModel):
    """What a run ran on: each GPU's model (empty: none visible), else the CPU and its cores."""

    gpus: list[str]
    cpu: str | None
    cpu_cores: int | None


def _former_metadata(data: dict[str, Any], config: dict[str, Any] | None) -> dict[str, Any]:
    """A ``metadata.json`` of the format without ``run``, upgraded: the run's identity made of the condition,
    probe and decoding it records and the backend, model and computed options of the ``config.json`` beside it
    (without one: the backend its identity names, no model, no options); and the backend's identity without the
    endpoints that format named in it (``base_urls``: transport, never identity)."""
    from ..method.decoding import Decoding
    from .spec import run_identity

    backend = {k: v for k, v in (data.get("backend") or {}).items() if k != "base_urls"}
    config = config or {}
    run = run_identity(data.get("condition") or {}, data.get("intervention"),
                       config.get("backend", backend.get("backend")), config.get("model"),
                       config.get("backend_options") or {}, Decoding.model_validate(data.get("decoding") or {}))
    return {**data, "run": run, "backend": backend}


class RunMetadata(BaseModel):
    """``metadata.json``: what a run is (``run``, its :meth:`~cpdagthink.run.spec.RunSpec.identity`, and
    ``backend``, what computed it: together what must match to resume it) and what it ran with, as the paper's
    App. J lists: decoding, model and tokenizer revisions, the API and the snapshots it served, package versions
    and hardware. A file of the format without ``run`` is upgraded as it is read (pass the folder's
    ``config.json`` as ``context={"config": ...}``; :func:`cpdagthink.run.runfolder.read_metadata` does)."""

    record_schema: int
    run: dict[str, Any]  # the run's identity (condition with its prompt hashes, probe, backend, model, options, decoding)
    backend: dict[str, Any]  # the backend's identity: what computes (the cache key's model part)
    thinking_supported: bool | None = None  # the model has a thinking mode (pages read it here, not from a backend)
    instances: int
    instances_sha256: str
    sources: list[str]
    seed: int
    model_revision: str | None  # resolved commit hash, or sha256 of the weights file
    tokenizer_revision: str | None
    model_package: str | None  # a local model's pip package(s), ``name==version``
    api: str | None  # the API a service was called through, and where
    served_models: list[str] = []  # the snapshots the API reported serving (each response's ``model``)
    served_weights: str | None = None  # the weights the server said it serves under the model's name
    git: GitRevision | None  # the code's commit and whether tracked files differed from it
    packages: dict[str, str]
    python: str
    hardware: Hardware
    started_at: str
    finished_at: str | None = None
    status: str | None = None
    message: str | None = None  # why a run ended early (an error, an interruption)
    wall_clock_s: float | None = None
    model_calls_this_session: int | None = None
    batched_calls: int | None = None  # the folder's answered calls that came through batch files (half price)
    spent: Spent | None = None  # the tokens (and price) the run's fresh calls were billed, over all its sessions

    @model_validator(mode="before")
    @classmethod
    def _upgrade(cls, data: Any, info: ValidationInfo) -> Any:
        if isinstance(data, dict) and "run" not in data:
            return _former_metadata(data, (info.context or {}).get("config"))
        return data

    @computed_field
    @property
    def condition(self) -> dict[str, Any]:
        """The condition as run, its prompt files' hashes included."""
        return self.run["condition"]

    @computed_field
    @property
    def intervention(self) -> str | None:
        """The turn-2 probe, if one ran."""
        return self.run["probe"]

    @computed_field
    @property
    def decoding(self) -> dict[str, Any]:
        return self.run["decoding"]

    def identity(self) -> dict[str, Any]:
        """What a resumed session must match: the run's identity and the identity of what computes it."""
        return {"run": self.run, "backend": self.backend}


def batched_calls(records: Iterable[RunRecord]) -> int:
    """How many of the records' answered calls came through batch files (a turn's ``meta["batch"]``, its batch's
    id): the calls a cost table prices at the batch price."""
    return sum(1 for r in records for t in r.turns if t.meta.get("batch") and not t.rejected)


def served_models(records: Iterable[RunRecord]) -> list[str]:
    """The snapshots the API reported serving the records' turns (each response's ``model``), sorted."""
    return sorted({t.meta["served_model"] for r in records for t in r.turns if t.meta.get("served_model")})
