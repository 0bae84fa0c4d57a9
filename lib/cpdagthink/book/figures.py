"""The book's figures, one function each, drawn from the frames of :mod:`cpdagthink.analysis.tables`.

Each returns a matplotlib figure sized for the book's page; its caption (what it shows, the sample size and
whether a number is this run's or the paper's) lives in the page's markdown next to the ``{glue:figure}``.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure

WIDTH = 6.4


def _figure(rows: int = 1) -> tuple[Figure, plt.Axes]:
    sns.set_theme(style="whitegrid")
    return plt.subplots(figsize=(WIDTH, 1.2 + 0.45 * max(rows, 2)))


def f1_bars(scores: pd.DataFrame, hue: str | None = "labels") -> Figure:
    """F1(YES) per condition (bars: mean over seeds; whiskers: sd when there are several seeds)."""
    data = scores if hue else scores[scores["labels"] == "gold"]
    fig, ax = _figure(data["condition"].nunique() * (2 if hue else 1))
    sns.barplot(data, x="F1", y="condition", hue=hue, errorbar="sd", ax=ax)
    ax.set(xlabel="F1(YES) %", ylabel="", xlim=(0, 100))
    return fig


def error_bars(scores: pd.DataFrame) -> Figure:
    """False negatives and false positives per condition (gold labels, mean over seeds)."""
    errors = scores[scores["labels"] == "gold"].melt(id_vars=["condition", "seed"], value_vars=["fn", "fp"],
                                                     var_name="error", value_name="count")
    fig, ax = _figure(2 * errors["condition"].nunique())
    sns.barplot(errors, x="count", y="condition", hue="error", errorbar=None, ax=ax)
    ax.set(xlabel="errors against gold labels", ylabel="")
    return fig


def gain_points(gains: pd.DataFrame, x: str = "variables") -> Figure:
    """Paired gain (pp) with its bootstrap 95% CI per bin (or per seed), one point per seed and split (when
    the frame has a ``split`` column), and the paper's gain as a cross where the frame has one."""
    fig, ax = _figure()
    keys = ["split", "seed"] if "split" in gains.columns else ["seed"]
    groups = list(gains.groupby(keys, sort=False))
    for k, (key, group) in enumerate(groups):
        key = key if isinstance(key, tuple) else (key,)
        # Side by side within a bin, so intervals of two splits or seeds do not hide each other.
        where = group[x].map(lambda v: sorted(gains[x].unique()).index(v)) + 0.15 * (k - (len(groups) - 1) / 2)
        ax.errorbar(where, group["gain (pp)"],
                    yerr=[group["gain (pp)"] - group["CI low"], group["CI high"] - group["gain (pp)"]],
                    fmt="o", capsize=4, label=", ".join(f"{n} {v}" if n == "seed" else str(v) for n, v in zip(keys, key)))
        if "paper gain (pp)" in group.columns and group["paper gain (pp)"].notna().any():
            ax.scatter(where, group["paper gain (pp)"], marker="x", color="black", zorder=3)
    ticks = sorted(gains[x].unique())
    ax.set_xticks(range(len(ticks)), [str(t) for t in ticks])
    ax.axhline(0, color="black", lw=0.8)
    ax.set(xlabel="number of variables" if x == "variables" else x, ylabel="gain (pp)")
    if len(groups) > 1:
        ax.legend()
    return fig


def accuracy_bars(bins: pd.DataFrame) -> Figure:
    """Accuracy per number-of-variables bin and condition (every bin, however few its positives)."""
    fig, ax = _figure()
    sns.barplot(bins, x="num_variables", y="accuracy", hue="condition", errorbar=None, ax=ax)
    ax.set(xlabel="number of variables", ylabel="accuracy % (gold)", ylim=(0, 100))
    return fig


def stress_bars(stress: pd.DataFrame) -> Figure:
    """F1 per stress family and condition: this run's and the paper's, side by side."""
    long = stress.reset_index().melt(id_vars=["family", "condition"], value_vars=["this run F1", "paper F1"],
                                     var_name="source", value_name="F1").dropna(subset=["F1"])
    grid = sns.catplot(long, kind="bar", x="family", y="F1", hue="condition", col="source", height=3,
                       aspect=WIDTH / 6)
    grid.set_axis_labels("", "F1(YES) %")
    return grid.figure


def probe_bars(table: pd.DataFrame) -> Figure:
    """F1 drop under each probe (gold labels, mean over seeds), per agent."""
    fig, ax = _figure(table["probe"].nunique() * table["agent"].nunique())
    sns.barplot(table, x="drop_gold_pp", y="probe", hue="agent", errorbar=None, ax=ax)
    ax.axvline(0, color="black", lw=0.8)
    ax.set(xlabel="F1 drop vs the unprobed run (pp, gold labels)", ylabel="")
    return fig


def count_bars(long: pd.DataFrame, x: str, y: str, hue: str, xlabel: str) -> Figure:
    """Horizontal bars of counts (violations by kind, errors by localised cause); zero counts are left out."""
    long = long[long[x] > 0]
    fig, ax = _figure(long[y].nunique() * max(long[hue].nunique(), 1))
    if long.empty:
        ax.text(0.5, 0.5, "none in this run", ha="center", va="center", transform=ax.transAxes)
        ax.set(xlabel=xlabel, xticks=[], yticks=[])
        return fig
    sns.barplot(long, x=x, y=y, hue=hue, errorbar=None, ax=ax)
    ax.set(xlabel=xlabel, ylabel="")
    return fig
