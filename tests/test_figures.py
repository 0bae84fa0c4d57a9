"""The book's figures draw from the tables' frames, including the empty cases a small run produces."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from cpdagthink.analysis import tables  # noqa: E402
from cpdagthink.book import figures, readings

from test_tables import two_seed_grid  # noqa: E402


def test_figures_draw_from_the_tables():
    runs = two_seed_grid()
    scores = tables.scores_frame(runs)
    gains, _ = tables.bin_gain_frame(runs, "structured", "baseline_enhanced", min_positives=2, n_resamples=100,
                                     min_variables=0)
    drawn = [figures.f1_bars(scores), figures.f1_bars(scores, hue=None), figures.error_bars(scores),
             figures.gain_points(gains), figures.accuracy_bars(tables.bins_frame(runs)),
             figures.stress_bars(readings.stress_table({}))]
    for fig in drawn:
        assert fig.axes and fig.get_figwidth() <= figures.WIDTH * 1.1
        plt.close(fig)
    # one point (with its interval) per seed and scored bin
    points = sum(len(line.get_xdata()) for line in drawn[3].axes[0].lines if line.get_marker() == "o")
    assert points == len(gains) == 4


def test_count_bars_leave_out_zeros_and_say_when_there_is_nothing():
    empty = pd.DataFrame({"condition": ["a", "b"], "kind": ["x", "y"], "errors": [0, 0]})
    fig = figures.count_bars(empty, "errors", "kind", "condition", "errors")
    assert [t.get_text() for t in fig.axes[0].texts] == ["none in this run"]
    assert fig.get_figheight() < 3
    some = pd.DataFrame({"condition": ["a", "b"], "kind": ["x", "y"], "errors": [2, 0]})
    fig = figures.count_bars(some, "errors", "kind", "condition", "errors")
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == ["x"]
    plt.close("all")


def test_gain_points_draw_each_split_beside_the_papers_gain():
    gains = pd.DataFrame([{"seed": 0, "variables": n, "n": 10, "positives": 4, "gain (pp)": 1.0, "CI low": -9.0,
                           "CI high": 11.0} for n in (5, 6)])
    table = readings.bin_gain_table({"test": gains, "generated:paraphrase": gains})
    fig = figures.gain_points(table)
    ax = fig.axes[0]
    assert sorted(t.get_text() for t in ax.get_legend().get_texts()) == ["generated:paraphrase, seed 0", "test, seed 0"]
    from matplotlib.collections import PathCollection

    crosses = [list(c.get_offsets()[:, 1]) for c in ax.collections if isinstance(c, PathCollection)]
    assert sorted(v for c in crosses for v in c) == [5.3, 5.9, 13.6, 18.6]  # the paper's ID and OOD bins
    assert [t.get_text() for t in ax.get_xticklabels()] == ["5", "6"]
    plt.close(fig)
