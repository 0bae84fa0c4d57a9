"""The book's figures draw from the tables' frames, including the empty cases a small run produces."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from cpdagthink.analysis import tables  # noqa: E402
from cpdagthink.book import figures, readings

from scored_runs import two_seed_grid  # noqa: E402


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
    assert sorted(t.get_text() for t in fig.legends[0].get_texts()) == ["0: no difference", "paper (Figure 2)", "this run, generated:paraphrase, seed 0",
                                                                         "this run, test, seed 0"]
    from matplotlib.collections import PathCollection

    crosses = [list(c.get_offsets()[:, 1]) for c in ax.collections if isinstance(c, PathCollection)]
    assert sorted(v for c in crosses for v in c) == [5.3, 5.9, 13.6, 18.6]  # the paper's ID and OOD bins
    assert [t.get_text() for t in ax.get_xticklabels()] == ["5", "6"]
    plt.close(fig)


def _texts(fig) -> list[str]:
    ax = fig.axes[0]
    return ([t.get_text() for t in ax.get_yticklabels() + ax.get_xticklabels()] + [ax.get_xlabel(), ax.get_ylabel()]
            + [t.get_text() for legend in fig.legends for t in legend.get_texts()])


def test_figures_name_conditions_draw_zero_bars_the_always_yes_level_and_the_papers_value():
    runs = two_seed_grid()
    runs = runs | {("baseline_enhanced", s): [r.model_copy(update={"answer": "NO"}) for r in runs[("baseline_enhanced", s)]]
                   for s in (0, 1)}  # F1 0: a bar of zero length
    scores = tables.scores_frame(runs)
    fig = figures.f1_bars(scores, always_yes=40.0, paper={"structured": 86.36, "baseline_enhanced": 73.01})
    texts = _texts(fig)
    assert {"Structured Thinking", "BaselineEnhanced", "gold labels", "always YES on this sample (40.0)",
            "paper (Qwen3.5-27B)"} <= set(texts)
    assert not {"structured", "baseline_enhanced", "gold"} & set(texts)
    values = [t.get_text() for t in fig.axes[0].texts]
    assert "0.0" in values  # the zero bar is labelled with its value
    from matplotlib.collections import PathCollection

    crosses = [tuple(p) for c in fig.axes[0].collections if isinstance(c, PathCollection) for p in c.get_offsets()]
    assert sorted(x for x, _ in crosses) == [73.01, 86.36]
    errors = _texts(figures.error_bars(scores))
    assert {"false negatives", "false positives", "BaselineEnhanced"} <= set(errors) and "fn" not in errors
    probes = pd.DataFrame([{"agent": "m", "probe": "scramble_full", "drop_gold_pp": 0.0},
                           {"agent": "m", "probe": "drop_premise", "drop_gold_pp": 5.0}])
    texts = _texts(figures.probe_bars(probes, {"scramble_full": 12.0}))
    assert {"full scramble", "premise removed", "0: no difference", "paper (Qwen3.5-27B, Table 3)"} <= set(texts)
    kinds = pd.DataFrame({"condition": ["structured"], "kind": ["wrong_graph"], "errors": [2]})
    assert {"wrong graph state", "Structured Thinking"} <= set(_texts(figures.count_bars(kinds, "errors", "kind",
                                                                                        "condition", "errors")))
    plt.close("all")


def test_a_legend_sits_below_the_axis_label_and_overlaps_nothing():
    """The legend is the figure's, below the axes' label: an axes-anchored legend under a short axes sat on the
    label "number of variables"."""
    gains = pd.DataFrame([{"seed": 0, "variables": n, "n": 2, "positives": 1, "gain (pp)": 0.0, "CI low": 0.0,
                           "CI high": 0.0} for n in (5, 6)])
    bins = pd.DataFrame([{"num_variables": n, "condition": c, "accuracy": 50.0}
                         for n in (5, 6) for c in ("baseline_enhanced", "structured")])
    for fig in (figures.gain_points(readings.bin_gain_table({"test": gains})), figures.accuracy_bars(bins)):
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        ax, (legend,) = fig.axes[0], fig.legends
        box, label = legend.get_window_extent(renderer), ax.xaxis.label.get_window_extent(renderer)
        ticks = [t.get_window_extent(renderer) for t in ax.get_xticklabels()]
        assert ax.get_legend() is None and box.y1 <= label.y0  # below the label, none of it on the label
        assert not any(box.overlaps(t) for t in ticks) and box.y0 >= 0  # nor on a tick, and inside the figure
        plt.close(fig)
