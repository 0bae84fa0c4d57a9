"""The numbers behind the book's tables: scores, per-seed paired gains and their seed summary, bins, per-bin gains,
paper rows."""

from __future__ import annotations

import pandas as pd
import pytest

from analyses import run_record
from cpdagthink.analysis import tables
from cpdagthink.analysis.metrics import paired_comparison
from cpdagthink.book import experiments as ex
from cpdagthink.book import presentation
from cpdagthink.paths import PAPER_REPORTED, PROJECT_ROOT
from cpdagthink.run.records import TurnRecord
from scored_runs import BASE, GOLD, TARGET, VARS, record, two_seed_grid


@pytest.fixture()
def runs():
    return two_seed_grid()


def test_paired_frame_has_each_seeds_own_interval_and_p(runs):
    paired = tables.paired_frame(runs, "structured", ["baseline_enhanced"], n_resamples=500)
    assert list(paired["seed"]) == [0, 1] and set(paired["comparison"]) == {"structured vs baseline_enhanced"}
    for seed, row in paired.set_index("seed").iterrows():
        expected = paired_comparison(BASE[seed], TARGET[seed], GOLD, n_resamples=500, seed=seed)
        assert row["gain (pp)"] == pytest.approx(100 * expected.delta)
        assert (row["CI low"], row["CI high"]) == pytest.approx((100 * expected.ci_low, 100 * expected.ci_high))
        assert row["McNemar p"] == pytest.approx(expected.mcnemar_p)
    gains = tables.gain_table(paired)
    assert list(gains.index) == [("baseline_enhanced", 0), ("baseline_enhanced", 1)]
    assert list(gains.columns) == ["n", "F1 other", "F1 structured", "gain (pp)", "CI low", "CI high", "McNemar p"]
    assert "FN structured" in tables.error_shift_table(paired).columns


def test_gain_seed_frame_summarises_gains_not_intervals(runs):
    paired = tables.paired_frame(runs, "structured", ["baseline_enhanced"], n_resamples=500)
    summary = tables.gain_seed_frame(paired).iloc[0]
    gains = list(paired["gain (pp)"])
    assert summary["gain mean"] == pytest.approx(sum(gains) / 2)
    assert summary["gain sd"] == pytest.approx(pd.Series(gains).std(ddof=1))
    excluding = sum((lo > 0 or hi < 0) for lo, hi in zip(paired["CI low"], paired["CI high"]))
    assert summary["CI excludes 0"] == f"{excluding} of 2"
    assert not {"CI low", "CI high", "McNemar p"} & set(tables.gain_seed_frame(paired).columns)


def test_scores_and_seed_frames(runs):
    scores = tables.scores_frame(runs)
    gold = tables.score_table(scores, "gold")
    assert gold.loc[("structured", 0), "F1"] == pytest.approx(100.0)
    assert tables.count_table(scores).loc[("structured", 1), "unparsed"] == 1
    seeds = tables.seed_frame(scores).set_index("condition")
    assert seeds.loc["structured", "seeds"] == 2
    assert seeds.loc["structured", "F1 sd"] > 0


def test_bin_gain_frame_matches_per_bin_comparisons_and_names_omitted_bins(runs):
    gains, omitted = tables.bin_gain_frame(runs, "structured", "baseline_enhanced", min_positives=2, n_resamples=300,
                                           min_variables=0)
    # Bins: n=3 has 2 positives, n=4 has 2, n=5 has 1 -> n=5 omitted, once although two seeds ran.
    assert [(o.group, o.positives, o.n) for o in omitted] == [(5, 1, 5)]
    assert "1 gold positive in 5 instances" in omitted[0].reason
    assert sorted(set(gains["variables"])) == [3, 4] and len(gains) == 4
    row = gains[(gains["seed"] == 1) & (gains["variables"] == 4)].iloc[0]
    members = [i for i, v in enumerate(VARS) if v == 4]
    expected = paired_comparison([BASE[1][i] for i in members], [TARGET[1][i] for i in members],
                                 [GOLD[i] for i in members], n_resamples=300, seed=1)
    assert row["gain (pp)"] == pytest.approx(100 * expected.delta)
    assert row["CI low"] == pytest.approx(100 * expected.ci_low) and row["positives"] == 2


def test_cut_off_and_usage():
    cut = record(0, 1, None, finish="length")
    assert cut.cut_off and not record(1, 1, 1).cut_off
    assert tables.usage(cut).total_tokens == 15
    scores = tables.scores_frame({("baseline_enhanced", 0): [cut, record(1, 1, 1)]})
    assert set(scores["cut off"]) == {1} and set(scores["unparsed"]) == {1}


def test_an_instance_answered_through_a_batch_has_tokens_but_no_model_time():
    import math

    direct = record(0, 1, 1)
    batched = direct.model_copy(update={"turns": [t.model_copy(update={"meta": {**t.meta, "batch": "batch_1"}})
                                                  for t in direct.turns]})
    assert tables.usage(batched).total_tokens == tables.usage(direct).total_tokens
    assert math.isnan(tables.usage(batched).latency_s) and not math.isnan(tables.usage(direct).latency_s)


