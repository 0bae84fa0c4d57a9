"""Chapter readings: the numbers the prose quotes come from the tables, and the generated sentences read right."""

from __future__ import annotations

import dataclasses
import math
import re
from ast import literal_eval

import nbformat
import pandas as pd
import pytest

from cpdagthink.analysis import tables
from cpdagthink.analysis.markup import Markdown, code, strong
from cpdagthink.analysis.metrics import OmittedGroup
from cpdagthink.book import presentation, readings
from cpdagthink.book.chapters import NOTEBOOKS
from cpdagthink.causal.instance import Instance

from scored_runs import GOLD, two_seed_grid


def instances(labels):
    return [Instance(id=f"r{i}", premise="", hypothesis="", label=g, num_variables=5, template="t", split="test",
                     source="test") for i, g in enumerate(labels)]


@pytest.fixture()
def grid():
    return two_seed_grid()


def paired_rows(*rows):
    return pd.DataFrame([{"comparison": "structured vs baseline_enhanced", "seed": s,
                          "gain (pp)": g, "CI low": lo, "CI high": hi, "McNemar p": p} for s, g, lo, hi, p in rows])


def test_signed_never_prints_negative_zero():
    assert [readings.signed(v) for v in (1.26, -0.04, 0.0, -3.0)] == ["+1.3", "+0.0", "+0.0", "-3.0"]
    assert readings.signed(math.nan) == "n/a"


def test_verdict_counts_seeds_by_their_own_intervals():
    one = paired_rows((0, 2.0, -10.0, 15.0, 0.4))  # 25 pp wide: wider than the paper's +13.35
    assert readings.verdict(one, "structured vs baseline_enhanced") == (
        "On its 1 seed the interval contains zero: this run cannot separate the two conditions.")
    mixed = paired_rows((0, 8.0, 1.0, 15.0, 0.01), (1, 3.0, -2.0, 9.0, 0.3), (2, 9.0, 2.0, 16.0, 0.02))
    assert readings.verdict(mixed, "structured vs baseline_enhanced") == (
        "By their own intervals, 2 of 3 seeds favour Structured Thinking.")
    text = readings.per_seed_gains(mixed, "structured vs baseline_enhanced")
    assert text.startswith("seed 0: +8.0 pp (95% CI [+1.0, +15.0], McNemar p = 0.01); seed 1:")


def test_main_reading_averages_gains_and_keeps_each_seeds_interval(grid):
    scores = tables.scores_frame(grid)
    paired = tables.paired_frame(grid, "structured", ["baseline_enhanced"], n_resamples=300)
    reading = readings.main_results(scores, paired, instances(GOLD), [0, 1])
    assert reading.numbers["gain_mean"] == pytest.approx(paired["gain (pp)"].mean())
    assert reading.numbers["gain_sd"] == pytest.approx(paired["gain (pp)"].std(ddof=1))
    assert reading.numbers["f1_structured"] == pytest.approx(tables.seed_frame(scores).set_index("condition")
                                                             .loc["structured", "F1 mean"])
    for _, row in paired.iterrows():  # each seed's own interval and p appear, none averaged
        assert f"[{readings.signed(row['CI low'])}, {readings.signed(row['CI high'])}]" in reading.phrases["seed_gains"]
    assert not any(k.startswith(("ci_", "p_")) for k in reading.numbers)
    assert reading.phrases["sample_positives"] == "5 gold positives" and reading.phrases["seed_count"] == "2 seeds"
    assert reading.numbers["paper_main_f1_structured"] == 86.36
    summary = reading.tables["summary_table"]
    assert summary.loc["singleturn_structured", "paper Qwen3.6-27B"] == 74.53
    assert summary.loc["baseline_enhanced", "paper Qwen3.6-27B"] == 75.92
    assert math.isnan(summary.loc["singleturn_structured", readings.PRIMARY_SEED])


def test_table_1_compares_seed_0_with_the_primary_seed_and_the_mean_with_three_seeds(grid):
    """Like with like: seed 0 beside 86.36 / 73.01, the mean ± sd over seeds beside 85.57 ± 1.70 / 77.49 ± 4.07."""
    scores = tables.scores_frame(grid)
    gold = scores[scores["labels"] == "gold"].set_index(["condition", "seed"])["F1"]
    paired = tables.paired_frame(grid, "structured", ["baseline_enhanced"], n_resamples=100)
    summary = readings.main_results(scores, paired, instances(GOLD), [0, 1]).tables["summary_table"]
    assert list(summary.columns) == ["this run, seed 0", readings.PRIMARY_SEED, "paper Qwen3.6-27B",
                                     "this run, mean of 2 seeds", "sd", readings.THREE_SEEDS, "paper sd"]
    for condition in ("structured", "baseline_enhanced"):
        assert summary.loc[condition, "this run, seed 0"] == pytest.approx(gold[(condition, 0)])
        assert summary.loc[condition, "this run, mean of 2 seeds"] == pytest.approx(
            (gold[(condition, 0)] + gold[(condition, 1)]) / 2)
    assert gold[("structured", 0)] != gold[("structured", 1)]  # the two comparisons differ on this grid
    assert (summary.loc["structured", readings.PRIMARY_SEED], summary.loc["baseline_enhanced", readings.PRIMARY_SEED]) == (86.36, 73.01)
    assert tuple(summary.loc["structured", [readings.THREE_SEEDS, "paper sd"]]) == (85.57, 1.70)
    assert tuple(summary.loc["baseline_enhanced", [readings.THREE_SEEDS, "paper sd"]]) == (77.49, 4.07)
    later = readings.main_results(scores, paired, instances(GOLD), [1, 0]).tables["summary_table"]
    assert later.loc["structured", "this run, seed 1"] == pytest.approx(gold[("structured", 1)])


def test_single_seed_reading_says_there_is_no_spread(grid):
    one = {k: v for k, v in grid.items() if k[1] == 0}
    reading = readings.main_results(tables.scores_frame(one), tables.paired_frame(one, "structured",
                                    ["baseline_enhanced"], n_resamples=100), instances(GOLD), [0])
    assert reading.phrases["seed_spread"] == "a single seed, so no spread across seeds"
    summary = reading.tables["summary_table"]  # one seed: nothing to set beside the paper's three-seed mean
    assert list(summary.columns) == ["this run, seed 0", readings.PRIMARY_SEED, "paper Qwen3.6-27B"]
    assert reading.phrases["seed_count"] == "1 seed"


def test_budget_note_names_what_was_lost(grid):
    scores = tables.scores_frame(grid)
    assert "structured: 0 of 20 answers cut off by the token budget, 1 without a parsable answer" in \
        readings.budget_note(scores)
    clean = tables.scores_frame({("structured", 0): grid[("structured", 0)]})
    assert readings.budget_note(clean).startswith("No answer was cut off")


def test_omission_sentence_states_both_rules_and_what_each_omitted():
    three = OmittedGroup(group=3, n=6, positives=1, reason="")
    four = OmittedGroup(group=4, n=8, positives=2, reason="")
    six = OmittedGroup(group=6, n=2, positives=0, reason="")
    text = readings.omission_sentence([three, four, six], [5], 3)
    assert text == ("Bins follow the paper's rule (§4.3: bins with fewer than 5 variables are omitted) and, as a second "
                    "condition, need at least 3 gold positives. F1 and the paired gain are scored for n = 5; omitted by "
                    "the paper's rule: n = 3 (1 gold positive in 6 instances); n = 4 (2 gold positives in 8 instances); "
                    "omitted for fewer than 3 gold positives: n = 6 (0 gold positives in 2 instances).")
    assert readings.omission_sentence([], [5], 3).endswith("no bin of this sample is omitted.")


