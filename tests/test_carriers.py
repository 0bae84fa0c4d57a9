"""Chapter 07's reading: a verdict per factor in words, the paper's removal beside each, and a page that says
when the design did not run."""

from __future__ import annotations

import math

from cpdagthink.analysis import factorial
from cpdagthink.book.components import Cost
from cpdagthink.book.readings import carriers
from cpdagthink.method.design import design_points
from planted_effects import PLANTED, planted_cells


def _effect(estimate, low, high, name="constraint"):
    return factorial.Effect(name, "main", estimate, low, high, 100)


def test_verdicts_in_words():
    assert carriers.verdict_words(_effect(5.0, 2.0, 8.0)) == "carries +5.0 pp [+2.0, +8.0]"
    assert carriers.verdict_words(_effect(-5.0, -8.0, -2.0)) == "costs -5.0 pp [-8.0, -2.0]"
    assert carriers.verdict_words(_effect(0.5, -2.0, 3.0)) == \
        "no effect detectable at this n: the interval is [-2.0, +3.0]"
    assert carriers.verdict_words(_effect(0.0, 0.0, 0.0)) == \
        "no difference: the cells compared answered every instance alike"


def test_the_verdict_table_names_the_papers_removal_and_this_runs_own():
    cells = planted_cells(design_points(), seed=7)
    effects = factorial.effects(cells, resamples=500)
    table = carriers.verdict_table(effects, cells, {"typed.regex.paper.tool.e2": "refused for a reason"},
                                   resamples=500).set_index("factor")
    assert table.loc["constraint", "verdict"].startswith("carries")
    assert table.loc["field_names", "verdict"].startswith("no effect detectable")
    assert "no_constrained_decoding" in table.loc["constraint", "the paper's removal"]
    assert table.loc["constraint", "this run's removal"].startswith("removal alone")
    assert "twoturn_prose_pc" in table.loc["typed (the paper's point) vs free prose", "the paper's removal"]
    assert table.loc["typed.regex.paper.tool.e2", "verdict"] == "not applied on this backend: refused for a reason"
    assert "delivery x instruction" not in table.index  # interactions are in the effects table, not verdicts


def test_a_reading_that_ran_quotes_the_regex_effect_beside_the_papers_removal():
    cells = planted_cells(design_points(), seed=7)
    effects = factorial.effects(cells, resamples=500)
    reading = carriers.components_reading(cells, effects, {}, carriers.design_phrase(
        design_points(), "full", Cost(18, 18 * 600, 18 * 1200, 1), 600), "cpdagthink book --only 07", design_points())
    regex = next(e for e in effects if e.name == "constraint")
    assert reading.headline.value == regex.estimate and reading.headline.paper_key == "ablation_no_constrained_drop"
    assert abs(reading.numbers["regex_effect"] - PLANTED["constraint"]) < 3
    assert set(reading.tables) == {"design_cells", "cells", "effects", "verdicts"}
    assert all(len(t.columns) <= 9 for t in reading.tables.values())  # the book's tables fit its page
    figure = carriers.interaction_figure(cells)
    assert len(figure.axes) == 6


def test_a_design_that_did_not_run_says_so_with_its_cost_and_command():
    phrase = carriers.design_phrase(design_points(design="half"), "half", Cost(11, 44, 92, 9000), 4)
    text = str(phrase)
    assert "8 typed cells (the half fraction" in text and "2 prose arms" in text and "at most 92 model calls" in text
    refused = {"structured": "no regex here"}
    reading = carriers.components_reading(None, [], refused, phrase, "cpdagthink book --only 07 -p run_design=true",
                                          design_points(design="half"))
    design = reading.tables["design_cells"].set_index("cell")
    assert len(design) == 10 and design.loc["structured", "on this backend"] == "refused: no regex here"
    assert design.loc["typed.regex.paper.user.bare", "delivery"] == "user message"
    # the status says why and how to run it; "did not run" is the verdict's, said once on the page
    assert "holds no complete records" in str(reading.phrases["status"]) and \
        "run_design=true" in str(reading.phrases["status"])
    assert math.isnan(reading.headline.value) and "did not run" in reading.headline.verdict()
