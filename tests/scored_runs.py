"""Scored records and a grid of them (baseline and structured, two seeds, ten rows), shared by the tests of the
tables, the figures, the presentation and the readings."""

from __future__ import annotations

from analyses import run_record
from cpdagthink.run.records import RunRecord, TurnRecord


def record(i: int, gold: int, pred: int | None, n_vars: int = 5, finish: str = "stop") -> RunRecord:
    """A scored record: ``pred`` None is an answer that could not be read."""
    turn = TurnRecord(messages_sha256="", request_sha256="", finish_reason=finish, prompt_tokens=10,
                      completion_tokens=5, latency_s=1.0)
    answer = None if pred is None else ("YES" if pred else "NO")
    return run_record(f"r{i}", answer=answer, gold_label=gold, oracle_label=gold, num_variables=n_vars, turns=[turn])


GOLD = [1, 1, 1, 1, 0, 0, 0, 0, 1, 0]
VARS = [3, 3, 4, 4, 4, 5, 5, 5, 5, 5]
BASE = {0: [0, 1, 0, 1, 0, 1, 0, 0, 0, 0], 1: [1, 1, 0, 0, 0, 0, 1, 0, 0, 0]}
TARGET = {0: [1, 1, 1, 1, 0, 0, 0, 0, 1, 0], 1: [1, 1, 1, None, 0, 0, 0, 1, 1, 0]}


def two_seed_grid() -> dict[tuple[str, int], list[RunRecord]]:
    """Baseline and structured runs on the same ten records, two seeds."""
    grid = {}
    for seed in (0, 1):
        grid[("baseline_enhanced", seed)] = [record(i, g, p, v) for i, (g, p, v) in enumerate(zip(GOLD, BASE[seed], VARS))]
        grid[("structured", seed)] = [record(i, g, p, v) for i, (g, p, v) in enumerate(zip(GOLD, TARGET[seed], VARS))]
    return grid