def test_bin_gain_table_puts_the_papers_id_and_ood_gains_beside_each_bin():
    gains = pd.DataFrame([{"seed": 0, "variables": n, "n": 10, "positives": 4, "gain (pp)": 1.0, "CI low": -20.0,
                           "CI high": 30.0} for n in (5, 6)])
    table = readings.bin_gain_table({"test": gains, "generated:paraphrase": gains})
    assert list(table["paper gain (pp)"]) == [5.3, 18.6, 5.9, 13.6]
    headline = readings.bin_headline(table, 3)
    assert headline.paper_key == "gain_n6_id" and headline.figure == "the gain at n = 6 on test"
    assert headline.verdict().startswith("This build cannot tell the direction: the gain at n = 6 on test is +1.0 pp "
                                         "(95% CI [-20.0, +30.0]), an interval that contains zero and is 50.0 pp wide")
    empty = readings.bin_headline(readings.bin_gain_table({"test": gains.iloc[:0]}), 3)
    assert "no bin of this sample is scored" in empty.verdict()


def test_headline_verdict_answers_the_direction_from_an_interval_that_excludes_zero_whatever_its_width():
    wide = readings.Headline("the gain", "main_delta", 10.0, -20.0, 40.0)
    assert wide.verdict() == ("This build cannot tell the direction: the gain is +10.0 pp (95% CI [-20.0, +40.0]), an "
                              "interval that contains zero and is 60.0 pp wide, wider than the paper's effect "
                              "(+13.35 pp), so this run cannot separate the two sides.")
    above = readings.Headline("the gain", "main_delta", 29.6, 19.7, 39.8)  # one seed of 300 rows
    assert above.verdict() == ("This build answers the paper's claim in its direction: the gain is +29.6 pp (95% CI "
                               "[+19.7, +39.8]), an interval wholly above zero; at 20.1 pp wide it cannot tell the "
                               "paper's size of effect (+13.35 pp) from another.")
    narrow = readings.Headline("the gain", "main_delta", 10.0, 5.0, 15.0)
    assert narrow.verdict().endswith("wholly above zero; at 10.0 pp wide it can tell an effect of the paper's size "
                                     "(+13.35 pp, inside the interval) from another.")
    below = readings.Headline("the gain", "main_delta", -10.0, -15.0, -5.0)
    assert below.verdict().startswith("This build answers the paper's claim against its direction: the gain is -10.0 pp")
    null = readings.Headline("the gain", "main_delta", 1.0, -4.0, 6.0)
    assert null.verdict().startswith("This build finds no effect of the paper's size: the gain is +1.0 pp (95% CI "
                                     "[-4.0, +6.0]), an interval that contains zero and is 10.0 pp wide, narrower")
    reference = readings.Headline("the gain", "main_delta", 14.0, 8.0, 20.0, answered_by="reference")
    assert reference.verdict().startswith("This build makes no claim about LLMs: the symbolic reference agent answered")
    assert readings.Headline("the gain", "main_delta", missing="nothing ran").verdict() == \
        "This build cannot test the paper's claim: nothing ran."
    assert wide.record()["paper"] == 13.35 and readings.Headline("g", "main_delta").record()["value"] is None


def test_an_ablation_without_any_object_reports_that_not_a_drop():
    from analyses import run_record

    structured = [run_record(f"r{i}", answer="YES" if i % 2 else "NO", gold_label=i % 2, tool_flow=True,
                             emitted=None) for i in range(4)]
    runs = {("structured", 0): [run_record(f"r{i}", answer="YES", gold_label=i % 2) for i in range(4)],
            ("no_constrained_decoding", 0): structured}
    drops = readings.ablation_table(tables.scores_frame(runs), runs)
    assert math.isnan(drops.loc["no_constrained_decoding", "drop vs Structured Thinking (pp)"])
    assert drops.loc["no_constrained_decoding", "note"] == "no turn-1 object on any row"
    phrase = readings.ablation_phrase(drops, {})
    assert "removing the regex constraint gives no drop to report" in phrase
    assert "+0.0" not in phrase and "switching thinking off was not run" in phrase
    paired = tables.paired_frame(runs, "structured", ["no_constrained_decoding"], n_resamples=50)
    assert "no turn-1 object on any row" in readings.ablation_headline(paired, drops, runs).verdict()


def test_complexity_reading_quotes_bin_gains_and_ood(grid):
    gains, omitted = tables.bin_gain_frame(grid, "structured", "baseline_enhanced", min_positives=2, n_resamples=200,
                                           min_variables=0)
    ood = tables.paired_frame(grid, "structured", ["baseline_enhanced"], n_resamples=200)
    stress = readings.stress_table({})
    reading = readings.complexity(gains, omitted, 2, instances(GOLD), [0, 1], ood, "generated:paraphrase", stress)
    assert "n = 5 (1 gold positive in 5 instances)" in reading.phrases["omission"]
    assert reading.phrases["bin_gains"].startswith("n = 3, seed 0:")
    assert readings.bin_gains_sentence(gains.iloc[:0]) == "none, as no bin is scored"
    assert str(reading.phrases["ood"]).startswith("On generated:paraphrase, Structured Thinking against BaselineEnhanced")
    assert reading.phrases["ood"].source().startswith("On `generated:paraphrase`\\, ")  # the split as code
    assert reading.phrases["stress"] == ""  # the section collapses to its own sentence and command
    assert reading.numbers["paper_split_size_ood"] == 2246 and reading.numbers["paper_asia8_9b_n"] == 40
    assert list(stress.index.get_level_values("family").unique()) == ["random7", "alarm7", "asia8"]
    no_ood = readings.complexity(gains, omitted, 2, instances(GOLD), [0], None, None, stress)
    assert str(no_ood.phrases["ood"]).startswith("No OOD split was run")
    assert "None" not in str(no_ood.phrases["ood"]) and "=" not in str(no_ood.phrases["ood"])  # prose, no value


def test_probe_reading_reports_drops_as_unprobed_minus_probed():
    table = pd.DataFrame([{"agent": "m", "probe": "scramble_full", "drop_gold_pp": 12.0, "flipped_share": 0.2},
                          {"agent": "m", "probe": "drop_premise", "drop_gold_pp": -0.0, "flipped_share": 0.0},
                          {"agent": readings.REFERENCE, "probe": "scramble_full", "drop_gold_pp": 50.0,
                           "flipped_share": 0.6}])
    reading = readings.probes_reading(table, "m", ["scramble_full", "drop_premise"], instances([1, 0]), [0])
    assert reading.numbers["drop_scramble_full"] == 12.0  # the same sign as the probe table and the figure
    # display names, not the probes' keys
    assert str(reading.phrases["probe_drops"]).startswith("full scramble +12.0 pp; premise removed +0.0 pp.")
    assert "scramble_full" not in reading.phrases["probe_drops"].source()
    assert "validity-preserving swaps were not run" in str(reading.phrases["probe_drops"])
    assert (reading.numbers["flips_model"], reading.numbers["flips_reference"]) == pytest.approx((10.0, 60.0))
    alone = readings.probes_reading(table[table["agent"] == "m"], "m", ["scramble_full"], instances([1, 0]), [0])
    assert "reference agent" not in alone.phrases["flips"]


