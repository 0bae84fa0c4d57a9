"""The book's figures draw from the tables' frames, including the empty cases a small run produces."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from cpdagthink import figures, readings, tables  # noqa: E402

from test_tables import two_seed_grid  # noqa: E402


def test_figures_draw_from_the_tables():
    runs = two_seed_grid()
    scores = tables.scores_frame(runs)
    gains, _ = tables.bin_gain_frame(runs, "structured", "baseline_enhanced", min_positives=2, n_resamples=100)
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
