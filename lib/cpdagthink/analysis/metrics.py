"""Evaluation metrics for binary YES/NO predictions on Corr2Cause: scores, paired tests, seeds, groups, cost.

Labels are ints, 1 = YES, 0 = NO; the headline metric is F1 of the YES class. A prediction may be ``None``
(the model's answer could not be parsed); it counts as not-YES, i.e. 0, everywhere in this module, and the
number of such predictions is reported in :class:`Scores`. All rates are fractions in [0, 1];
:func:`scores_table` converts to percentages for display.

Zero-division conventions (the same in every function here): precision = 0 when nothing is predicted YES,
recall = 0 when there are no gold YES, F1 = 0 when precision + recall = 0 (i.e. when tp = 0).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from typing import TYPE_CHECKING, TypeVar

import numpy as np

if TYPE_CHECKING:  # pandas and scipy are imported where used: `cpdagthink oracle` starts without them
    import pandas as pd

G = TypeVar("G", bound=Hashable)

Prediction = int | None
ArrayOrInt = np.ndarray | int


@dataclass(frozen=True)
class Scores:
    """Confusion counts and rates (fractions) of the YES class on ``n`` instances."""

    tp: int
    fp: int
    fn: int
    tn: int
    n: int
    unparsed: int
    precision: float
    recall: float
    f1: float
    accuracy: float


@dataclass(frozen=True)
class PairedComparison:
    """Condition ``b`` against condition ``a`` on the same ``n`` instances; ``delta`` is F1(b) - F1(a).

    ``ci_low``/``ci_high`` are the bootstrap percentile interval of the F1 difference. ``b01`` counts
    instances a gets wrong and b right, ``b10`` the reverse; ``mcnemar_p`` is the exact two-sided McNemar
    p-value on them. ``fn_*``/``fp_*`` are the error shifts (false negatives / false positives).
    """

    n: int
    f1_a: float
    f1_b: float
    delta: float
    ci_low: float
    ci_high: float
    confidence: float
    n_resamples: int
    seed: int
    b01: int
    b10: int
    mcnemar_p: float
    fn_a: int
    fn_b: int
    fp_a: int
    fp_b: int


@dataclass(frozen=True)
class MeanStd:
    """Mean and sample standard deviation (ddof=1) of a metric over ``n`` seeds."""

    mean: float
    std: float
    n: int


@dataclass(frozen=True)
class OmittedGroup:
    """A group left out of :func:`scores_by_group`, with a printable ``reason``."""

    group: Hashable
    n: int
    positives: int
    reason: str


@dataclass(frozen=True)
class Usage:
    """Cost of one instance, summed over all its turns by the caller."""

    prompt_tokens: int
    completion_tokens: int
    latency_s: float
    reasoning_tokens: int | None = None  # of the completion tokens, those the service reports as reasoning

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True)
class CostRow:
    """Mean cost per instance of one condition, and its ratios to the baseline condition's means: first the
    tokens (the method's cost), then the model time, which the machine's load shares in, and that time per
    completion token."""

    condition: str
    n: int
    mean_prompt_tokens: float
    mean_completion_tokens: float
    mean_reasoning_tokens: float  # NaN: the service reported none
    mean_total_tokens: float
    token_ratio: float
    mean_latency_s: float
    ms_per_completion_token: float
    latency_ratio: float


def _gold_array(gold: Sequence[int], name: str = "gold") -> np.ndarray:
    if any(v not in (0, 1) for v in gold):
        raise ValueError(f"{name} labels must be 0 or 1")
    return np.asarray(gold, dtype=bool)


def _pred_array(pred: Sequence[Prediction], name: str = "pred") -> tuple[np.ndarray, int]:
    """Predictions as a YES mask (None -> not YES) and the number of unparsed (None) entries."""
    if any(v is not None and v not in (0, 1) for v in pred):
        raise ValueError(f"{name} must contain only 0, 1 or None")
    return np.array([v == 1 for v in pred], dtype=bool), sum(v is None for v in pred)


def _check_lengths(**named: Sequence) -> int:
    lengths = {name: len(values) for name, values in named.items()}
    if len(set(lengths.values())) != 1:
        raise ValueError(f"inputs must have equal lengths, got {lengths}")
    n = next(iter(lengths.values()))
    if n == 0:
        raise ValueError(f"inputs must be non-empty ({', '.join(lengths)})")
    return n


def _f1(tp: ArrayOrInt, predicted_yes: ArrayOrInt, gold_yes: ArrayOrInt) -> np.ndarray:
    """F1 as 2tp / (predicted YES + gold YES): equal to 2PR/(P+R) when tp > 0, and 0 when tp = 0.

    One formula for scalars and arrays, so the bootstrap and :func:`binary_scores` give bit-identical F1.
    """
    denominator = np.asarray(predicted_yes + gold_yes)
    out = np.zeros(denominator.shape)
    np.divide(2 * np.asarray(tp), denominator, out=out, where=denominator > 0)
    return out


def binary_scores(pred: Sequence[Prediction], gold: Sequence[int]) -> Scores:
    """Confusion counts, precision, recall, F1 (YES class) and accuracy of ``pred`` against ``gold``.

    ``None`` predictions count as NO and are reported in ``unparsed``. Precision = 0 when tp + fp = 0,
    recall = 0 when tp + fn = 0, F1 = 0 when precision + recall = 0.
    """
    n = _check_lengths(pred=pred, gold=gold)
    yes, unparsed = _pred_array(pred)
    truth = _gold_array(gold)
    tp = int(np.sum(yes & truth))
    fp = int(np.sum(yes & ~truth))
    fn = int(np.sum(~yes & truth))
    tn = n - tp - fp - fn
    return Scores(
        tp=tp,
        fp=fp,
        fn=fn,
        tn=tn,
        n=n,
        unparsed=unparsed,
        precision=tp / (tp + fp) if tp + fp else 0.0,
        recall=tp / (tp + fn) if tp + fn else 0.0,
        f1=float(_f1(tp, tp + fp, tp + fn)),
        accuracy=(tp + tn) / n,
    )


def scores_against(
    pred: Sequence[Prediction], gold: Sequence[int], corrected: Sequence[int]
) -> dict[str, Scores]:
    """Scores against the published labels (``"gold"``) and the oracle's labels (``"corrected"``).

    Both are always reported because the published test split has 18 label errors.
    """
    _check_lengths(pred=pred, gold=gold, corrected=corrected)
    _gold_array(corrected, "corrected")
    return {"gold": binary_scores(pred, gold), "corrected": binary_scores(pred, corrected)}


def bootstrap_indices(n_instances: int, n_resamples: int, seed: int) -> np.ndarray:
    """Resampled instance indices, shape ``(n_resamples, n_instances)``.

    Exactly ``np.random.default_rng(seed).integers(0, n_instances, size=(n_resamples, n_instances))``; a row
    of the array is one bootstrap sample, shared by both conditions so the comparison stays paired.
    """
    return np.random.default_rng(seed).integers(0, n_instances, size=(n_resamples, n_instances))


def bootstrap_f1_deltas(
    pred_a: Sequence[Prediction],
    pred_b: Sequence[Prediction],
    gold: Sequence[int],
    indices: np.ndarray,
) -> np.ndarray:
    """F1(b) - F1(a) on each row of ``indices`` (one bootstrap sample per row), vectorised over rows."""
    n = _check_lengths(pred_a=pred_a, pred_b=pred_b, gold=gold)
    indices = np.asarray(indices)
    if indices.ndim != 2 or indices.size == 0:
        raise ValueError(f"indices must be a non-empty 2-D array, got shape {indices.shape}")
    if indices.min() < 0 or indices.max() >= n:
        raise ValueError(f"indices must lie in [0, {n})")
    yes_a, _ = _pred_array(pred_a, "pred_a")
    yes_b, _ = _pred_array(pred_b, "pred_b")
    truth = _gold_array(gold)
    # F1 needs only tp, predicted-YES and gold-YES counts; each is one gather-and-sum over all rows at once.
    counts = {
        key: mask[indices].sum(axis=1)
        for key, mask in {
            "tp_a": yes_a & truth,
            "tp_b": yes_b & truth,
            "yes_a": yes_a,
            "yes_b": yes_b,
            "gold": truth,
        }.items()
    }
    f1_a = _f1(counts["tp_a"], counts["yes_a"], counts["gold"])
    f1_b = _f1(counts["tp_b"], counts["yes_b"], counts["gold"])
    return f1_b - f1_a


def percentile_interval(values: np.ndarray, confidence: float) -> tuple[float, float]:
    """Equal-tailed percentile interval (numpy's default linear interpolation) at ``confidence``."""
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    alpha = 1 - confidence
    low, high = np.quantile(values, [alpha / 2, 1 - alpha / 2])
    return float(low), float(high)


def mcnemar_exact_p(b01: int, b10: int) -> float:
    """Exact two-sided McNemar p-value: binomial test of ``b01`` out of ``b01 + b10`` at 1/2; 1.0 if none."""
    if b01 + b10 == 0:
        return 1.0
    from scipy.stats import binomtest

    return float(binomtest(b01, b01 + b10, 0.5, alternative="two-sided").pvalue)


def paired_comparison(
    pred_a: Sequence[Prediction],
    pred_b: Sequence[Prediction],
    gold: Sequence[int],
    n_resamples: int = 10_000,
    seed: int = 0,
    confidence: float = 0.95,
) -> PairedComparison:
    """Compare condition ``b`` with condition ``a`` on the same instances (paired bootstrap and McNemar).

    The CI resamples instance indices with :func:`bootstrap_indices` (same rows for both conditions).
    Correctness for McNemar uses the same None -> NO mapping as the scores, so an unparsed answer on a
    gold-NO instance counts as correct.
    """
    n = _check_lengths(pred_a=pred_a, pred_b=pred_b, gold=gold)
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be >= 1, got {n_resamples}")
    scores_a = binary_scores(pred_a, gold)
    scores_b = binary_scores(pred_b, gold)
    truth = _gold_array(gold)
    right_a = _pred_array(pred_a, "pred_a")[0] == truth
    right_b = _pred_array(pred_b, "pred_b")[0] == truth
    b01 = int(np.sum(~right_a & right_b))
    b10 = int(np.sum(right_a & ~right_b))
    deltas = bootstrap_f1_deltas(pred_a, pred_b, gold, bootstrap_indices(n, n_resamples, seed))
    ci_low, ci_high = percentile_interval(deltas, confidence)
    return PairedComparison(
        n=n,
        f1_a=scores_a.f1,
        f1_b=scores_b.f1,
        delta=scores_b.f1 - scores_a.f1,
        ci_low=ci_low,
        ci_high=ci_high,
        confidence=confidence,
        n_resamples=n_resamples,
        seed=seed,
        b01=b01,
        b10=b10,
        mcnemar_p=mcnemar_exact_p(b01, b10),
        fn_a=scores_a.fn,
        fn_b=scores_b.fn,
        fp_a=scores_a.fp,
        fp_b=scores_b.fp,
    )


def min_instances_for_f1(f1_percent: float, decimals: int = 2, most: int = 10_000) -> int | None:
    """The fewest instances (tp + fp + fn; true negatives add none) whose F1(YES) rounds to ``f1_percent``
    at ``decimals`` places, or None up to ``most``. A reported F1 bounds the set it was measured on: 9.30
    needs 2 true positives and 39 errors, so at least 41 instances."""
    for n in range(1, most + 1):
        for tp in range(n + 1):
            if round(100 * 2 * tp / (tp + n), decimals) == round(f1_percent, decimals):
                return n
    return None


def seed_summary(values: Sequence[float]) -> MeanStd:
    """Mean and sample standard deviation (ddof=1) over seeds; with a single seed ``std`` is 0.0."""
    if len(values) == 0:
        raise ValueError("seed_summary needs at least one value")
    array = np.asarray(values, dtype=float)
    std = float(np.std(array, ddof=1)) if array.size > 1 else 0.0
    return MeanStd(mean=float(np.mean(array)), std=std, n=int(array.size))


def scores_by_group(
    pred: Sequence[Prediction],
    gold: Sequence[int],
    groups: Sequence[G],
    min_positives: int = 5,
) -> tuple[dict[G, Scores], list[OmittedGroup]]:
    """Scores per group (e.g. number of variables), in sorted group order.

    Groups with fewer than ``min_positives`` gold positives are not scored, since F1 on a handful of
    positives is not informative; they are returned in the second list so the caller can print why.
    """
    _check_lengths(pred=pred, gold=gold, groups=groups)
    # Validate everything up front: omitted groups never reach binary_scores.
    _pred_array(pred)
    truth = _gold_array(gold)
    if min_positives < 0:
        raise ValueError(f"min_positives must be >= 0, got {min_positives}")
    scored: dict[G, Scores] = {}
    omitted: list[OmittedGroup] = []
    for group in sorted(set(groups)):
        members = [i for i, g in enumerate(groups) if g == group]
        group_gold = [gold[i] for i in members]
        positives = int(truth[members].sum())
        if positives < min_positives:
            omitted.append(
                OmittedGroup(
                    group=group,
                    n=len(members),
                    positives=positives,
                    reason=(
                        f"group {group!r} omitted: {counted(positives, 'gold positive')} in "
                        f"{counted(len(members), 'instance')}, fewer than min_positives={min_positives}; "
                        "too few positives for an informative F1"
                    ),
                )
            )
        else:
            scored[group] = binary_scores([pred[i] for i in members], group_gold)
    return scored, omitted


def paired_by_group(
    pred_a: Sequence[Prediction],
    pred_b: Sequence[Prediction],
    gold: Sequence[int],
    groups: Sequence[G],
    min_positives: int = 5,
    n_resamples: int = 10_000,
    seed: int = 0,
    confidence: float = 0.95,
) -> tuple[dict[G, PairedComparison], list[OmittedGroup]]:
    """:func:`paired_comparison` of ``b`` against ``a`` within each group (e.g. number of variables, paper
    Figure 2), in sorted group order. Groups are omitted by the rule of :func:`scores_by_group` (it depends
    on the gold labels only), so per-group scores and per-group gains always cover the same groups."""
    _check_lengths(pred_a=pred_a, pred_b=pred_b, gold=gold, groups=groups)
    _pred_array(pred_a, "pred_a")
    kept, omitted = scores_by_group(pred_b, gold, groups, min_positives=min_positives)
    compared = {}
    for group in kept:
        members = [i for i, g in enumerate(groups) if g == group]
        compared[group] = paired_comparison(
            [pred_a[i] for i in members], [pred_b[i] for i in members], [gold[i] for i in members],
            n_resamples=n_resamples, seed=seed, confidence=confidence,
        )
    return compared, omitted


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """``n`` with its noun in the right number: ``1 gold positive``, ``2 gold positives``, ``0 instances``."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"


def cost_summary(records_by_condition: Mapping[str, Sequence[Usage]], baseline: str) -> list[CostRow]:
    """Mean tokens and latency per instance for each condition, with ratios to ``baseline``'s means.

    Rows follow the mapping's order. A ratio is NaN when the baseline's mean is 0 (e.g. latency not recorded).
    """
    if baseline not in records_by_condition:
        raise ValueError(f"baseline {baseline!r} not among conditions {list(records_by_condition)}")
    empty = [name for name, records in records_by_condition.items() if len(records) == 0]
    if empty:
        raise ValueError(f"conditions without records: {empty}")

    def mean(values: Sequence[float]) -> float:
        return sum(values) / len(values)

    def means(records: Sequence[Usage]) -> tuple[float, float]:
        return mean([r.total_tokens for r in records]), mean([r.latency_s for r in records])

    base_tokens, base_latency = means(records_by_condition[baseline])
    rows = []
    for condition, records in records_by_condition.items():
        tokens, latency = means(records)
        completion = sum(r.completion_tokens for r in records)
        reported = [r.reasoning_tokens for r in records if r.reasoning_tokens is not None]
        rows.append(
            CostRow(
                condition=condition,
                n=len(records),
                mean_prompt_tokens=mean([r.prompt_tokens for r in records]),
                mean_completion_tokens=completion / len(records),
                mean_reasoning_tokens=sum(reported) / len(records) if reported else math.nan,
                mean_total_tokens=tokens,
                token_ratio=tokens / base_tokens if base_tokens else math.nan,
                mean_latency_s=latency,
                ms_per_completion_token=1000 * sum(r.latency_s for r in records) / completion if completion else math.nan,
                latency_ratio=latency / base_latency if base_latency else math.nan,
            )
        )
    return rows


RATE_FIELDS = ("precision", "recall", "f1", "accuracy")
TABLE_COLUMNS = [f.name for f in fields(Scores) if f.name not in RATE_FIELDS] + [f"{r}_pct" for r in RATE_FIELDS]


def scores_table(named: Mapping[str, Scores]) -> pd.DataFrame:
    """One row per name: counts as ints, rates as percentages rounded to 2 decimals (``*_pct`` columns)."""
    rows = []
    for scores in named.values():
        row = asdict(scores)
        for rate in RATE_FIELDS:
            row[f"{rate}_pct"] = round(100 * row.pop(rate), 2)
        rows.append(row)
    import pandas as pd

    return pd.DataFrame(rows, index=list(named), columns=TABLE_COLUMNS)
