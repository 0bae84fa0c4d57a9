"""Tests for cpdagthink.analysis.metrics: hand-computed cases and plain-python references (no scipy in the references)."""

from __future__ import annotations

import math
import time
from dataclasses import replace

import numpy as np
import pytest

from cpdagthink.analysis.metrics import (
    CostRow,
    Usage,
    binary_scores,
    bootstrap_f1_deltas,
    bootstrap_indices,
    cost_summary,
    counted,
    mcnemar_exact_p,
    paired_by_group,
    paired_comparison,
    percentile_interval,
    scores_against,
    scores_by_group,
    scores_table,
    seed_summary,
)

# (pred, gold): tp tp tp | fp | fn fn (one unparsed) | tn tn tn (one unparsed)
PRED = [1, 1, 0, 0, 1, None, 0, 1, None]
GOLD = [1, 0, 1, 0, 1, 1, 0, 1, 0]


def reference_f1(pred, gold):
    """F1 of the YES class in plain python, None counting as NO, 0 when there is no true positive."""
    tp = sum(p == 1 and g == 1 for p, g in zip(pred, gold))
    fp = sum(p == 1 and g == 0 for p, g in zip(pred, gold))
    fn = sum(p != 1 and g == 1 for p, g in zip(pred, gold))
    return 2 * tp / (2 * tp + fp + fn) if tp else 0.0


def reference_mcnemar(b01, b10):
    """Exact two-sided McNemar: twice the smaller binomial(n, 1/2) tail, capped at 1."""
    n = b01 + b10
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, k) for k in range(min(b01, b10) + 1)) / 2**n
    return min(1.0, 2 * tail)


def synthetic(n=60, seed=1):
    """Gold labels and two conditions, b more accurate than a, with a few unparsed answers in b."""
    rng = np.random.default_rng(seed)
    gold = (rng.random(n) < 0.3).astype(int).tolist()
    a = [g if rng.random() < 0.7 else 1 - g for g in gold]
    b = [g if rng.random() < 0.9 else 1 - g for g in gold]
    b[0] = b[5] = None
    return a, b, gold


# binary_scores


def test_binary_scores_hand_computed():
    s = binary_scores(PRED, GOLD)
    assert (s.tp, s.fp, s.fn, s.tn, s.n, s.unparsed) == (3, 1, 2, 3, 9, 2)
    assert s.precision == pytest.approx(3 / 4)
    assert s.recall == pytest.approx(3 / 5)
    assert s.f1 == pytest.approx(2 * 0.75 * 0.6 / (0.75 + 0.6))
    assert s.f1 == pytest.approx(2 / 3)
    assert s.accuracy == pytest.approx(6 / 9)


def test_unparsed_counts_as_not_yes():
    # None on a gold YES is a false negative, on a gold NO a true negative.
    s = binary_scores([None, None], [1, 0])
    assert (s.tp, s.fp, s.fn, s.tn, s.unparsed) == (0, 0, 1, 1, 2)
    # Apart from the unparsed count, None scores exactly like an explicit NO.
    assert binary_scores([None, 0, 1], [0, 1, 1]) == replace(binary_scores([0, 0, 1], [0, 1, 1]), unparsed=1)


def test_zero_division_conventions():
    never_yes = binary_scores([0, 0, 0], [1, 1, 0])  # tp + fp == 0
    assert (never_yes.precision, never_yes.recall, never_yes.f1) == (0.0, 0.0, 0.0)
    no_positives = binary_scores([0, 0], [0, 0])  # tp + fn == 0
    assert (no_positives.precision, no_positives.recall, no_positives.f1) == (0.0, 0.0, 0.0)
    assert no_positives.accuracy == 1.0
    all_wrong_yes = binary_scores([1, 1], [0, 0])  # precision + recall == 0
    assert (all_wrong_yes.precision, all_wrong_yes.recall, all_wrong_yes.f1) == (0.0, 0.0, 0.0)


@pytest.mark.parametrize("seed", range(5))
def test_f1_is_harmonic_mean_of_precision_and_recall(seed):
    a, _, gold = synthetic(seed=seed)
    s = binary_scores(a, gold)
    assert s.f1 == pytest.approx(2 * s.precision * s.recall / (s.precision + s.recall), rel=1e-12)
    assert s.f1 == reference_f1(a, gold)


