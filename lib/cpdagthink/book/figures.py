"""The book's figures, one function each, drawn from the frames of :mod:`cpdagthink.analysis.tables`.

Each returns a matplotlib figure sized for the book's page; its caption (what it shows, the sample size and
whether a number is this run's or the paper's) lives in the page's markdown next to the ``{glue:figure}``.
Every axis and legend names conditions, probes and kinds by :func:`presentation.label` (never a raw key), every bar
carries its value (so a bar at zero is drawn and read), and a figure with a reference level draws it: the zero
line, the always-YES F1 of the sample, the paper's figure.
"""

from __future__ import annotations

from collections.abc import Mapping

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure

from . import presentation

WIDTH = 6.4
LEGEND_ROW_IN = 0.2  # inches of figure height per row of the legend
LABELS = {"gold": "gold labels", "corrected": "corrected labels", "fn": "false negatives", "fp": "false positives"}


def _figure(rows: int = 1) -> tuple[Figure, plt.Axes]:
    sns.set_theme(style="whitegrid")
    return plt.subplots(figsize=(WIDTH, 1.2 + 0.45 * max(rows, 2)), layout="constrained")


def _named(frame: pd.DataFrame, *columns: str) -> pd.DataFrame:
    """``frame`` with the keys in ``columns`` replaced by readable names."""
    return frame.assign(**{c: frame[c].map(lambda key: LABELS.get(key, presentation.label(key))) for c in columns})


def _values(ax: plt.Axes, digits: int = 1) -> None:
    """Each bar's value beside it, so a bar of zero length is still drawn and read."""
    for container in ax.containers:
        if hasattr(container, "datavalues"):
            ax.bar_label(container, fmt=f"%.{digits}f", padding=2, fontsize=8)


def _zero(ax: plt.Axes, vertical: bool) -> None:
    """The zero line, labelled in the legend."""
    (ax.axvline if vertical else ax.axhline)(0, color="black", lw=0.9, label="0: no difference")


def _paper_marks(ax: plt.Axes, paper: Mapping[str, float], order: list[str], label: str) -> None:
    """The paper's value of each category on a horizontal bar chart (categories in ``order``, readable names)."""
    marks = [(paper[key], order.index(presentation.label(key))) for key in paper if presentation.label(key) in order]
    if marks:
        x, y = zip(*marks)
        ax.scatter(x, y, marker="x", s=60, color="black", zorder=4, label=label)