def test_paper_rows_in_order_and_missing_keys_refused():
    table = tables.paper(["main_f1_baseline", "main_f1_structured"])
    assert list(table["value"]) == [73.01, 86.36] and set(table["source"]) == {"paper"}
    with pytest.raises(KeyError, match="no_such_key"):
        tables.paper(["no_such_key"])
    assert tables.paper(["split_size_ood"])["value"].item() == 2246


def test_paper_csv_holds_the_papers_comparators():
    table = tables.paper().set_index("key")
    assert table.loc["singleturn_qwen36", "model"] == table.loc["baseline_qwen36", "model"] == "Qwen3.6-27B"
    assert (table.loc["split_size_id", "value"], table.loc["asia8_9b_n", "value"]) == (1162, 40)
    assert set(table.loc[["gain_n5_id", "gain_n6_id", "gain_n5_ood", "gain_n6_ood"], "page"]) == {7}
    assert table.index.is_unique


def test_reference_grid_end_to_end(test_csv, tmp_path, monkeypatch):
    monkeypatch.setenv("CORR2CAUSE_CSV", str(test_csv))
    setup = ex.setup_from_parameters({"backend": "reference", "limit": 20, "out_root": str(tmp_path / "runs"),
                                      "cache_dir": str(tmp_path / "cache")})
    runs = ex.run_grid(setup, ["structured", "baseline_enhanced"], [0], setup.instances())
    scores = tables.scores_frame(runs)
    assert (scores[scores["labels"] == "corrected"]["F1"] == 100).all()  # the reference agent is the oracle
    assert set(tables.cost_frame(runs)["condition"]) == {"structured", "baseline_enhanced"}
    assert PROJECT_ROOT.joinpath("data", "paper_reported.csv").resolve() == PAPER_REPORTED  # the checkout links to it


def test_by_variables_omits_thin_bins(test_csv, tmp_path, monkeypatch):
    monkeypatch.setenv("CORR2CAUSE_CSV", str(test_csv))
    setup = ex.setup_from_parameters({"backend": "reference", "limit": 20, "out_root": str(tmp_path / "runs"),
                                      "cache_dir": str(tmp_path / "cache")})
    runs = ex.run_grid(setup, ["structured"], [0])
    frame, omitted = tables.by_variables_frame(runs, min_positives=3)
    assert all("fewer than min_positives=3" in o for o in omitted) and omitted
    bins = tables.bins_frame(runs)
    assert bins["n"].sum() == 20 and set(bins["num_variables"]) == {r.num_variables for r in runs[("structured", 0)]}
    assert bins["positives"].sum() == sum(r.gold_label for r in runs[("structured", 0)])
    correct = sum(r.prediction == r.gold_label for r in runs[("structured", 0)])
    assert (bins["accuracy"] * bins["n"]).sum() / 100 == pytest.approx(correct)


def test_a_row_without_an_oracle_label_is_scored_on_its_published_label():
    """A row the oracle cannot label (e.g. a hypothesis in an unknown wording) is posed and scored;
    its corrected score falls back to the published label and the frame says how many such rows there were."""
    records = [record(i, g, p) for i, (g, p) in enumerate(zip(GOLD, TARGET[0]))]
    records[0] = records[0].model_copy(update={"oracle_label": None})
    records[4] = records[4].model_copy(update={"oracle_label": 1})  # a published label the oracle corrects
    scores = tables.scores_frame({("structured", 0): records}).set_index("labels")
    assert scores.loc["corrected", "published only"] == 1 and scores.loc["gold", "published only"] == 0
    assert scores.loc["gold", "F1"] == pytest.approx(100.0)
    assert scores.loc["corrected", "n"] == len(records) and scores.loc["corrected", "fn"] == 1


def test_bins_follow_the_papers_rule_then_the_positive_guard(runs):
    """Default: n <= 4 omitted as the paper does (§4.3), then bins with too few positives; both named."""
    gains, omitted = tables.bin_gain_frame(runs, "structured", "baseline_enhanced", min_positives=1, n_resamples=100)
    assert sorted(set(gains["variables"])) == [5]
    assert [(o.group, o.n, o.positives) for o in omitted] == [(3, 2, 2), (4, 3, 2)]
    assert "paper's rule" in omitted[0].reason
    guarded, omitted = tables.bin_gain_frame(runs, "structured", "baseline_enhanced", min_positives=2, n_resamples=100)
    assert guarded.empty and [o.group for o in omitted] == [3, 4, 5] and "paper's rule" not in omitted[2].reason