def test_scores_against_both_label_sets():
    corrected = list(GOLD)
    corrected[1] = 1  # the oracle disagrees with one published label: the fp becomes a tp
    both = scores_against(PRED, GOLD, corrected)
    assert list(both) == ["gold", "corrected"]
    assert both["gold"] == binary_scores(PRED, GOLD)
    assert (both["corrected"].tp, both["corrected"].fp) == (4, 0)


# paired_comparison


def test_mcnemar_hand_computed():
    # 8 instances only b gets right, 2 only a, 4 both: p = 2 * (1 + 10 + 45) / 1024.
    gold = [1] * 14
    a = [0] * 8 + [1] * 2 + [1] * 4
    b = [1] * 8 + [0] * 2 + [1] * 4
    result = paired_comparison(a, b, gold, n_resamples=200)
    assert (result.b01, result.b10) == (8, 2)
    assert result.mcnemar_p == pytest.approx(0.109375, rel=1e-12)


@pytest.mark.parametrize("b01", range(13))
def test_mcnemar_matches_math_comb_reference(b01):
    for b10 in range(13):
        assert mcnemar_exact_p(b01, b10) == pytest.approx(reference_mcnemar(b01, b10), rel=1e-9)


def test_mcnemar_without_discordant_pairs_is_one():
    result = paired_comparison([1, 0, None], [1, 0, 0], [1, 0, 0], n_resamples=10)
    assert (result.b01, result.b10, result.mcnemar_p) == (0, 0, 1.0)
    assert result.delta == 0.0


def test_paired_comparison_point_estimates_and_error_shifts():
    gold = [1, 1, 1, 1, 0, 0, 0, 0]
    a = [0, 0, 0, 1, 1, 1, 0, 0]  # tp 1, fn 3, fp 2
    b = [1, 1, 0, 1, None, 1, 0, 0]  # tp 3, fn 1, fp 1
    result = paired_comparison(a, b, gold, n_resamples=100)
    assert (result.fn_a, result.fn_b, result.fp_a, result.fp_b) == (3, 1, 2, 1)
    assert result.f1_a == pytest.approx(2 / 7)  # 2tp / (2tp + fp + fn)
    assert result.f1_b == pytest.approx(6 / 8)
    assert result.delta == pytest.approx(6 / 8 - 2 / 7)
    # a wrong & b right: items 0, 1, 4; a right & b wrong: none.
    assert (result.b01, result.b10) == (3, 0)
    assert result.n == 8


def test_bootstrap_matches_plain_python_loop_exactly():
    a, b, gold = synthetic(n=40, seed=3)
    n_resamples, seed, confidence = 25, 7, 0.9
    # The documented resampling contract, written out independently of bootstrap_indices.
    indices = np.random.default_rng(seed).integers(0, len(gold), size=(n_resamples, len(gold)))
    assert np.array_equal(bootstrap_indices(len(gold), n_resamples, seed), indices)

    reference = []
    for row in indices.tolist():
        sample_gold = [gold[i] for i in row]
        f1_a = reference_f1([a[i] for i in row], sample_gold)
        f1_b = reference_f1([b[i] for i in row], sample_gold)
        reference.append(f1_b - f1_a)
    deltas = bootstrap_f1_deltas(a, b, gold, indices)
    assert deltas.tolist() == reference

    result = paired_comparison(a, b, gold, n_resamples=n_resamples, seed=seed, confidence=confidence)
    low, high = np.quantile(reference, [0.05, 0.95])
    assert (result.ci_low, result.ci_high) == (float(low), float(high))


def test_bootstrap_ci_deterministic_and_contains_delta():
    a, b, gold = synthetic(n=300, seed=5)
    first = paired_comparison(a, b, gold, n_resamples=2000, seed=11)
    assert first == paired_comparison(a, b, gold, n_resamples=2000, seed=11)
    assert first.ci_low <= first.delta <= first.ci_high
    assert first.delta > 0
    other = paired_comparison(a, b, gold, n_resamples=2000, seed=12)
    assert (other.ci_low, other.ci_high) != (first.ci_low, first.ci_high)