def test_constant_answers_are_flagged_in_prose(grid):
    from analyses import run_record

    yes = {("structured", 0): [run_record(f"r{i}", answer="YES") for i in range(4)]}
    assert readings.constant_phrase(yes).startswith("Constant answers: Structured Thinking answered YES 4/4 (seed 0).")
    assert readings.constant_phrase(grid) == ""
    reading = readings.main_results(tables.scores_frame(yes | grid), tables.paired_frame(grid, "structured",
                                    ["baseline_enhanced"], n_resamples=50), instances(GOLD), [0], yes)
    assert "YES 4/4" in reading.phrases["constant"] and "F1 66.7" in reading.phrases["trivial"]
    assert reading.headline.paper_key == "main_delta"


def test_gallery_and_audit_phrases_count_with_the_right_nouns():
    counts = pd.DataFrame({"errors": [1, 2]}, index=pd.Index(["structured", "baseline_enhanced"], name="condition"))
    assert readings.gallery_reading(counts, instances([1]), [0]).phrases["errors"] == \
        "structured: 1 error, baseline_enhanced: 2 errors"
    errors = pd.DataFrame({"gold": [0, 0, 1]})
    summary = pd.DataFrame({"skeleton_f1": [0.9], "exact_match_rate": [0.5]}, index=["structured"])
    reading = readings.audit_reading(summary, errors, "test", 1, instances([1]), [0])
    assert reading.phrases["gold_errors"].source().startswith("The oracle disagrees with gold on **3** rows of the `test`")
    assert "(2 gold 0 / oracle 1, 1 gold 1 / oracle 0)" in str(reading.phrases["gold_errors"])
    # the evidence of each disagreement, the class listed DAG by DAG, is read from the rows, not asserted
    listed = pd.DataFrame({"gold": [0, 0, 1], "oracle": [1, 1, 0], "class_size": [3, 4, 2], "holds_in": [3, 4, 1]})
    text = str(readings.audit_reading(summary, listed, "test", 1, instances([1]), [0]).phrases["gold_errors"])
    assert "on 3 of the 3 the listing agrees with the oracle" in text
    listed.loc[1, "holds_in"] = 2  # a row where the listing sides with gold is counted apart
    text = str(readings.audit_reading(summary, listed, "test", 1, instances([1]), [0]).phrases["gold_errors"])
    assert "on 2 of the 3 the listing agrees with the oracle" in text
    assert reading.phrases["shortcut"].startswith("In the whole split, 1 causal hypothesis names a cause")
    assert reading.numbers["exact_pct"] == 50.0 and math.isnan(reading.numbers["directed_f1"])


def test_phrases_paste_as_text_and_as_markdown(monkeypatch):
    """Every phrase is glued as Markdown of typed parts: a plain ``str`` phrase as text, shown literally."""
    import myst_nb

    glued = {}
    monkeypatch.setattr(myst_nb, "glue", lambda name, value, display: glued.update({name: value}))
    readings.Reading(phrases={"raw": "<b>3</b> rows", "marked": Markdown(strong(3), " rows")},
                     tables={"t": pd.DataFrame({"a": ["<i>"]})}).glue()
    assert glued["raw"]._repr_markdown_() == r"\<b\>3\<\/b\> rows" and literal_eval(repr(glued["raw"])) == "<b>3</b> rows"
    assert glued["marked"]._repr_markdown_() == "**3** rows" and literal_eval(repr(glued["marked"])) == "3 rows"
    assert "\\<i\\>" in glued["t"]._repr_markdown_()


@pytest.fixture()
def displayed(monkeypatch):
    """What the chapter helpers display, as (object, metadata) pairs (they import IPython's display when called)."""
    import IPython.display

    shown = []
    monkeypatch.setattr(IPython.display, "display", lambda *objs, metadata=None: shown.extend((o, metadata) for o in objs))
    return shown


def _shown(displayed, show, *args):
    """What a section displays: (markdown texts, count of figures)."""
    from matplotlib.figure import Figure

    displayed.clear()
    show(*args)
    texts = [o.source() for o, _ in displayed if isinstance(o, Markdown)]
    return texts, sum(isinstance(o, Figure) for o, _ in displayed)


def test_a_section_that_could_not_run_is_one_sentence_and_its_command(displayed):
    texts, figures_drawn = _shown(displayed, readings.show_bin_gains, readings.bin_gain_table({"test": pd.DataFrame(
        columns=tables.BIN_GAIN_COLUMNS)}))
    assert len(texts) == 1 and texts[0].endswith(" Fill it with `cpdagthink book --only 02 -p limit=0`\\.")
    assert str(displayed[0][0]) == ("No bin of this sample meets both rules, so no per-bin gain is computed (the "
                                    "summary names each bin left out with its gold positives; the accuracy per bin "
                                    "below shows every bin). Fill it with cpdagthink book --only 02 -p limit=0.")
    assert figures_drawn == 0
    texts, _ = _shown(displayed, readings.show_ood, None)
    assert len(texts) == 1 and texts[0].endswith("`cpdagthink book --only 02 -p ood_split=generated:paraphrase`\\.")
    texts, figures_drawn = _shown(displayed, readings.show_stress, readings.stress_table({}))
    assert len(texts) == 1 and "`cpdagthink book --only 02 -p 'stress_families=[\"alarm7\"]'`" in texts[0]
    assert figures_drawn == 0
    # the page's own backend, model and limit stay in the command that fills a section
    page = {"backend": "openai", "model": "Qwen/Qwen3.5-27B", "limit": 0}
    texts, _ = _shown(displayed, readings.show_ood, None, page)
    assert texts[0].endswith("`cpdagthink book --only 02 -p backend=openai -p model=Qwen/Qwen3.5-27B -p limit=0 "
                             "-p ood_split=generated:paraphrase`\\.")
    assert readings.fill_command("03_ablations", page, compare_tool_choice=True).endswith(
        "-p backend=openai -p model=Qwen/Qwen3.5-27B -p limit=0 -p compare_tool_choice=true")


def test_a_section_that_ran_shows_its_figure_with_a_caption_of_what_is_drawn(displayed):
    gains = pd.DataFrame([{"seed": 0, "variables": 5, "n": 10, "positives": 4, "gain (pp)": 1.0, "CI low": -9.0,
                           "CI high": 11.0}])
    texts, figures_drawn = _shown(displayed, readings.show_bin_gains, readings.bin_gain_table({"test": gains}))
    assert figures_drawn == 1 and texts[-1].startswith("*This run\\'s paired gain") and texts[-1].endswith("*")


def test_first_screen_carries_configuration_and_headline_for_the_intro(test_csv, tmp_path, monkeypatch, displayed):
    from cpdagthink.book import experiments as ex
    from cpdagthink.book.chapters import METADATA_KEY, NOTEBOOKS, notebook_defaults

    monkeypatch.setenv("CORR2CAUSE_CSV", str(test_csv))
    namespace = notebook_defaults(NOTEBOOKS / "01_main_results.ipynb") | {
        "backend": "reference", "out_root": str(tmp_path / "runs"), "cache_dir": str(tmp_path / "cache")}
    setup = ex.setup_from_parameters(namespace)
    rows = setup.instances()
    headline = readings.Headline("the gain", "main_delta", 2.0, -30.0, 40.0)
    readings.first_screen(setup, rows, [0], "01_main_results", namespace, headline, ["structured"])
    (text, metadata), = displayed
    # the reference agent answered: an upper bound's figures are no claim about LLMs
    assert str(text).startswith("Verdict. This build makes no claim about LLMs: the symbolic reference agent")
    assert text.source().startswith("**Verdict\\.** This build makes no claim about LLMs")
    record = metadata[METADATA_KEY]
    assert record["headline"]["answered_by"] == "reference"
    assert record["configuration"]["instances"] == 4 and record["configuration"]["negatives"] == 2
    assert record["headline"]["value"] == 2.0 and record["command"].startswith("cpdagthink book --only 01 -p backend=reference")