def test_answers_frame_flags_constant_answers_and_counts_what_was_lost():
    yes = [record(i, g, 1) for i, g in enumerate([1, 0, 1, 0])]
    mixed = [record(0, 1, 1), record(1, 0, None, finish="length"), record(2, 1, 0), record(3, 0, 0)]
    frame = tables.answers_frame({("structured", 0): yes, ("baseline_enhanced", 0): mixed}).set_index("condition")
    assert frame.loc["structured", "answers"] == "YES 4/4 (constant)"
    assert frame.loc["baseline_enhanced", "answers"] == "YES 1/4"
    assert (frame.loc["baseline_enhanced", "unparsed"], frame.loc["baseline_enhanced", "cut off"]) == (1, 1)
    assert frame.loc["structured", "objects"] == "—" and frame.loc["structured", "rejected"] == 0
    assert tables.constant_conditions({("structured", 0): yes}) == {"structured": "YES 4/4 (seed 0)"}


def test_a_run_without_any_parsed_object_is_named():
    tool = [run_record("a", tool_flow=True), run_record("b", tool_flow=True)]
    assert tables.produced_no_object(tool)
    assert tables.answer_counts(tool)["objects"] == "0/2"
    assert not tables.produced_no_object([run_record("c")])  # not a tool condition


def test_trivial_predictors_stand_beside_every_f1():
    assert tables.trivial_predictors([1, 1, 0, 0]) == {"always-YES F1": pytest.approx(100 * 2 / 3),
                                                       "majority-class accuracy": 50.0}
    table = tables.score_table(tables.scores_frame(two_seed_grid()), "gold", GOLD)
    always = table.iloc[-2]
    assert table.index[-2][0] == "always YES (this sample)"
    assert always["F1"] == pytest.approx(100 * 2 * 5 / (10 + 5)) and always["recall"] == 100
    assert table.index[-1][0] == "majority class, always NO" and table.iloc[-1]["accuracy"] == 50


def test_scores_count_unparsed_answers_by_the_records_rule():
    """Chapter 01's count agrees with RunRecord.unparsed: a rejected request or a row that could not be posed
    has no answer but is not an unparsed one."""
    refused = TurnRecord(messages_sha256="", request_sha256="", meta={"rejected": "HTTP 400"})
    rows = [run_record("a", answer=None, turns=[refused]), run_record("b", answer=None, problem="no DAG"),
            run_record("c", answer=None)]
    scores = tables.scores_frame({("structured", 0): rows})
    assert set(scores["unparsed"]) == {1}
    assert tables.answers_frame({("structured", 0): rows}).loc[0, "rejected"] == 1


def test_the_cost_tables_lead_with_tokens_and_flag_time_as_load_sensitive():
    from cpdagthink.run.records import TurnRecord

    def turn(prompt, completion, seconds, reasoning=None):
        return TurnRecord(messages_sha256="", request_sha256="", prompt_tokens=prompt, completion_tokens=completion,
                          latency_s=seconds, meta={} if reasoning is None else {"reasoning_tokens": reasoning})

    runs = {("baseline_enhanced", 0): [record(0, 1, 1).model_copy(update={"turns": [turn(100, 20, 1.0)]})],
            ("structured", 0): [record(0, 1, 1).model_copy(update={"turns": [turn(100, 40, 1.0, 30),
                                                                               turn(150, 10, 1.0)]})]}
    tokens, times = tables.cost_tables(runs)
    row = tokens.set_index("condition").loc["structured"]
    assert (row["mean_prompt_tokens"], row["mean_completion_tokens"], row["mean_reasoning_tokens"]) == (250, 50, 30)
    assert row["token_ratio"] == pytest.approx(300 / 120)
    assert list(presentation.readable(times).columns) == ["condition", "model time per instance (s, load-sensitive)",
                                                          "ms per completion token (load-sensitive)",
                                                          "time vs baseline (load-sensitive)"]
    assert times.set_index("condition").loc["structured", "ms_per_completion_token"] == pytest.approx(40.0)


def test_same_first_requests_compares_the_turn_1_hashes_row_by_row_and_never_empty_ones():
    from known_answers import records

    answers = ["YES", "NO", "YES"]
    structured = records("structured", answers, [1, 0, 1])
    assert tables.same_first_requests(structured, records("no_constrained_decoding", answers, [1, 0, 1],
                                                          asked="structured"))
    assert not tables.same_first_requests(structured, records("no_constrained_decoding", answers, [1, 0, 1]))
    unhashed = [r.model_copy(update={"turns": [t.model_copy(update={"request_sha256": ""}) for t in r.turns]})
                for r in structured]
    assert not tables.same_first_requests(unhashed, unhashed) and not tables.same_first_requests([], [])


def test_constraint_not_enforced_needs_the_backends_note_on_every_row():
    from known_answers import records

    noted = records("structured", ["YES", "NO"], [1, 0], meta={"constraint": "not enforced"})
    assert tables.constraint_not_enforced(noted)
    assert not tables.constraint_not_enforced(noted[:1] + records("structured", ["NO"], [0]))
    assert not tables.constraint_not_enforced([])


def test_the_flexible_reading_never_reads_a_reply_cut_off_at_its_budget():
    from known_answers import records

    cut = records("structured", [None], [1], texts=["The answer is YES, because"], cut_off=True)
    assert tables.flexible_answer(cut[0]) is None
    assert tables.reading_frame({("structured", 0): cut})["differ"].tolist() == [0]