def test_bootstrap_full_size_is_fast():
    a, b, gold = synthetic(n=1162, seed=2)
    start = time.perf_counter()
    paired_comparison(a, b, gold, n_resamples=10_000, seed=0)
    # Vectorised, this takes well under a second; a per-resample python loop would take far longer.
    assert time.perf_counter() - start < 5.0


def test_percentile_interval_hand_computed():
    values = np.arange(11, dtype=float)  # quantile q of 0..10 with linear interpolation is 10 q
    assert percentile_interval(values, 0.9) == pytest.approx((0.5, 9.5))
    assert percentile_interval(values, 0.5) == pytest.approx((2.5, 7.5))


# seed_summary


def test_seed_summary():
    summary = seed_summary([0.5, 0.7, 0.6])
    assert summary.mean == pytest.approx(0.6)
    assert summary.std == pytest.approx(0.1)  # sqrt((0.01 + 0.01 + 0) / (3 - 1))
    assert summary.n == 3


def test_seed_summary_single_seed_has_zero_std():
    summary = seed_summary([0.42])
    assert (summary.mean, summary.std, summary.n) == (0.42, 0.0, 1)


# scores_by_group


def test_scores_by_group_omits_groups_with_few_positives():
    groups = [2] * 4 + [3] * 7
    gold = [1, 0, 0, 0] + [1, 1, 1, 1, 1, 0, 0]
    pred = [1, 1, 0, 0] + [1, 1, 1, 0, None, 1, 0]
    scored, omitted = scores_by_group(pred, gold, groups, min_positives=5)
    assert list(scored) == [3]
    assert scored[3] == binary_scores(pred[4:], gold[4:])
    assert len(omitted) == 1
    dropped = omitted[0]
    assert (dropped.group, dropped.n, dropped.positives) == (2, 4, 1)
    assert "group 2" in dropped.reason and "too few positives" in dropped.reason
    assert "1 gold positive in 4 instances" in dropped.reason  # no "positive(s)"


def test_scores_by_group_keeps_all_with_zero_threshold_in_sorted_order():
    scored, omitted = scores_by_group([0, 1, 1], [0, 1, 0], [5, 3, 4], min_positives=0)
    assert list(scored) == [3, 4, 5]
    assert omitted == []
    assert scored[4].fp == 1


def test_paired_by_group_compares_within_each_scored_group():
    a, b, gold = synthetic(n=80, seed=3)
    groups = [4 if i < 10 else 5 + (i % 2) for i in range(80)]
    compared, omitted = paired_by_group(a, b, gold, groups, min_positives=5, n_resamples=300, seed=2)
    scored, dropped = scores_by_group(b, gold, groups, min_positives=5)
    assert list(compared) == list(scored) and omitted == dropped
    for group, comparison in compared.items():
        members = [i for i, g in enumerate(groups) if g == group]
        expected = paired_comparison([a[i] for i in members], [b[i] for i in members], [gold[i] for i in members],
                                     n_resamples=300, seed=2)
        assert comparison == expected
    with pytest.raises(ValueError, match="pred_a"):
        paired_by_group([2] * 80, b, gold, groups)


def test_counted_uses_the_right_number():
    assert [counted(n, "gold positive") for n in (0, 1, 2)] == ["0 gold positives", "1 gold positive",
                                                                 "2 gold positives"]
    assert counted(1, "hypothesis", "hypotheses") == "1 hypothesis"
    assert counted(3, "hypothesis", "hypotheses") == "3 hypotheses"


# cost_summary


def test_cost_summary_ratios_to_baseline():
    rows = cost_summary(
        {
            "one-turn": [Usage(80, 20, 1.0), Usage(100, 0, 3.0)],
            "cpdag": [Usage(150, 50, 2.0), Usage(180, 20, 4.0)],
        },
        baseline="one-turn",
    )
    assert [(r.condition, r.n, r.mean_prompt_tokens, r.mean_completion_tokens, r.mean_total_tokens, r.token_ratio,
             r.mean_latency_s, r.latency_ratio) for r in rows] == [("one-turn", 2, 90.0, 10.0, 100.0, 1.0, 2.0, 1.0),
                                                                   ("cpdag", 2, 165.0, 35.0, 200.0, 2.0, 3.0, 1.5)]
    assert [r.ms_per_completion_token for r in rows] == pytest.approx([200.0, 6000 / 70])
    assert all(math.isnan(r.mean_reasoning_tokens) for r in rows)  # no service reported reasoning tokens


