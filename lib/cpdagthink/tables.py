"""Tables the book shows: run records turned into scores, paired gains, seed summaries, bins and cost, and the
paper's figures beside them.

A *run grid* maps ``(condition, seed)`` to that run's records, all on the same instances in the same order.
Every table here is narrow enough for the book's page (at most about eight columns); wide views are split
into two tables rather than scrolled. Records are :class:`~cpdagthink.records.RunRecord`; their fields are
read only by the small helpers at the top.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pandas as pd

from .data import PROJECT_ROOT
from .records import RunRecord
from .metrics import (
    OmittedGroup,
    Usage,
    cost_summary,
    paired_by_group,
    paired_comparison,
    scores_against,
    scores_by_group,
    seed_summary,
)

PAPER_CSV = PROJECT_ROOT / "data" / "paper_reported.csv"

Runs = Mapping[tuple[str, int], Sequence[RunRecord]]

# ------------------------------------------------------------------------------------------- record access


def usage(record: RunRecord) -> Usage:
    """Tokens and latency of one instance, summed over its turns."""
    turns = record.turns
    return Usage(sum(t.prompt_tokens for t in turns), sum(t.completion_tokens for t in turns),
                 sum(t.latency_s for t in turns))


def _columns(records: Sequence[RunRecord], labels: str = "gold") -> tuple[list[int | None], list[int]]:
    """Predictions (None: no answer, scored as NO and counted apart) and the truth to score them against
    (``gold`` or ``corrected``, the oracle's labels; a row the oracle cannot label keeps its published one,
    and :func:`scores_frame` counts such rows)."""
    truth = [r.gold_label if labels == "gold" or r.oracle_label is None else r.oracle_label for r in records]
    return [r.prediction for r in records], truth


def _variables(records: Sequence[RunRecord]) -> list[int]:
    return [r.num_variables for r in records]


# ------------------------------------------------------------------------------------------------- scores


def scores_frame(runs: Runs) -> pd.DataFrame:
    """One row per (condition, seed, labels) with F1, precision, recall, accuracy (%) and counts, including
    unparsed answers, instances cut off by the token budget, and (``published only``) rows the oracle could
    not label, which the corrected scores score against their published label."""
    rows = []
    for (condition, seed), records in runs.items():
        pred, gold = _columns(records, "gold")
        _, corrected = _columns(records, "corrected")
        truncated = sum(r.cut_off for r in records)
        unlabelled = sum(r.oracle_label is None for r in records)
        for labels, s in scores_against(pred, gold, corrected).items():
            rows.append({"condition": condition, "seed": seed, "labels": labels, "n": s.n,
                         "F1": 100 * s.f1, "precision": 100 * s.precision, "recall": 100 * s.recall,
                         "accuracy": 100 * s.accuracy, "tp": s.tp, "fp": s.fp, "fn": s.fn, "tn": s.tn,
                         "unparsed": s.unparsed, "cut off": truncated,
                         "published only": unlabelled if labels == "corrected" else 0})
    return pd.DataFrame(rows)


def score_table(scores: pd.DataFrame, labels: str = "gold") -> pd.DataFrame:
    """The rates of :func:`scores_frame` against one set of labels, one row per (condition, seed)."""
    return (scores[scores["labels"] == labels]
            .set_index(["condition", "seed"])[["n", "F1", "precision", "recall", "accuracy"]])


def count_table(scores: pd.DataFrame, labels: str = "gold") -> pd.DataFrame:
    """The counts of :func:`scores_frame` against one set of labels, one row per (condition, seed)."""
    return (scores[scores["labels"] == labels]
            .set_index(["condition", "seed"])[["tp", "fp", "fn", "tn", "unparsed", "cut off"]])


def seed_frame(scores: pd.DataFrame, labels: str = "gold") -> pd.DataFrame:
    """Mean and sample standard deviation of F1 across seeds, per condition (sd 0 with one seed)."""
    rows = []
    for condition, group in scores[scores["labels"] == labels].groupby("condition", sort=False):
        summary = seed_summary(list(group["F1"]))
        rows.append({"condition": condition, "seeds": summary.n, "F1 mean": summary.mean, "F1 sd": summary.std})
    return pd.DataFrame(rows)


# ------------------------------------------------------------------------------------------ paired gains



def paired_frame(runs: Runs, target: str, others: Iterable[str], labels: str = "gold",
                 n_resamples: int = 10_000) -> pd.DataFrame:
    """``target`` against each other condition on the same instances, one row per seed (paper §4.2, App. B):
    F1 of both, the gain (target minus other) with its own bootstrap 95% CI and exact McNemar p, and the
    false-negative / false-positive shifts (Table 5). The bootstrap of seed ``s`` is seeded with ``s``."""
    others = list(others)
    columns = ["comparison", "seed", "n", "F1 other", f"F1 {target}", "gain (pp)", "CI low", "CI high",
               "McNemar p", "FN other", f"FN {target}", "FP other", f"FP {target}"]
    rows = []
    for (condition, seed), records in runs.items():
        if condition not in others or (target, seed) not in runs:
            continue
        pred_a, truth = _columns(records, labels)
        pred_b, _ = _columns(runs[(target, seed)], labels)
        c = paired_comparison(pred_a, pred_b, truth, n_resamples=n_resamples, seed=seed)
        rows.append({"comparison": f"{target} vs {condition}", "seed": seed, "n": c.n, "F1 other": 100 * c.f1_a,
                     f"F1 {target}": 100 * c.f1_b, "gain (pp)": 100 * c.delta, "CI low": 100 * c.ci_low,
                     "CI high": 100 * c.ci_high, "McNemar p": c.mcnemar_p, "FN other": c.fn_a,
                     f"FN {target}": c.fn_b, "FP other": c.fp_a, f"FP {target}": c.fp_b})
    return pd.DataFrame(rows, columns=columns)


def _by_other(paired: pd.DataFrame) -> pd.DataFrame:
    """Rows named by the other condition of each comparison and the seed (short enough for the page)."""
    other = paired["comparison"].str.split(" vs ", n=1).str[1]
    return paired.assign(other=other).set_index(["other", "seed"])


def gain_table(paired: pd.DataFrame) -> pd.DataFrame:
    """The per-seed gains of :func:`paired_frame` (F1, gain, CI, McNemar p), without the error shifts;
    rows are named by the other condition and the seed."""
    return _by_other(paired)[[c for c in paired.columns if c not in ("comparison", "seed")
                              and not c.startswith(("FN", "FP"))]]


def error_shift_table(paired: pd.DataFrame) -> pd.DataFrame:
    """The per-seed false-negative and false-positive counts of :func:`paired_frame` (paper Table 5)."""
    return _by_other(paired)[["n"] + [c for c in paired.columns if c.startswith(("FN", "FP"))]]


def gain_seed_frame(paired: pd.DataFrame) -> pd.DataFrame:
    """Across seeds, per comparison: mean and sd of the gain (never of the CI bounds or the p-values), and
    on how many seeds the seed's own interval excludes zero."""
    rows = []
    for comparison, group in paired.groupby("comparison", sort=False):
        gain = seed_summary(list(group["gain (pp)"]))
        excludes = int(((group["CI low"] > 0) | (group["CI high"] < 0)).sum())
        rows.append({"comparison": comparison, "seeds": gain.n, "gain mean": gain.mean, "gain sd": gain.std,
                     "CI excludes 0": f"{excludes} of {gain.n}"})
    return pd.DataFrame(rows, columns=["comparison", "seeds", "gain mean", "gain sd", "CI excludes 0"])


