"""The repair round of ``structured_repair``, between a run's two turns: each graph the certified validator finds
fault with goes back once with its findings, and the object the model emits in reply is what turn 2 shows.

Only the validator's findings about the emitted graph go back (:func:`conditions.repair_findings`): never the
answer, the premise's facts or the reference CPDAG. No symbolic solver answers anything.
"""

from __future__ import annotations

from typing import Callable, Sequence

from ..causal.instance import Instance
from ..method.chat import Completion, Request
from ..method.conditions import Condition, Emitted, read_emitted, repair_findings, repair_request
from ..method.decoding import Decoding
from .records import RepairRecord

Batch = Callable[[list[Request]], list[tuple[Completion, bool]]]  # what the cached backend's complete_batch is


def repair_round(condition: Condition, decoding: Decoding, batch: Batch, instances: Sequence[Instance],
                 turns: list[list[tuple[Request, Completion, bool]]], emitted: Sequence[Emitted | None]
                 ) -> tuple[dict[int, RepairRecord], list[Emitted | None]]:
    """Run the round for every posed instance (``turns[k]`` holds its turn 1, to which the round's call is
    appended): each object that did not parse or that the validator faults goes back once; a valid one, or a
    turn 1 the service refused, gets none. Returns each instance's record of the round (by position) and the
    objects turn 2 shows: the reply's where it parses, turn 1's otherwise. A condition without a round gets none."""
    if not condition.repair:
        return {}, list(emitted)
    findings = {k: repair_findings(instances[k], e) for k, e in enumerate(emitted)
                if e is not None and "rejected" not in turns[k][0][1].meta}
    going = [k for k, found in findings.items() if found]
    requests = [repair_request(condition, instances[k], decoding, turns[k][0][1], emitted[k], findings[k])
                for k in going]
    shown, repairs = list(emitted), {k: RepairRecord(findings=f) for k, f in findings.items()}
    for k, request, result in zip(going, requests, batch(requests)):
        turns[k].append((request, *result))
        corrected = read_emitted(result[0], condition.field_names)
        repairs[k] = RepairRecord(findings=findings[k], sent=True, analysis=corrected.analysis, error=corrected.error)
        if corrected.analysis is not None:
            shown[k] = corrected
    return repairs, shown