def test_cost_summary_leads_with_the_tokens_of_each_kind_and_times_per_token():
    rows = cost_summary({"base": [Usage(10, 4, 2.0, reasoning_tokens=3), Usage(10, 0, 0.0)]}, baseline="base")
    assert list(CostRow.__dataclass_fields__)[2:7] == ["mean_prompt_tokens", "mean_completion_tokens",
                                                       "mean_reasoning_tokens", "mean_total_tokens", "token_ratio"]
    assert (rows[0].mean_reasoning_tokens, rows[0].ms_per_completion_token) == (1.5, 500.0)


def test_cost_summary_zero_baseline_latency_gives_nan_ratio():
    rows = cost_summary({"base": [Usage(10, 0, 0.0)], "m": [Usage(20, 0, 1.0)]}, baseline="base")
    assert rows[1].token_ratio == 2.0
    assert math.isnan(rows[1].latency_ratio)


def test_cost_summary_validation():
    with pytest.raises(ValueError, match="baseline 'one-turn' not among"):
        cost_summary({"cpdag": [Usage(1, 1, 1.0)]}, baseline="one-turn")
    with pytest.raises(ValueError, match="without records"):
        cost_summary({"base": [Usage(1, 1, 1.0)], "m": []}, baseline="base")


# scores_table


def test_scores_table_percentages():
    table = scores_table({"cpdag": binary_scores(PRED, GOLD)})
    assert list(table.index) == ["cpdag"]
    assert list(table.columns) == [
        "tp", "fp", "fn", "tn", "n", "unparsed", "precision_pct", "recall_pct", "f1_pct", "accuracy_pct",
    ]  # fmt: skip
    row = table.loc["cpdag"]
    assert (row.precision_pct, row.recall_pct, row.f1_pct, row.accuracy_pct) == (75.0, 60.0, 66.67, 66.67)
    assert (row.tp, row.unparsed) == (3, 2)


# input validation


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: binary_scores([1, 0], [1]), "equal lengths"),
        (lambda: binary_scores([], []), "non-empty"),
        (lambda: binary_scores([2, 0], [1, 0]), "only 0, 1 or None"),
        (lambda: binary_scores([1, 0], [1, None]), "gold labels must be 0 or 1"),
        (lambda: scores_against([1], [1], [1, 0]), "equal lengths"),
        (lambda: scores_against([1], [1], [3]), "corrected labels must be 0 or 1"),
        (lambda: paired_comparison([1, 0], [1], [1, 0]), "equal lengths"),
        (lambda: paired_comparison([], [], []), "non-empty"),
        (lambda: paired_comparison([1], [1], [1], n_resamples=0), "n_resamples"),
        (lambda: paired_comparison([1], [1], [1], confidence=1.0), "confidence"),
        (lambda: bootstrap_f1_deltas([1], [1], [1], np.array([[0, 1]])), r"indices must lie in \[0, 1\)"),
        (lambda: bootstrap_f1_deltas([1], [1], [1], np.array([0])), "2-D"),
        (lambda: seed_summary([]), "at least one"),
        (lambda: scores_by_group([1], [1], [2, 3]), "equal lengths"),
        (lambda: scores_by_group([1], [1], [2], min_positives=-1), "min_positives"),
    ],
)
def test_input_validation(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_a_reported_f1_bounds_the_number_of_instances_it_was_measured_on():
    from cpdagthink.analysis.metrics import binary_scores, min_instances_for_f1

    assert min_instances_for_f1(9.30) == 41  # 2 true positives and 39 errors: 4 / 43
    assert round(100 * binary_scores([1, 1] + [1] * 20 + [0] * 19, [1, 1] + [0] * 20 + [1] * 19).f1, 2) == 9.30
    assert min_instances_for_f1(100.0) == 1 and min_instances_for_f1(0.0) == 1
    assert min_instances_for_f1(60.0) == 7  # 3 true positives and 4 errors: 6 / 10