def _legend(ax: plt.Axes) -> None:
    """The figure's legend below the axes and their label, where it hides no bar and no label; the figure grows
    by the legend's rows, so the axes keep their height."""
    handles, labels = ax.get_legend_handles_labels()
    if ax.get_legend():  # seaborn's own, inside the axes
        ax.get_legend().remove()
    if handles:
        fig = ax.get_figure()
        fig.set_figheight(fig.get_figheight() + LEGEND_ROW_IN * -(-len(labels) // 2))
        fig.legend(handles, labels, fontsize=8, loc="outside lower center", ncol=2, frameon=False)


def f1_bars(scores: pd.DataFrame, hue: str | None = "labels", always_yes: float | None = None,
            paper: Mapping[str, float] | None = None) -> Figure:
    """F1(YES) per condition (bars: mean over seeds; whiskers: sd when there are several seeds), with the
    sample's ``always_yes`` F1 as a dashed line and ``paper``'s F1 per condition (key to value) as crosses."""
    data = _named(scores if hue else scores[scores["labels"] == "gold"], "condition", "labels")
    fig, ax = _figure(data["condition"].nunique() * (2 if hue else 1))
    sns.barplot(data, x="F1", y="condition", hue=hue, errorbar="sd", ax=ax)
    _values(ax)
    if always_yes is not None:
        ax.axvline(always_yes, color="grey", ls="--", lw=1, label=f"always YES on this sample ({always_yes:.1f})")
    _paper_marks(ax, paper or {}, list(dict.fromkeys(data["condition"])), "paper (Qwen3.5-27B)")
    ax.set(xlabel="F1(YES) %", ylabel="", xlim=(0, 105))
    _legend(ax)
    return fig


def error_bars(scores: pd.DataFrame) -> Figure:
    """False negatives and false positives per condition (gold labels, mean over seeds)."""
    errors = scores[scores["labels"] == "gold"].melt(id_vars=["condition", "seed"], value_vars=["fn", "fp"],
                                                     var_name="error", value_name="count")
    errors = _named(errors, "condition", "error")
    fig, ax = _figure(2 * errors["condition"].nunique())
    sns.barplot(errors, x="count", y="condition", hue="error", errorbar=None, ax=ax)
    _values(ax)
    ax.set(xlabel="errors against gold labels (mean over seeds)", ylabel="")
    _legend(ax)
    return fig


def gain_points(gains: pd.DataFrame, x: str = "variables") -> Figure:
    """Paired gain (pp) with its bootstrap 95% CI per bin (or per seed), one point per seed and split (when
    the frame has a ``split`` column), the zero line, and the paper's gain as a cross where the frame has one."""
    fig, ax = _figure()
    keys = ["split", "seed"] if "split" in gains.columns else ["seed"]
    groups = list(gains.groupby(keys, sort=False))
    ticks = sorted(gains[x].unique())
    paper_drawn = False
    for k, (key, group) in enumerate(groups):
        key = key if isinstance(key, tuple) else (key,)
        # Side by side within a bin, so intervals of two splits or seeds do not hide each other.
        where = group[x].map(ticks.index) + 0.15 * (k - (len(groups) - 1) / 2)
        ax.errorbar(where, group["gain (pp)"],
                    yerr=[group["gain (pp)"] - group["CI low"], group["CI high"] - group["gain (pp)"]], fmt="o",
                    capsize=4, label="this run, " + ", ".join(f"seed {int(v)}" if n == "seed" else str(v)
                                                              for n, v in zip(keys, key)))
        if "paper gain (pp)" in group.columns and group["paper gain (pp)"].notna().any():
            ax.scatter(where, group["paper gain (pp)"], marker="x", color="black", zorder=3,
                       label=None if paper_drawn else "paper (Figure 2)")
            paper_drawn = True
    ax.set_xticks(range(len(ticks)), [str(t) for t in ticks])
    _zero(ax, vertical=False)
    ax.set(xlabel="number of variables" if x == "variables" else presentation.label(x),
           ylabel="gain (pp),\nstructured\nminus baseline")
    _legend(ax)
    return fig


def accuracy_bars(bins: pd.DataFrame) -> Figure:
    """Accuracy per number-of-variables bin and condition (every bin, however few its positives)."""
    fig, ax = _figure()
    sns.barplot(_named(bins, "condition"), x="num_variables", y="accuracy", hue="condition", errorbar=None, ax=ax)
    _values(ax)
    ax.set(xlabel="number of variables", ylabel="accuracy % (gold)", ylim=(0, 110))
    _legend(ax)
    return fig


def stress_bars(stress: pd.DataFrame) -> Figure:
    """F1 per stress family and condition: this run's and the paper's, side by side."""
    long = stress.reset_index().melt(id_vars=["family", "condition"], value_vars=["this run F1", "paper F1"],
                                     var_name="source", value_name="F1").dropna(subset=["F1"])
    long = _named(long, "condition").assign(source=lambda f: f["source"].str.removesuffix(" F1"))
    grid = sns.catplot(long, kind="bar", x="family", y="F1", hue="condition", col="source", height=3,
                       aspect=WIDTH / 6)
    for ax in grid.axes.flat:
        _values(ax)
    grid.set_axis_labels("", "F1(YES) %")
    grid.set_titles("{col_name}")
    grid.legend.set_title("")
    return grid.figure


def probe_bars(table: pd.DataFrame, paper: Mapping[str, float] | None = None) -> Figure:
    """F1 drop under each probe (gold labels, mean over seeds), per agent, with the zero line and ``paper``'s
    drop per probe (key to value) as crosses."""
    data = _named(table, "probe")
    fig, ax = _figure(data["probe"].nunique() * data["agent"].nunique())
    sns.barplot(data, x="drop_gold_pp", y="probe", hue="agent", errorbar=None, ax=ax)
    _values(ax)
    _zero(ax, vertical=True)
    _paper_marks(ax, paper or {}, list(dict.fromkeys(data["probe"])), "paper (Qwen3.5-27B, Table 3)")
    ax.set(xlabel="F1 drop vs the unprobed run (pp, gold labels)", ylabel="")
    _legend(ax)
    return fig


def count_bars(long: pd.DataFrame, x: str, y: str, hue: str, xlabel: str) -> Figure:
    """Horizontal bars of counts (violations by kind, errors by localised cause); zero counts are left out."""
    long = long[long[x] > 0]
    fig, ax = _figure(long[y].nunique() * max(long[hue].nunique(), 1))
    if long.empty:
        ax.text(0.5, 0.5, "none in this run", ha="center", va="center", transform=ax.transAxes)
        ax.set(xlabel=xlabel, xticks=[], yticks=[])
        return fig
    sns.barplot(_named(long, y, hue), x=x, y=y, hue=hue, errorbar=None, ax=ax)
    _values(ax, 0)
    ax.set(xlabel=xlabel, ylabel="")
    _legend(ax)
    return fig