def test_the_gallery_headline_describes_its_errors_beside_the_papers_sample():
    counts = pd.DataFrame({"n": [4, 4], "errors": [1, 2]}, index=pd.Index(["structured", "baseline_enhanced"]))
    headline = readings.gallery_headline(counts)
    assert headline.value == 3 and headline.paper == 32
    assert headline.verdict().startswith("This chapter describes rather than tests: it localises 3 errors of 8 answers")


def test_the_runs_chapters_read_become_tables_without_running_anything(grid):
    """The run-reading helpers take records (the plan computes them): tool choice, scale and per-bin gains."""
    seeds = [0, 1]
    forced = {("structured (forced)", s): grid[("baseline_enhanced", s)] for s in seeds}
    choice = readings.tool_choice_table(grid, forced, seeds).set_index("condition")
    f1 = tables.seed_frame(tables.scores_frame(grid)).set_index("condition")["F1 mean"]
    assert choice.loc["structured (auto)", "F1 mean"] == pytest.approx(f1["structured"])
    assert choice.loc["structured (forced)", "F1 mean"] == pytest.approx(f1["baseline_enhanced"])
    scale = readings.scale_table(tables.scores_frame(grid), None, {"smollm2-135m": forced | grid})
    assert list(scale.columns) == ["default", "smollm2-135m"]
    assert scale.loc["structured", "default"] == pytest.approx(f1["structured"])
    gains, omitted, ood, table = readings.complexity_gains(grid, "test", grid, "generated:paraphrase",
                                                           min_positives=2, n_resamples=200, min_variables=0)
    assert set(table["split"]) == {"test", "generated:paraphrase"} and list(ood["seed"]) == seeds
    assert readings.complexity_gains(grid, "test", None, None, min_positives=2, n_resamples=200)[2] is None


def test_probe_grid_reads_each_seeds_unprobed_and_probed_runs(grid):
    runs = {(name, s): grid[(condition, s)] for s in (0, 1)
            for name, condition in (("unprobed", "structured"), ("scramble_full", "baseline_enhanced"))}
    table, example, paired = readings.probe_grid(runs, ["scramble_full"], [0, 1], "m")
    assert list(zip(table["probe"], table["seed"])) == [("scramble_full", 0), ("scramble_full", 1)]
    assert set(table["agent"]) == {"m"} and example == {"scramble_full": runs[("scramble_full", 0)]}
    assert set(paired["comparison"]) == {"unprobed vs scramble_full"} and list(paired["seed"]) == [0, 1]


def test_the_stress_table_gives_each_sets_positives_and_says_what_prevalence_and_the_papers_n_mean(grid):
    """A stress set about half positive beside the test split's 15.5%; the paper's N where stated (the ASIA 9B
    row's 40), and the 27B ASIA baseline's 9.30, which no set of 40 can give."""
    stress = readings.stress_table({"asia8": grid})  # ten rows, five gold positives
    assert stress.loc[("asia8", "structured"), "positives"] == sum(GOLD) == 5
    assert stress.loc[("asia8", "structured"), "n"] == len(GOLD)
    text = readings.stress_caveats(stress)
    assert "asia8 5 of 10 (50%) gold positives, against 15.5% in the test split (180 of 1162)" in text
    assert "N only for its ASIA-derived 9B row (40)" in text
    assert "baseline F1 of 9.30 cannot come from 40 or fewer instances (it needs at least 41)" in text
    assert "this run's ASIA set of 10 is smaller than the set the 27B figures beside it come from" in text
    assert readings.stress_caveats(readings.stress_table({})) == ""  # nothing ran: nothing to qualify
    reading = readings.complexity(*tables.bin_gain_frame(grid, "structured", "baseline_enhanced", min_positives=2,
                                                         n_resamples=50, min_variables=0), 2, instances(GOLD), [0, 1],
                                  None, None, stress)
    assert reading.phrases["stress_caveats"] == text


def test_the_graph_audit_is_the_primary_runs_and_the_pooled_one_an_extra_labelled_as_such():
    """The paper audits its primary run: the first seed's objects, never every seed's pooled, unless asked."""
    from analyses import make, run_record
    from cpdagthink.causal.premise import verbalise_premise
    from cpdagthink.causal.dag import independence_facts
    import networkx as nx

    dag = nx.DiGraph([("A", "C"), ("B", "C")])
    premise = verbalise_premise(independence_facts(dag, ("A", "B", "C")))
    row = Instance(id="r0", premise=premise, hypothesis="A directly causes C.", label=1, num_variables=3,
                   template="parent", split="test", source="test")
    exact = make("ABC", directed=[("A", "C"), ("B", "C")], v=[("A", "C", "B")])
    wrong = make("ABC", undirected=[("A", "C"), ("B", "C")])
    runs = {("structured", 0): [run_record("r0", emitted=exact)], ("structured", 1): [run_record("r0", emitted=wrong)],
            ("structured", 2): [run_record("r0", emitted=wrong)]}
    scopes = readings.audit_scopes(runs, [row], [0, 1, 2])
    assert list(scopes) == ["primary run (seed 0)", "pooled over 3 seeds"]
    primary, pooled = scopes.values()
    assert list(primary["seed"]) == [0] and bool(primary["exact_match"].iloc[0])
    assert sorted(pooled["seed"]) == [0, 1, 2]
    table = readings.pooled_summary(scopes, ["structured"])
    assert list(table.columns) == ["Structured Thinking, primary run (seed 0)", "Structured Thinking, pooled over 3 seeds"]
    assert table.loc["exact_match_rate"].tolist() == pytest.approx([1.0, 1 / 3])
    assert list(readings.audit_scopes(runs, [row], [1])) == ["primary run (seed 1)"]


def test_the_gallery_counts_errors_against_both_label_sets():
    """Chapter 01 scores against the published labels, the gallery localises against the corrected ones: an
    agent right on every row by the oracle has no gallery error, yet errs wherever a published label is wrong."""
    from analyses import run_record

    rows = instances([1, 0, 0])
    right = [run_record(f"r{i}", answer="YES" if oracle else "NO", gold_label=gold, oracle_label=oracle)
             for i, (gold, oracle) in enumerate([(1, 1), (0, 1), (0, 0)])]  # r1: a wrong published label
    counts = pd.DataFrame({"errors": [0]}, index=pd.Index(["reference agent"], name="condition"))
    reading = readings.gallery_reading(counts, rows, [0], {"reference agent": right})
    assert reading.phrases["errors"] == "reference agent: 0 errors"
    assert reading.phrases["published_errors"] == "reference agent: 1 error"