# ------------------------------------------------------------------------------------ number of variables


def by_variables_frame(runs: Runs, labels: str = "gold",
                       min_positives: int = 3) -> tuple[pd.DataFrame, list[str]]:
    """F1 per number of variables; bins with too few positives are omitted and the omissions returned."""
    rows, omitted = [], []
    for (condition, seed), records in runs.items():
        pred, truth = _columns(records, labels)
        kept, dropped = scores_by_group(pred, truth, _variables(records), min_positives=min_positives)
        rows += [{"condition": condition, "seed": seed, "num_variables": n, "F1": 100 * s.f1, "n": s.n}
                 for n, s in kept.items()]
        omitted += [f"{condition} (seed {seed}): {o.reason}" for o in dropped]
    return pd.DataFrame(rows), omitted


def bins_frame(runs: Runs, labels: str = "gold") -> pd.DataFrame:
    """Every number-of-variables bin, however few its positives: instances, positives, accuracy (%) and
    unparsed answers. Accuracy stays readable where F1 is omitted for lack of positives."""
    rows = []
    for (condition, seed), records in runs.items():
        pred, truth = _columns(records, labels)
        every, _ = scores_by_group(pred, truth, _variables(records), min_positives=0)
        rows += [{"condition": condition, "seed": seed, "num_variables": n, "n": s.n, "positives": s.tp + s.fn,
                  "accuracy": 100 * s.accuracy, "unparsed": s.unparsed} for n, s in every.items()]
    return pd.DataFrame(rows)


BIN_GAIN_COLUMNS = ["seed", "variables", "n", "positives", "F1 baseline", "F1 target", "gain (pp)", "CI low",
                    "CI high", "McNemar p"]


