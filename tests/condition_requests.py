"""Every request today's conditions build, hashed: the golden file ``tests/golden/condition_requests.json`` was
written by this module on main before conditions became points of a design (``python tests/condition_requests.py
CSV --write``), so ``tests/test_design.py`` proves their requests unchanged, byte for byte.

For each condition, a few real rows and four decodings (the default, the tool forced by name, the generic regex,
thinking off), it builds turn 1, and turn 2 after each kind of turn-1 answer (a parsed tool call, a tool call that
does not parse, no tool call; prose text for a prose flow) and after a probe that drops the premise; each request
is recorded by the sha256 of its ``to_json()`` and its cache key under a fixed backend identity.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any

from cpdagthink.causal.instance import Instance
from cpdagthink.causal.oracle import analyse_premise
from cpdagthink.method.chat import Completion, Request, ToolCall
from cpdagthink.method.conditions import (CONDITIONS, Flow, Turn2Input, first_request, get_condition,
                                          second_request)
from cpdagthink.method.decoding import Decoding
from cpdagthink.method.schema import TOOL_NAME, CausalAnalysis
from cpdagthink.run.data import read_csv

GOLDEN = Path(__file__).parent / "golden" / "condition_requests.json"
ROWS = (6, 60, 400, 1000)  # row indices of the test split: 3, 4, 5 and 6 variables
DECODINGS = {"default": {}, "forced": {"tool_choice": "forced"}, "generic": {"narrow_regex": False},
             "no_thinking": {"thinking": False}}
IDENTITY = {"backend": "golden", "model": "m"}
# The budgets the golden hashes were pinned with (Decoding's defaults then; now the book's 512/128).
BUDGETS = {"max_tokens_turn1": 1024, "max_tokens_answer": 512}


def _digest(request: Request) -> str:
    return hashlib.sha256(json.dumps(request.to_json(), sort_keys=True).encode()).hexdigest()


def _turn1_answers(instance: Instance, flow: Flow) -> dict[str, Completion]:
    if flow is Flow.PROSE:
        return {"prose": Completion(text="The skeleton is A - B; nothing is directed.")}
    reference = CausalAnalysis.from_cpdag(analyse_premise(instance.premise).cpdag).model_dump_json()
    return {"parsed": Completion(text="", tool_calls=[ToolCall(TOOL_NAME, reference)]),
            "unparsed": Completion(text="", tool_calls=[ToolCall(TOOL_NAME, '{"variables": [')]),
            "no_call": Completion(text="I think the answer is yes.")}


def condition_requests(name: str, instance: Instance, decoding: Decoding) -> dict[str, Request]:
    """Turn 1 and every turn 2 of ``name`` on ``instance``, by a short label."""
    condition = get_condition(name)
    built = {"turn1": first_request(condition, instance, decoding)}
    if condition.flow is Flow.ONE_TURN:
        return built
    for label, answer in _turn1_answers(instance, condition.flow).items():
        built[f"turn2:{label}"] = second_request(condition, instance, decoding, answer)
    if condition.flow is Flow.TOOL:
        parsed = _turn1_answers(instance, condition.flow)["parsed"]
        given = Turn2Input(CausalAnalysis.model_validate_json(parsed.tool_calls[0].arguments), include_premise=False)
        built["turn2:probed"] = second_request(condition, instance, decoding, parsed, given)
    return built


def hashes(instances: list[Instance], names: list[str]) -> dict[str, Any]:
    """``{condition: {row id: {decoding: {request label: [sha256 of to_json, cache key]}}}}``."""
    found: dict[str, Any] = {}
    for name in names:
        for instance in instances:
            for label, settings in DECODINGS.items():
                built = condition_requests(name, instance, Decoding(**BUDGETS, **settings))
                found.setdefault(name, {}).setdefault(instance.id, {})[label] = {
                    k: [_digest(r), r.cache_key(IDENTITY)] for k, r in built.items()}
    return found


def rows(csv: Path) -> list[Instance]:
    every = read_csv(csv, split="test")
    return [every[i] for i in ROWS]


if __name__ == "__main__":
    table = hashes(rows(Path(sys.argv[1])), list(CONDITIONS))
    if "--write" in sys.argv:
        GOLDEN.write_text(json.dumps(table, indent=1, sort_keys=True) + "\n")
    print(sum(len(d) for c in table.values() for r in c.values() for d in r.values()), "requests")