def test_the_audit_says_what_its_violation_rate_counts_beside_the_papers():
    from cpdagthink.method.validate import ViolationKind

    reading = readings.audit_reading(pd.DataFrame(), pd.DataFrame({"gold": []}), "test", 0, instances([1]), [0])
    caveat = reading.phrases["violation_caveat"].source()
    assert "not one measure" in str(reading.phrases["violation_caveat"]) and "graph\\-consistency violations" in caveat
    for kind in ViolationKind:  # every kind the audit checks is named; the premise checks are not part of it
        assert (f"`{kind.value}`" in caveat) is (not kind.value.startswith("facts_")), kind


def _degenerate_grid():
    """Chapter 01's degenerate default build: Structured Thinking answers NO on every row, three of the
    baseline's four answers are cut off at the budget; an ablation cut off on every row; probes that change
    no answer."""
    from analyses import run_record
    from cpdagthink.run.records import TurnRecord

    gold = [1, 0] * 6  # at least readings.MIN_ROWS rows: only the answers can make a figure degenerate
    cut = [TurnRecord(messages_sha256="", request_sha256="", finish_reason="length")]
    never = [run_record(f"r{i}", answer="NO", gold_label=g) for i, g in enumerate(gold)]
    baseline = [run_record("r0", answer="YES", gold_label=1)] + [
        run_record(f"r{i}", answer=None, gold_label=g, turns=cut) for i, g in enumerate(gold) if i]
    read = [run_record(f"r{i}", answer="YES" if g else "NO", gold_label=g) for i, g in enumerate(gold)]
    cut_off = [run_record(f"r{i}", answer=None, gold_label=g, turns=cut) for i, g in enumerate(gold)]
    return gold, {("structured", 0): never, ("baseline_enhanced", 0): baseline}, \
        {("structured", 0): read, ("no_constrained_decoding", 0): cut_off}, \
        {("unprobed", 0): never, ("scramble_full", 0): never}


def test_a_degenerate_runs_verdicts_name_the_causes_they_compute_and_state_no_finding():
    gold, main, ablation, probed = _degenerate_grid()
    paired = tables.paired_frame(main, "structured", ["baseline_enhanced"], n_resamples=200)
    reading = readings.main_results(tables.scores_frame(main), paired, instances(gold), [0], main)
    text = reading.headline.verdict()
    assert text.startswith("This build cannot test the paper's claim: Structured Thinking answered NO on every one "
                           "of its 12 rows; BaselineEnhanced finished 1 of its 12 answers (11 cut off at the token budget")
    assert text.endswith("(-28.6 pp) is what such answers produce, not a finding.")
    record = reading.headline.record()
    assert record["degenerate"] and len(record["causes"]) == 2
    # the first screen names seed 0's causes; the reading points to them (the verdict is said once per page)
    assert reading.phrases["verdict"] == "Seed 0 is not a finding, for the reasons the verdict above gives."
    assert readings.verdict(paired, "structured vs baseline_enhanced", main).startswith(
        "Seed 0 is not a finding: Structured Thinking answered NO")

    drops = readings.ablation_table(tables.scores_frame(ablation), ablation)
    assert math.isnan(drops.loc["no_constrained_decoding", "drop vs Structured Thinking (pp)"])
    assert "no constrained decoding finished 0 of its 12 answers (12 cut off" in drops.loc["no_constrained_decoding", "note"]
    phrase = readings.ablation_phrase(drops, {})
    assert "removing the regex constraint gives no drop to report" in phrase and "+0.0" not in phrase
    paired = tables.paired_frame(ablation, "structured", ["no_constrained_decoding"], n_resamples=200)
    headline = readings.ablation_headline(paired, drops, ablation)
    assert headline.degenerate and "finished 0 of its 12 answers" in headline.verdict()
    assert "not a finding" in headline.verdict()

    paired = tables.paired_frame(probed, "unprobed", ["scramble_full"], n_resamples=200)
    headline = readings.probe_headline(paired, probed, 0)
    # one constant answer on every row of both sides carries no information
    assert headline.degenerate and "unprobed answered NO on every one of its 12 rows" in headline.verdict()
    assert readings.probe_causes(probed, ["scramble_full"], 0) == (
        "Not a finding at seed 0: unprobed answered NO on every one of its 12 rows.")
    # a probe that turns every answer of a varied run to NO is named, and can be a finding
    _, _, sound, _ = _degenerate_grid()
    followed = {("unprobed", 0): sound[("structured", 0)], ("scramble_full", 0): probed[("scramble_full", 0)]}
    paired = tables.paired_frame(followed, "unprobed", ["scramble_full"], n_resamples=200)
    headline = readings.probe_headline(paired, followed, 0)
    assert not headline.degenerate and headline.causes == ("full scramble answered NO on every one of its 12 rows",)


def test_a_sound_runs_verdict_keeps_the_interval_rule_and_names_its_cut_offs():
    from analyses import run_record
    from cpdagthink.run.records import TurnRecord

    gold = [1, 0] * 6
    cut = [TurnRecord(messages_sha256="", request_sha256="", text="Answer: NO", finish_reason="length")]
    runs = {("structured", 0): [run_record(f"r{i}", answer="YES" if g else "NO", gold_label=g) for i, g in enumerate(gold)],
            ("baseline_enhanced", 0): [run_record(f"r{i}", answer="YES" if i < 8 else "NO", gold_label=g,
                                                  turns=cut if i == 11 else None) for i, g in enumerate(gold)]}
    paired = tables.paired_frame(runs, "structured", ["baseline_enhanced"], n_resamples=200)
    headline = readings.main_results(tables.scores_frame(runs), paired, instances(gold), [0], runs).headline
    assert not headline.degenerate  # 8 of 12 answers right against 12 of 12: an interval wholly above zero
    assert headline.verdict().startswith("This build answers the paper's claim in its direction: the gain of "
                                         "Structured Thinking over BaselineEnhanced is +42.9 pp")
    assert headline.verdict().endswith("1 of BaselineEnhanced's 12 answers were cut off at the token budget.")


def test_the_audits_verdict_names_the_violation_kinds_most_objects_show():
    from analyses import make, run_record
    from cpdagthink.analysis import audit
    from cpdagthink.causal.dag import independence_facts
    from cpdagthink.causal.premise import verbalise_premise
    import networkx as nx

    premise = verbalise_premise(independence_facts(nx.DiGraph([("A", "C"), ("B", "C")]), ("A", "B", "C")))
    row = Instance(id="r0", premise=premise, hypothesis="A directly causes C.", label=1, num_variables=3,
                   template="parent", split="test", source="test")
    both = make("ABC", directed=[("A", "C"), ("B", "C")], undirected=[("A", "C")], v=[("A", "C", "B")])
    runs = {("structured", 0): [run_record("r0", emitted=both)]}
    audited = readings.audit_runs(runs, [row])
    headline = readings.audit_headline(audit.summary_frame(audited, ["structured"]), runs, audited)
    assert "1 of 1 parsed Structured Thinking objects show the violation “edge both directed and undirected”" \
        in headline.verdict()
    assert headline.record()["causes"] == list(headline.causes) and not headline.degenerate


def test_the_bin_headline_names_the_causes_of_its_bins_answers():
    gold, main, _, _ = _degenerate_grid()
    runs = {key: [r.model_copy(update={"num_variables": 5}) for r in records] for key, records in main.items()}
    gains = pd.DataFrame([{"seed": 0, "variables": 5, "n": 4, "positives": 2, "gain (pp)": -66.7, "CI low": -100.0,
                           "CI high": 0.0}])
    table = readings.bin_gain_table({"test": gains})
    headline = readings.bin_headline(table, 2, {"test": runs})
    assert headline.degenerate and "Structured Thinking answered NO on every one of its 12 rows" in headline.verdict()
    assert not readings.bin_headline(table, 2, {"test": {}}).degenerate  # no records: the interval rule alone