def bin_gain_frame(runs: Runs, target: str, baseline: str, labels: str = "gold", min_positives: int = 3,
                   n_resamples: int = 10_000) -> tuple[pd.DataFrame, list[OmittedGroup]]:
    """Per seed and number of variables, the paired gain of ``target`` over ``baseline`` (paper Figure 2)
    with its bootstrap 95% CI and McNemar p. Bins with fewer than ``min_positives`` gold positives are
    omitted; the omitted bins (the same on every seed, since they depend on the labels only) are returned
    once each."""
    rows, omitted = [], {}
    for (condition, seed), records in runs.items():
        if condition != baseline or (target, seed) not in runs:
            continue
        pred_a, truth = _columns(records, labels)
        pred_b, _ = _columns(runs[(target, seed)], labels)
        compared, dropped = paired_by_group(pred_a, pred_b, truth, _variables(records), min_positives=min_positives,
                                            n_resamples=n_resamples, seed=seed)
        omitted.update({o.group: o for o in dropped})
        positives = pd.Series(truth).groupby(_variables(records)).sum()
        rows += [{"seed": seed, "variables": n, "n": c.n, "positives": int(positives[n]),
                  "F1 baseline": 100 * c.f1_a, "F1 target": 100 * c.f1_b, "gain (pp)": 100 * c.delta,
                  "CI low": 100 * c.ci_low, "CI high": 100 * c.ci_high, "McNemar p": c.mcnemar_p}
                 for n, c in compared.items()]
    return pd.DataFrame(rows, columns=BIN_GAIN_COLUMNS), [omitted[k] for k in sorted(omitted)]


def bin_tables(bins: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """:func:`bins_frame` in two narrow tables: each bin's instances and positives (the same for every
    condition and seed), and accuracy with one column per condition (mean over seeds)."""
    sizes = bins.groupby("num_variables")[["n", "positives"]].first()
    accuracy = bins.pivot_table(index="num_variables", columns="condition", values="accuracy", sort=False)
    return sizes, accuracy.rename(columns=lambda c: f"accuracy {c}")


# --------------------------------------------------------------------------------------------------- cost


def cost_frame(runs: Runs, baseline: str = "baseline_enhanced") -> pd.DataFrame:
    """Mean tokens and model time per instance, and the ratios to the one-turn baseline (§7.3). Latency of
    cached calls is the latency measured when they were first made."""
    by_condition: dict[str, list[Usage]] = {}
    for (condition, _), records in runs.items():
        by_condition.setdefault(condition, []).extend(usage(r) for r in records)
    if baseline not in by_condition:
        return pd.DataFrame()
    return pd.DataFrame([row.__dict__ for row in cost_summary(by_condition, baseline)])


# -------------------------------------------------------------------------------------------------- paper


def paper(keys: Iterable[str] | None = None, section: str | None = None) -> pd.DataFrame:
    """Paper-reported figures (``data/paper_reported.csv``) in the order asked for, labelled as the paper's.
    Asking for a key the file does not hold is an error, so a page never silently loses a figure."""
    table = pd.read_csv(PAPER_CSV)
    if keys is not None:
        keys = list(keys)
        missing = sorted(set(keys) - set(table["key"]))
        if missing:
            raise KeyError(f"not in {PAPER_CSV.name}: {missing}")
        table = table.set_index("key").loc[keys].reset_index()
    if section is not None:
        table = table[table["section"].str.contains(section, regex=False)]
    return table.assign(source="paper").reset_index(drop=True)


def markdown_table(frame: pd.DataFrame, digits: int = 2) -> str:
    """A frame as a MyST/commonmark pipe table (index first, missing values as a dash), for pasting into a
    page's prose where it takes the book's own table style."""
    flat = frame.reset_index()

    def cell(value: Any) -> str:
        if isinstance(value, float):
            return "—" if pd.isna(value) else f"{value:.{digits}f}"
        return "—" if value is None or value is pd.NA else str(value).replace("|", "\\|")

    lines = ["| " + " | ".join(map(str, flat.columns)) + " |", "|" + "---|" * len(flat.columns)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in flat.itertuples(index=False)]
    return "\n".join(lines)


def paper_view(keys: Iterable[str], columns: Sequence[str] = ("key", "value", "metric", "model", "section")
               ) -> pd.DataFrame:
    """Paper figures for display: a few columns, indexed by key, each value as the paper prints it."""
    table = paper(keys)[list(columns)].set_index("key")
    return table.assign(value=table["value"].map(lambda v: f"{v:g}"))
