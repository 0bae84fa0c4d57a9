"""A request exactly as the runner would build it, for a reader to inspect (``cpdagthink prompt``).

Turn 2 needs turn 1's output, so asking for turn 2 runs turn 1 through the backend first (through the run
cache when one is given, so a finished run's turn 2 is rebuilt without a model call); a probe is then
applied with the runner's own per-instance random stream (:func:`cpdagthink.method.conditions.intervene`), so the
printed request is the one a probed run sent.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..backends.base import Backend
from ..errors import CpdagthinkError
from ..causal.instance import Instance
from ..method.chat import Completion, Request, ToolCall
from ..method.conditions import (Condition, Flow, Turn2Input, first_request, get_condition, intervene, read_emitted,
                         second_request)
from ..method.decoding import Decoding
from ..method.interventions import get_probe
from .cache import CallCache
from .records import RunRecord, TurnRecord, json_sha256
from .runner import CachedBackend


@dataclass(frozen=True)
class Inspected:
    """The request of one turn, and, for a probed turn 2, what the probe did (the run record's note)."""

    request: Request
    probe: str | None = None
    given: Turn2Input | None = None
    # Rebuilt from a record: the request's digest equals the one recorded (None: not checked, or not checkable)
    as_recorded: bool | None = None

    def to_json(self) -> dict[str, Any]:
        """The request as sent (messages, tools, tool choice, constraint, decoding), then the probe apart:
        its note is in the record, never in the messages."""
        out = self.request.to_json()
        if self.probe is not None:
            out["probe"] = {"name": self.probe, "note": self.given.note if self.given else None,
                            "include_premise": self.given.include_premise if self.given else True}
        return out


def inspect_request(condition: Condition, backend: Backend, instance: Instance, turn: int, *,
                    decoding: Decoding = Decoding(), probe: str | None = None,
                    cache_dir: str | Path | None = None) -> Inspected:
    """The request of turn ``turn`` (1 or 2) of ``condition`` on ``instance``, optionally under ``probe``."""
    if turn not in (1, 2):
        raise ValueError(f"turn must be 1 or 2, got {turn}")
    if turn == 2 and condition.flow is Flow.ONE_TURN:
        raise ValueError(f"{condition.name!r} is a one-turn condition: it has no turn 2")
    if probe is not None and (turn == 1 or condition.flow is not Flow.TOOL):
        raise ValueError("a probe changes turn 2 of a tool condition (e.g. structured) only")
    first = first_request(condition, instance, decoding)
    if turn == 1:
        return Inspected(first)
    return second_turn(condition, instance, decoding, _complete(backend, first, cache_dir), probe)


def second_turn(condition: Condition, instance: Instance, decoding: Decoding, turn1: Completion,
                probe: str | None) -> Inspected:
    """Turn 2 as the runner builds it from ``turn1``'s answer, under ``probe`` with the runner's own draw."""
    emitted = read_emitted(turn1, condition.field_names)
    given = intervene(get_probe(probe) if probe is not None else None, instance, emitted.analysis, decoding.seed)
    return Inspected(second_request(condition, instance, decoding, turn1, given, emitted), probe, given)


def recorded_requests(record: RunRecord, instance: Instance, decoding: Decoding) -> list[Inspected]:
    """The request of each of a finished record's turns, built as :func:`inspect_request` builds them but
    from the record's own turn-1 output (no model call). ``decoding`` is the run's; each result says whether
    its digest equals the one the runner recorded (False: the record was made under other settings). A turn 2
    after a Responses API turn 1 carried the service's reasoning items, which records never keep: rebuilt
    without them it cannot match, so a differing digest there is None (not checkable), not False."""
    condition = get_condition(record.condition)
    probe = record.intervention.name if record.intervention is not None else None
    built = [Inspected(first_request(condition, instance, decoding))]
    if len(record.turns) > 1:
        built.append(second_turn(condition, instance, decoding, _completion(record.turns[0]), probe))
    carried = record.turns[0].meta.get("api") == "responses"  # its reasoning items went into turn 2 unrecorded
    return [replace(b, as_recorded=True if json_sha256(b.request.to_json()) == t.request_sha256
                    else None if k == 1 and carried else False)
            for k, (b, t) in enumerate(zip(built, record.turns))]


def _completion(turn: TurnRecord) -> Completion:
    return Completion(text=turn.text, tool_calls=[ToolCall(c.name, c.arguments) for c in turn.tool_calls],
                      reasoning=turn.reasoning, raw=turn.raw, finish_reason=turn.finish_reason, meta=dict(turn.meta))


def _complete(backend: Backend, request: Request, cache_dir: str | Path | None) -> Completion:
    if cache_dir is None:
        return backend.complete(request)
    return CachedBackend(backend, CallCache(cache_dir)).complete_batch([request])[0][0]


class NotRecordedError(CpdagthinkError, ValueError):
    """A recorded request cannot be printed as it was sent (no such row or turn, or other settings made it)."""


def recorded_request(folder: str | Path, row: int, turn: int = 1) -> Inspected:
    """Turn ``turn`` of the ``row``-th instance (0-based, in the run's sample order) of the run in ``folder``,
    rebuilt with that run's own settings (its ``config.json``: condition, probe, decoding and budgets, seed) from
    its record, no model call: what :func:`inspect_request` prints, and the very request the run sent (its digest
    equals the recorded ``request_sha256``; anything else is refused, never printed as if it were sent)."""
    from .config import RunConfig
    from .runfolder import CONFIG, read_json, read_records

    data = read_json(Path(folder) / CONFIG)
    if data is None:
        raise NotRecordedError(f"{folder} holds no {CONFIG}: not a run folder")
    config = RunConfig.model_validate(data)
    instances = config.instances()
    if not 0 <= row < len(instances):
        raise NotRecordedError(f"--row {row} is outside the run's rows 0..{len(instances) - 1}")
    instance = instances[row]
    record = next((r for r in read_records(folder) if r.id == instance.id), None)
    if record is None or not record.turns:
        raise NotRecordedError(f"row {row} ({instance.id}) has no recorded request in {folder}"
                               + (f": {record.problem}" if record is not None and record.problem else ""))
    if not 1 <= turn <= len(record.turns):
        raise NotRecordedError(f"row {row} of {folder} recorded {len(record.turns)} turn(s); there is no turn {turn}")
    inspected = recorded_requests(record, instance, config.decoding)[turn - 1]
    if inspected.as_recorded is not True:
        raise NotRecordedError(f"turn {turn} of row {row} rebuilt from {folder} is not the request recorded "
                               + ("(its reasoning items are never kept)" if inspected.as_recorded is None
                                  else "(the run was made by another version's prompts)"))
    return inspected