def test_the_probe_summary_gives_shares_in_percent_beside_the_drops_in_points():
    table = pd.DataFrame([{"agent": "m", "probe": "scramble_full", "seed": s, "n": 4, "drop_gold_pp": 10.0 * s,
                           "drop_oracle_pp": 0.0, "flipped_share": 0.25 * s, "intervened_share": 1.0} for s in (0, 1)])
    summary = readings.probe_summary(table)
    assert summary.loc[("m", "scramble_full")].to_dict() == {"n": 4, "drop_gold_pp": 5.0, "drop_oracle_pp": 0.0,
                                                             "flipped_share_pct": 12.5, "intervened_share_pct": 100.0}
    assert list(presentation.readable(summary).columns)[-2:] == ["answers flipped (%)", "turns changed (%)"]


# A Python value in prose: None, a boolean, a list or a dict as Python prints them, a float's nan.
PYTHON_VALUE = re.compile(r"\bNone\b|\bTrue\b|\bFalse\b|\[\d|\['|\{'|\bnan\b")


def python_values(text: str) -> list[str]:
    """The Python values ``text`` prints outside the commands it quotes (a command may pass a list)."""
    return PYTHON_VALUE.findall(re.sub(r"`cpdagthink [^`]*`", "", text))


def test_the_check_for_python_values_in_prose_finds_them():
    assert python_values("No OOD split was run for this page (`ood_split = None`).") == ["None"]
    assert python_values("seeds [0, 1]; variables {'n': 5}; F1 nan; forced True") == ["[0", "{'", "nan", "True"]
    assert python_values("Fill it with `cpdagthink book --only 02 -p 'stress_families=[\"alarm7\"]'`.") == []


@pytest.fixture(scope="module")
def reference_roots(tmp_path_factory):
    root = tmp_path_factory.mktemp("prose")
    return {"backend": "reference", "out_root": str(root / "runs"), "cache_dir": str(root / "cache")}


@pytest.mark.parametrize("chapter", sorted(p.stem for p in NOTEBOOKS.glob("0*.ipynb")))
def test_no_chapter_prints_a_python_value_in_its_prose(chapter, reference_roots, monkeypatch, test_csv):
    """Each chapter's code run as papermill runs it (its parameters cell, then the values given), on the
    reference agent with parameters at None, an empty list and lists of several values (no OOD split, no
    stress set, two seeds, two variable counts): nothing it glues or displays as text prints a Python value."""
    import IPython.display
    import myst_nb

    glued, shown = {}, []
    monkeypatch.setattr(myst_nb, "glue", lambda name, value, display=True: glued.__setitem__(name, value))
    monkeypatch.setattr(IPython.display, "display", lambda *objs, metadata=None: shown.extend(objs))
    given = {**reference_roots, "seeds": [0, 1], "temperature": 0.7, "sample_variables": [5, 6], "ood_split": None,
             "stress_families": []}
    namespace: dict = {}
    for cell in nbformat.read(NOTEBOOKS / f"{chapter}.ipynb", as_version=4).cells:
        if cell.cell_type == "code":
            exec(cell.source, namespace)
            if "parameters" in cell.metadata.get("tags", []):
                namespace.update({k: v for k, v in given.items() if k in namespace})
    texts = [v.source() if isinstance(v, Markdown) else v for v in [*glued.values(), *shown]
             if isinstance(v, (Markdown, str))]
    assert len(texts) > 3  # the chapter's prose was read, not skipped
    assert {text: python_values(text) for text in texts if python_values(text)} == {}


# Chapters read on runs of known answers at a size where the intervals are narrow (tests/known_answers.py).

def _known_main(structured: float, baseline: float):
    from known_answers import GOLD, records, right_on

    runs = {("structured", 0): records("structured", right_on(structured, 1)),
            ("baseline_enhanced", 0): records("baseline_enhanced", right_on(baseline, 2))}
    paired = tables.paired_frame(runs, "structured", ["baseline_enhanced"], n_resamples=1000)
    return readings.main_results(tables.scores_frame(runs), paired, instances(GOLD), [0], runs)


def test_a_method_that_beats_the_baseline_on_400_rows_answers_the_claim_in_its_direction():
    reading = _known_main(0.92, 0.75)
    headline = reading.headline
    assert not headline.degenerate and headline.ci_low > 0
    assert headline.verdict().startswith("This build answers the paper's claim in its direction: the gain of "
                                         "Structured Thinking over BaselineEnhanced is +")
    assert reading.phrases["verdict"] == "By their own intervals, 1 of 1 seed favours Structured Thinking."


def test_a_method_no_better_than_the_baseline_on_400_rows_finds_no_effect_of_the_papers_size():
    reading = _known_main(0.80, 0.80)
    assert reading.phrases["verdict"] == ("On its 1 seed the interval contains zero: narrower than the paper's "
                                          "effect (+13.35 pp), it finds no effect of that size.")
    headline = reading.headline
    assert headline.ci_low < 0 < headline.ci_high and headline.ci_high - headline.ci_low < 13.35
    assert headline.verdict().startswith("This build finds no effect of the paper's size: the gain of Structured "
                                         "Thinking over BaselineEnhanced is")


def _known_probes(probed):
    from known_answers import records, right_on

    unprobed = right_on(0.9, 1)
    runs = {("unprobed", 0): records("unprobed", unprobed), ("scramble_full", 0): probed(unprobed)}
    paired = tables.paired_frame(runs, "unprobed", ["scramble_full"], n_resamples=500)
    return runs, readings.probe_headline(paired, runs, 0)


def test_a_probe_that_changes_no_answer_on_400_rows_is_a_finding():
    from known_answers import records

    runs, headline = _known_probes(lambda answers: records("scramble_full", answers))
    assert not headline.degenerate and (headline.ci_low, headline.ci_high) == (0, 0)
    assert headline.verdict().startswith("This build finds no effect of the paper's size: the drop under the full "
                                         "scramble is +0.0 pp (95% CI [+0.0, +0.0]); both sides gave the same")
    assert "answers do not depend on what differs between them, a finding" in headline.verdict()
    assert readings.probe_causes(runs, ["scramble_full"], 0) == (
        "A finding at seed 0: under full scramble no scored answer changed on any of the 400 rows, so its drop is 0 "
        "with an interval of [0, 0]: on this model the answers do not depend on the graph shown in turn 2.")


def test_a_probe_whose_answers_were_all_cut_off_is_degenerate():
    from known_answers import N, records

    runs, headline = _known_probes(lambda _: records("scramble_full", [None] * N, cut_off=True))
    assert headline.degenerate
    assert headline.verdict().startswith("This build cannot test the paper's claim: full scramble finished 0 of its "
                                         "400 answers (400 cut off at the token budget, 0 unparsed")
    assert readings.probe_causes(runs, ["scramble_full"], 0).startswith("Not a finding at seed 0: full scramble (")


