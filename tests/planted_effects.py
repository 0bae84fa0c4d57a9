"""Records and cells with effects planted in them (the factorial's effects, as chapter 07's design defines them),
shared by the tests of the factorial's statistics, chapter 07's reading and its end-to-end run."""

from __future__ import annotations

import numpy as np

from cpdagthink.analysis import factorial
from cpdagthink.method.design import Point
from cpdagthink.run.records import RunRecord

N = 600
BASE = 0.66
PLANTED = {"constraint": 5.0, "field_names": 0.0, "delivery": 0.0, "instruction": 4.0, "delivery x instruction": 6.0}
TYPED_OVER_LIGHT, LIGHT_OVER_FREE = 12.0, 4.0


def planted_probability(point: Point, planted: dict[str, float] = PLANTED) -> float:
    """The planted chance of a correct answer in a cell (main effects and interactions as factorial.effects
    defines them: the contrast of cell means, so a code of +-1 moves the cell by half the effect)."""
    if point.intermediate != "typed":
        light = planted_probability(factorial.MATCHED_TYPED, planted) - TYPED_OVER_LIGHT / 100
        return light if point.intermediate == "light_prose" else light - LIGHT_OVER_FREE / 100
    code = {f: 1 if point.paper_level(f) else -1 for f in ("constraint", "field_names", "delivery", "instruction")}
    shift = sum(planted[f] / 2 * code[f] for f in code)
    shift += planted["delivery x instruction"] / 2 * code["delivery"] * code["instruction"]
    return BASE + shift / 100


def _answers(points, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Correctness (cells x instances) and gold labels: each instance has one latent difficulty that every cell
    shares most of the time (so the cells are correlated, as paired answers are)."""
    rng = np.random.default_rng(seed)
    shared, labels = rng.random(N), rng.integers(0, 2, N)
    correct = np.array([np.where(rng.random(N) < 0.7, shared, rng.random(N)) < planted_probability(p) for p in points])
    return correct, labels


def planted_records(points, seed: int = 7) -> dict[Point, list[RunRecord]]:
    """The answers as the runner's records (an answer is YES where it is right about a positive or wrong
    about a negative)."""
    correct, labels = _answers(points, seed)
    return {point: [RunRecord(id=f"r{i}", content_sha256="x", condition=point.name, split="test", num_variables=5,
                              template="parent", gold_label=int(labels[i]), oracle_label=int(labels[i]),
                              answer="YES" if bool(labels[i]) == bool(correct[k][i]) else "NO") for i in range(N)]
            for k, point in enumerate(points)}


def planted_cells(points, seed: int) -> factorial.Cells:
    correct, labels = _answers(points, seed)
    truth = labels.astype(bool)
    return factorial.Cells(tuple(points), tuple(f"r{i}" for i in range(N)), correct, correct == truth, truth)
