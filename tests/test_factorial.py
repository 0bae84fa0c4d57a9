"""The factorial's statistics recover effects planted in hand-made records: each planted effect inside its paired
interval, and the null called a null."""

from __future__ import annotations

import pytest

from cpdagthink.analysis import factorial
from cpdagthink.method.design import NAMED, Point, design_points
from planted_effects import (BASE, LIGHT_OVER_FREE, PLANTED, TYPED_OVER_LIGHT, N, planted_cells, planted_probability,
                             planted_records)


def test_the_intervals_cover_the_planted_effects_about_as_often_as_they_claim():
    """Over 40 independent samples the 95% intervals hold each planted effect at least 85% of the time (the
    percentile bootstrap covers 93-97% here); the single-sample tests below rest on this."""
    points, hits = design_points(), dict.fromkeys(PLANTED, 0)
    for seed in range(40):
        found = {e.name: e for e in factorial.effects(planted_cells(points, 1000 + seed), resamples=400, seed=seed)}
        for name, planted in PLANTED.items():
            hits[name] += found[name].low <= planted <= found[name].high
    assert min(hits.values()) >= 34, hits


@pytest.fixture(scope="module")
def full():
    return factorial.Cells.of(planted_records(design_points()))


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
    assert abs(paper["accuracy"] - 100 * planted_probability(Point())) < 5


def test_the_half_fraction_aliases_interactions_in_pairs():
    cells = planted_cells(design_points(design="half"), seed=11)
    found = factorial.effects(cells)
    interactions = [e for e in found if e.kind == "interaction"]
    assert len(interactions) == 3 and all(e.aliases for e in interactions)
    named = {e.name: e for e in found}
    assert named["constraint"].low <= PLANTED["constraint"] <= named["constraint"].high
    aliased = next(e for e in interactions if "delivery x instruction" in (e.name, e.aliases))
    assert aliased.detected  # constraint x field_names = delivery x instruction: the planted 6 pp shows through


def test_a_row_one_cell_could_not_pose_leaves_every_cell():
    runs = planted_records([Point(), NAMED["no_constrained_decoding"]])
    runs[Point()][0] = runs[Point()][0].model_copy(update={"problem": "unsatisfiable premise"})
    cells = factorial.Cells.of(runs)
    assert len(cells.ids) == N - 1 and "r0" not in cells.ids


def test_interaction_means_average_the_other_factors(full):
    means = factorial.interaction_means(full, "delivery", "instruction")
    assert len(means) == 4
    both = means[(means["delivery"] == "tool result") & (means["instruction"] == "E.2 template")]["accuracy"].item()
    assert abs(both - 100 * (BASE + (PLANTED["constraint"] * 0 + 5.0) / 100)) < 4