def test_an_ablation_the_backend_does_not_apply_is_named_so_and_has_no_key_figure():
    """Through a generic OpenAI-compatible server no regex is sent: no_constrained_decoding's turn 1 is
    Structured Thinking's own request, row by row, so its drop cannot differ from zero."""
    from known_answers import records, right_on

    answers = right_on(0.9, 1)
    runs = {("structured", 0): records("structured", answers),
            ("no_constrained_decoding", 0): records("no_constrained_decoding", answers, asked="structured"),
            ("minimal_instruction", 0): records("minimal_instruction", right_on(0.7, 3))}
    drops = readings.ablation_table(tables.scores_frame(runs), runs)
    assert drops.loc["no_constrained_decoding", "note"].startswith(
        "not applied on this backend: turn 1 sent Structured Thinking's own request on every row (turn 1 is "
        "unconstrained in both conditions; a vLLM server applies the constraint with regex_mode=vllm)")
    assert math.isnan(drops.loc["no_constrained_decoding", "drop vs Structured Thinking (pp)"])
    assert drops.loc["minimal_instruction", "note"] == ""  # its own request: an ordinary drop
    assert "removing the regex constraint gives no drop to report (not applied on this backend" in \
        readings.ablation_phrase(drops, {})
    paired = tables.paired_frame(runs, "structured", ["no_constrained_decoding"], n_resamples=200)
    headline = readings.ablation_headline(paired, drops, runs)
    assert headline.record()["value"] is None
    assert headline.verdict().startswith("This build cannot test the paper's claim: removing the regex constraint is "
                                         "not applied on this backend")


def test_a_constraint_the_backend_noted_as_not_enforced_makes_its_removal_not_applied():
    """A generic OpenAI-compatible server without regex support: each Structured Thinking call's note says its
    constraint was not enforced, so removing it removes nothing."""
    from known_answers import records, right_on

    answers = right_on(0.9, 1)
    runs = {("structured", 0): records("structured", answers, meta={"constraint": "not enforced"}),
            ("no_constrained_decoding", 0): records("no_constrained_decoding", right_on(0.85, 2))}
    assert readings.not_applied(runs)["no_constrained_decoding"].startswith(
        "not applied on this backend: the backend noted on every row that Structured Thinking's constraint was not "
        "enforced")
    enforced = {**runs, ("structured", 0): records("structured", answers, meta={"constraint": "regex"})}
    assert readings.not_applied(enforced) == {}


def test_the_answer_is_yes_is_read_yes_by_the_flexible_reading_and_counted_apart_by_the_strict_one():
    """A reply "The answer is YES." on 40 of 400 gold-YES rows: the strict reading (the stored answer) finds no
    answer there, the flexible one reads YES; the page and the headline say which one the scores use and how
    many rows differ."""
    from known_answers import GOLD, records, right_on

    answers = right_on(0.9, 1)
    stated = [i for i, g in enumerate(GOLD) if g == 1][:40]
    texts = [("The answer is YES." if i in stated else f"Answer: {a}") for i, a in enumerate(answers)]
    stored = [None if i in stated else a for i, a in enumerate(answers)]
    runs = {("structured", 0): records("structured", stored, texts=texts),
            ("baseline_enhanced", 0): records("baseline_enhanced", right_on(0.75, 2))}
    assert all(tables.flexible_answer(runs[("structured", 0)][i]) == "YES" for i in stated)
    assert runs[("structured", 0)][stated[0]].answer is None  # the record is what was stored: untouched
    frame = tables.reading_frame(runs).set_index("condition")
    assert frame.loc["structured", "differ"] == 40 and frame.loc["baseline_enhanced", "differ"] == 0
    assert frame.loc["structured", "F1 flexible"] > frame.loc["structured", "F1 strict"]
    paired = tables.paired_frame(runs, "structured", ["baseline_enhanced"], n_resamples=200)
    reading = readings.main_results(tables.scores_frame(runs), paired, instances(GOLD), [0], runs)
    text = str(reading.phrases["answer_reading"])
    assert text.startswith("Every score here reads answers strictly: the Answer: YES|NO line the prompt asks for")
    assert "differs on 40 rows: Structured Thinking: 40 rows of 400, F1 " in text
    assert ("the gain reads answers strictly; a flexible reading would read 40 rows of Structured Thinking and "
            "BaselineEnhanced otherwise") in reading.headline.causes


def test_the_scale_reading_is_chosen_from_what_answered_and_how_many_rows():
    """Never the default sample's words on a whole split, never a claim about models from the reference agent."""
    assert readings.scale_phrase(instances([0, 1] * 2), "local").startswith("With 4 instances, differences of a few")
    assert readings.scale_phrase(instances([0, 1] * 300), "openai") == (
        "With 600 instances, each figure's own interval says which differences are more than noise.")
    # what answered is the reference page's verdict, on its first screen; its reading does not say it again
    assert readings.scale_phrase(instances([0, 1] * 300), "reference") == (
        "These rows show what the pipeline does with a perfect graph.")


INTERNAL = {key for key, shown in presentation.LABELS.items() if "_" in key and shown != key} | {
    path.stem for path in NOTEBOOKS.glob("0*.ipynb")}


def _labels(markdown) -> set[str]:
    """The internal keys a page's Markdown shows as words or as a bare code span (a command or an option in
    code, with its spaces or ``=``, left out)."""
    text = re.sub(r"`[^`]*[ =][^`]*`", "", Markdown(markdown).source())
    text = re.sub(r"\\(.)", r"\1", text)
    return {key for key in INTERNAL if re.search(rf"(?<![\w.=-]){re.escape(key)}(?![\w])", text)}


def test_no_internal_key_is_a_label_in_any_chapters_prose_tables_or_the_intro(tmp_path):
    """What the pages paste (each reading's phrases, tables and verdict; the tables the notebooks show; the
    intro's account) names conditions, probes, kinds, columns and chapters by their display names."""
    from failure_cases import INSTANCES, mixed_runs
    from known_answers import GOLD, N, records, right_on
    from cpdagthink.analysis import audit, failures
    from cpdagthink.book.build import build_summary

    answers = right_on(0.9, 1)
    runs = {("structured", 0): records("structured", answers),
            ("baseline_enhanced", 0): records("baseline_enhanced", right_on(0.75, 2)),
            ("no_constrained_decoding", 0): records("no_constrained_decoding", answers, asked="structured"),
            ("minimal_instruction", 0): records("minimal_instruction", right_on(0.7, 3))}
    probed = {("unprobed", 0): records("unprobed", answers), ("scramble_full", 0): records("scramble_full", answers),
              ("drop_premise", 0): records("drop_premise", [None] * N, cut_off=True)}
    scores, rows = tables.scores_frame(runs), instances(GOLD)
    paired = tables.paired_frame(runs, "structured", ["baseline_enhanced", "no_constrained_decoding"], n_resamples=100)
    drops = readings.ablation_table(scores, runs)
    probe_table, _, probe_paired = readings.probe_grid(probed, ["scramble_full", "drop_premise"], [0], "m")
    made = [readings.main_results(scores, paired, rows, [0], runs),
            readings.ablations(drops, True, rows, [0], {"no_thinking": "the model always reasons"}, backend="openai"),
            readings.probes_reading(probe_table, "m", ["scramble_full", "drop_premise"], rows, [0], probed, "openai")]
    headlines = [made[0].headline, readings.ablation_headline(paired, drops, runs),
                 readings.probe_headline(probe_paired, probed, 0)]
    found = {}
    for reading in made:
        for name, phrase in reading.phrases.items():
            found[name] = _labels(phrase)
        for name, table in reading.tables.items():
            found[name] = _labels(presentation.markdown_table(table))
    for headline in headlines:
        found[headline.figure] = _labels(headline.verdict())
    failure_runs = mixed_runs()
    shown = {"scores": tables.score_table(scores, "gold", GOLD), "gains": tables.gain_seed_frame(paired),
             "shifts": tables.error_shift_table(paired), "drops": drops, "probes": readings.probe_summary(probe_table),
             "answers": tables.answers_frame(runs), "shortcut": audit.shortcut_table(failure_runs, INSTANCES),
             "kinds": failures.failure_counts(failure_runs, INSTANCES).T.rename_axis("count")}
    for name, frame in shown.items():
        html = presentation.show(frame).to_html()
        found[name] = {key for key in INTERNAL if re.search(rf">\s*{re.escape(key)}\s*<", html)}
    book = tmp_path / "book"
    book.mkdir()
    for chapter, headline in (("01_main_results", headlines[0]), ("03_ablations", headlines[1]),
                              ("04_probes", headlines[2])):
        _executed_chapter(book / f"{chapter}.ipynb", headline)
    from cpdagthink.book.build import chapter_records
    found["intro"] = _labels(build_summary(chapter_records(book)))
    assert {name: keys for name, keys in found.items() if keys} == {}
    # the check sees a key used as a word, and leaves a command's code span alone
    assert _labels(Markdown("under scramble_full, 01_main_results")) == {"scramble_full", "01_main_results"}
    assert _labels(Markdown("run ", code("cpdagthink book -p probes=scramble_full"))) == set()
    assert _labels(Markdown(code("scramble_full"), " +12.0 pp")) == {"scramble_full"}


