"""The factorial's statistics recover effects planted in hand-made records: each planted effect inside its paired
interval, and the null called a null."""

from __future__ import annotations

import numpy as np
import pytest

from cpdagthink.analysis import factorial
from cpdagthink.method.design import NAMED, Point, design_points
from cpdagthink.run.records import RunRecord

N = 600
BASE = 0.66
PLANTED = {"constraint": 5.0, "field_names": 0.0, "delivery": 0.0, "instruction": 4.0, "delivery x instruction": 6.0}
TYPED_OVER_LIGHT, LIGHT_OVER_FREE = 12.0, 4.0


def _probability(point: Point, planted: dict[str, float] = PLANTED) -> float:
    """The planted chance of a correct answer in a cell (main effects and interactions as factorial.effects
    defines them: the contrast of cell means, so a code of +-1 moves the cell by half the effect)."""
    if point.intermediate != "typed":
        light = _probability(factorial.MATCHED_TYPED, planted) - TYPED_OVER_LIGHT / 100
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
    correct = np.array([np.where(rng.random(N) < 0.7, shared, rng.random(N)) < _probability(p) for p in points])
    return correct, labels


def _records(points, seed: int = 7) -> dict[Point, list[RunRecord]]:
    """The answers as the runner's records (an answer is YES where it is right about a positive or wrong
    about a negative)."""
    correct, labels = _answers(points, seed)
    return {point: [RunRecord(id=f"r{i}", content_sha256="x", condition=point.name, split="test", num_variables=5,
                              template="parent", gold_label=int(labels[i]), oracle_label=int(labels[i]),
                              answer="YES" if bool(labels[i]) == bool(correct[k][i]) else "NO") for i in range(N)]
            for k, point in enumerate(points)}


def _cells(points, seed: int) -> factorial.Cells:
    correct, labels = _answers(points, seed)
    truth = labels.astype(bool)
    return factorial.Cells(tuple(points), tuple(f"r{i}" for i in range(N)), correct, correct == truth, truth)


def test_the_intervals_cover_the_planted_effects_about_as_often_as_they_claim():
    """Over 40 independent samples the 95% intervals hold each planted effect at least 85% of the time (the
    percentile bootstrap covers 93-97% here); the single-sample tests below rest on this."""
    points, hits = design_points(), dict.fromkeys(PLANTED, 0)
    for seed in range(40):
        found = {e.name: e for e in factorial.effects(_cells(points, 1000 + seed), resamples=400, seed=seed)}
        for name, planted in PLANTED.items():
            hits[name] += found[name].low <= planted <= found[name].high
    assert min(hits.values()) >= 34, hits


@pytest.fixture(scope="module")
def full():
    return factorial.Cells.of(_records(design_points()))


def test_planted_effects_fall_inside_their_intervals_and_the_null_is_a_null(full):
    found = {e.name: e for e in factorial.effects(full)}
    for name, planted in PLANTED.items():
        assert found[name].low <= planted <= found[name].high, (name, found[name])
    assert found["constraint"].detected and found["instruction"].detected
    assert found["delivery x instruction"].detected and found["delivery x instruction"].kind == "interaction"
    assert not found["field_names"].detected and not found["delivery"].detected
    typed = found["typed vs lightly structured prose"]
    assert typed.low <= TYPED_OVER_LIGHT <= typed.high and typed.detected
    assert found["lightly structured vs free prose"].low <= LIGHT_OVER_FREE <= found["lightly structured vs free prose"].high
    assert all(e.n == N for e in found.values())


def test_the_cell_table_scores_each_cell_on_the_same_instances(full):
    table = factorial.cell_table(full, resamples=500)
    assert len(table) == 18 and len(table.columns) == 7
    paper = table.set_index("cell").loc["structured"]
    assert paper["F1 low"] <= paper["F1 (YES)"] <= paper["F1 high"]
    assert abs(paper["accuracy"] - 100 * _probability(Point())) < 5


def test_the_half_fraction_aliases_interactions_in_pairs():
    cells = _cells(design_points(design="half"), seed=11)
    found = factorial.effects(cells)
    interactions = [e for e in found if e.kind == "interaction"]
    assert len(interactions) == 3 and all(e.aliases for e in interactions)
    named = {e.name: e for e in found}
    assert named["constraint"].low <= PLANTED["constraint"] <= named["constraint"].high
    aliased = next(e for e in interactions if "delivery x instruction" in (e.name, e.aliases))
    assert aliased.detected  # constraint x field_names = delivery x instruction: the planted 6 pp shows through


def test_a_row_one_cell_could_not_pose_leaves_every_cell():
    runs = _records([Point(), NAMED["no_constrained_decoding"]])
    runs[Point()][0] = runs[Point()][0].model_copy(update={"problem": "unsatisfiable premise"})
    cells = factorial.Cells.of(runs)
    assert len(cells.ids) == N - 1 and "r0" not in cells.ids


def test_interaction_means_average_the_other_factors(full):
    means = factorial.interaction_means(full, "delivery", "instruction")
    assert len(means) == 4
    both = means[(means["delivery"] == "tool result") & (means["instruction"] == "E.2 template")]["accuracy"].item()
    assert abs(both - 100 * (BASE + (PLANTED["constraint"] * 0 + 5.0) / 100)) < 4