def _executed_chapter(path, headline) -> None:
    """A chapter as papermill leaves it, with the first screen a build of ``headline`` records."""
    screen = nbformat.v4.new_code_cell("first_screen()")
    configuration = {"backend": "openai", "model": "m", "data": "test split", "instances": 400, "positives": 200,
                     "negatives": 200, "sample": "whole split", "seeds": [0], "budgets": "1024 + 512",
                     "decoding": "greedy decoding", "tool choice": "auto", "conditions": [], "probes": []}
    screen.outputs = [nbformat.v4.new_output("display_data", data={"text/markdown": "x"}, metadata={"cpdagthink": {
        "chapter": path.stem, "command": f"cpdagthink book --only {path.stem[:2]}", "configuration": configuration,
        "headline": headline.record()}})]
    nb = nbformat.v4.new_notebook()
    nb.cells = [screen]
    nbformat.write(nb, path)


def test_the_cost_section_shows_only_what_the_calls_measured(displayed):
    """No ratios of zeros where no call counted tokens (the reference agent), and no time table where every call
    took 0.00 s; both where the calls measured them."""
    from known_answers import records, right_on

    def costed(condition, tokens, seconds):
        return [r.model_copy(update={"turns": [t.model_copy(update={"prompt_tokens": tokens, "completion_tokens": tokens,
                                                                    "latency_s": seconds}) for t in r.turns]})
                for r in records(condition, right_on(0.8, 1))]

    texts, _ = _shown(displayed, readings.show_cost, {(c, 0): costed(c, 0, 0.0) for c in ("structured", "baseline_enhanced")})
    assert len(texts) == 1 and "no cost to compare" in texts[0]
    displayed.clear()
    readings.show_cost({("structured", 0): costed("structured", 300, 0.0), ("baseline_enhanced", 0): costed("baseline_enhanced", 100, 0.0)})
    shown = " ".join(str(o) for o, _ in displayed)
    assert "Tokens per instance" in shown and "Model time" not in shown
    displayed.clear()
    readings.show_cost({("structured", 0): costed("structured", 300, 2.0), ("baseline_enhanced", 0): costed("baseline_enhanced", 100, 1.0)})
    assert "Model time" in " ".join(str(o) for o, _ in displayed)


def _restated(headline, reading) -> list[str]:
    """The runs of five words of the page's verdict (its first screen) that the reading's prose says again
    (compared as words, without case or punctuation)."""
    def words(text: str) -> list[str]:
        return re.findall(r"[a-z0-9+.-]+", re.sub(r"\\(.)", r"\1", text).lower().replace(". ", " "))

    prose = " ".join(" ".join(words(v.source() if isinstance(v, Markdown) else str(v))) for v in reading.phrases.values())
    verdict = words(headline.verdict())
    runs = {" ".join(verdict[i:i + 5]) for i in range(len(verdict) - 4)}
    return sorted(run for run in runs if f" {run} " in f" {prose} ")


def test_the_verdict_sentence_appears_once_per_page():
    """The first screen gives the page's verdict; the reading below it says what else the run shows and never
    says the verdict again: a seed whose answers are all one word (chapter 01), an ablation the backend does not
    apply (03), a probe that changed no answer and one whose answers were all cut off (04), the reference agent's
    run (03, 04) and a design that did not run (07)."""
    from known_answers import GOLD, N, records, right_on

    constant = {("structured", 0): records("structured", ["YES"] * N),
                ("baseline_enhanced", 0): records("baseline_enhanced", ["YES"] * N),
                ("structured", 1): records("structured", right_on(0.9, 1)),
                ("baseline_enhanced", 1): records("baseline_enhanced", right_on(0.75, 2))}
    paired = tables.paired_frame(constant, "structured", ["baseline_enhanced"], n_resamples=200)
    main = readings.main_results(tables.scores_frame(constant), paired, instances(GOLD), [0, 1], constant)
    assert main.headline.degenerate
    pages = {"01": main}

    answers = right_on(0.9, 1)
    runs = {("structured", 0): records("structured", answers),
            ("no_constrained_decoding", 0): records("no_constrained_decoding", answers, asked="structured")}
    drops = readings.ablation_table(tables.scores_frame(runs), runs)
    ablated = readings.ablations(drops, True, instances(GOLD), [0], backend="openai")
    paired = tables.paired_frame(runs, "structured", ["no_constrained_decoding"], n_resamples=200)
    ablated.headline = readings.ablation_headline(paired, drops, runs)
    pages["03"] = ablated
    reference = readings.ablations(drops, True, instances(GOLD), [0], backend="reference")
    reference.headline = dataclasses.replace(ablated.headline, missing="", value=0.0, ci_low=0.0, ci_high=0.0,
                                             answered_by="reference")
    pages["03 reference"] = reference

    unprobed = right_on(0.9, 1)
    for name, probed in {"no change": records("scramble_full", unprobed),
                         "cut off": records("scramble_full", [None] * N, cut_off=True)}.items():
        runs = {("unprobed", 0): records("unprobed", unprobed), ("scramble_full", 0): probed}
        table, _, paired = readings.probe_grid(runs, ["scramble_full"], [0], "model")
        reading = readings.probes_reading(table, "model", ["scramble_full"], instances(GOLD), [0], runs, "openai")
        reading.headline = readings.probe_headline(paired, runs, 0)
        pages[f"04 {name}"] = reading

    from cpdagthink.book.readings import carriers
    pages["07"] = carriers.components_reading(None, [], {}, Markdown("a design"), "cpdagthink book --only 07")

    restated = {page: _restated(r.headline, r) for page, r in pages.items() if _restated(r.headline, r)}
    assert restated == {}, "\n".join(f"{page}: {runs}" for page, runs in restated.items())
