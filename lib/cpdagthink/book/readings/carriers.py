"""Chapter 07, what carries the gain: the design's cells, each factor's effect with its paired interval, a verdict
per factor in words, and how each effect sits beside the paper's one-factor removal.

Every sentence is computed from the effects (:mod:`cpdagthink.analysis.factorial`); when the design did not run,
the page says so and shows the design, its cost and the command that runs it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import pandas as pd

from ...analysis import factorial
from ...analysis.markup import Markdown, code
from ...analysis.metrics import counted
from ...causal.instance import Instance
from ...method.design import BINARY, FACTORS, LEVEL_WORDS, Point
from ...run.records import RunRecord
from ..components import Cost
from .glue import Headline, Reading, signed

# Which of the paper's one-factor removals each factor corresponds to (paper §5, §3.3, §8).
REMOVALS = {
    "constraint": "no_constrained_decoding (§5: the regex removed, tool-call syntax kept)",
    "field_names": "none: the paper keeps its field names throughout (§8 names them as bundled)",
    "delivery": "none: every structured run gets a tool result (§8: tool-result formatting bundled)",
    "instruction": "none: every structured run gets the E.2 template (§8: turn-2 instructions bundled)",
    "typed vs lightly structured prose": "none: §8 proposes lightly structured prose as future work",
    "lightly structured vs free prose": "none",
    "typed (the paper's point) vs free prose": "twoturn_prose_pc (§3.3, §4.2: the PC-scaffolded prose control)",
}
# The page's key figure, beside the paper's drop without the regex (§5): the paper's is in F1, this in accuracy.
HEADLINE = "the regex's main effect on accuracy (the paper: F1 drop without it)"
# The one-factor removal from the paper's point that this run can make itself, for each factor.
REMOVED_CELL = {f: Point(**{f: FACTORS[f][1]}) for f in BINARY}


def verdict_words(effect: factorial.Effect) -> str:
    """A factor's verdict: what the paper's level carries, or that no effect is detectable at this n."""
    interval = f"[{signed(effect.low)}, {signed(effect.high)}]"
    if effect.low == effect.high == effect.estimate == 0:
        return "no difference: the cells compared answered every instance alike"
    if effect.low > 0:
        return f"carries {signed(effect.estimate)} pp {interval}"
    if effect.high < 0:
        return f"costs {signed(effect.estimate)} pp {interval}"
    return f"no effect detectable at this n: the interval is {interval}"


def _removal(cells: factorial.Cells, factor: str, resamples: int) -> factorial.Effect | None:
    """The paper's point minus the cell with ``factor`` alone at its other level, on this run (a one-factor
    removal, as §5 makes them), when both cells ran."""
    other = REMOVED_CELL.get(factor)
    if other is None or Point() not in cells.points or other not in cells.points:
        return None
    pair = factorial.Cells((Point(), other), cells.ids, cells.correct[[cells.row(Point()), cells.row(other)]],
                           cells.yes[[cells.row(Point()), cells.row(other)]], cells.truth)
    return factorial.effects(pair, factors=[factor], resamples=resamples)[0]


def _agreement(effect: factorial.Effect, removal: factorial.Effect | None) -> str:
    if removal is None:
        return "no removal of this factor alone ran"
    words = f"removal alone {signed(removal.estimate)} pp [{signed(removal.low)}, {signed(removal.high)}]"
    if removal.detected != effect.detected or (effect.detected and (effect.estimate > 0) != (removal.estimate > 0)):
        return words + ": disagrees with the factorial (an interaction, or noise at this n)"
    return words + ": agrees"


def verdict_table(effects: Sequence[factorial.Effect], cells: factorial.Cells, refused: Mapping[str, str],
                  resamples: int = 2000) -> pd.DataFrame:
    """One row per factor and intermediate contrast: its verdict in words, the paper's removal it corresponds to,
    and this run's own one-factor removal beside the factorial's effect. A factor whose cells the backend
    refused says so."""
    rows = []
    for e in effects:
        if e.kind == "interaction":
            continue
        rows.append({"factor": e.name, "verdict": verdict_words(e), "the paper's removal": REMOVALS.get(e.name, ""),
                     "this run's removal": _agreement(e, _removal(cells, e.name, resamples))
                     if e.kind == "main" else ""})
    for name, why in refused.items():
        rows.append({"factor": name, "verdict": f"not applied on this backend: {why}",
                     "the paper's removal": "", "this run's removal": ""})
    return pd.DataFrame(rows)


def interaction_figure(cells: factorial.Cells, factors: Sequence[str] = BINARY):
    """Mean accuracy of the typed cells at each pair of levels, one panel per pair of varied factors (parallel
    lines: no interaction)."""
    import matplotlib.pyplot as plt

    varied = [f for f in factors if len({getattr(p, f) for p in cells.points if p.intermediate == "typed"}) > 1]
    pairs = [(a, b) for i, a in enumerate(varied) for b in varied[i + 1:]]
    figure, axes = plt.subplots(1, max(len(pairs), 1), figsize=(3.2 * max(len(pairs), 1), 3), squeeze=False)
    for ax, (a, b) in zip(axes[0], pairs):
        for level, group in factorial.interaction_means(cells, a, b).groupby(b, sort=False):
            ax.plot(group[a], group["accuracy"], marker="o", label=str(level))
        ax.legend(fontsize=7, title=b, title_fontsize=7)
        ax.set_xlabel(a, fontsize=8)
        ax.tick_params(labelsize=7)
    if not pairs:
        axes[0][0].text(0.5, 0.5, "fewer than two factors varied: no interaction to plot", ha="center", fontsize=8)
    axes[0][0].set_ylabel("accuracy (%)")
    figure.tight_layout()
    return figure


def design_phrase(cells: Sequence[Point], design: str, cost: Cost, instances: int) -> Markdown:
    """What the design is and what it costs, before it runs."""
    typed = [p for p in cells if p.intermediate == "typed"]
    varied = [f for f in BINARY if len({getattr(p, f) for p in typed}) > 1]
    words = ", ".join(f"{f} ({' | '.join(LEVEL_WORDS[f].values())})" for f in varied)
    return Markdown(f"{counted(len(typed), 'typed cell')} ({'the half fraction' if design == 'half' else 'every combination'}"
                    f" of {words or 'no factor'}) and {counted(len(cells) - len(typed), 'prose arm')}, on "
                    f"{counted(instances, 'instance')}: {counted(cost.runs, 'run')}, at most "
                    f"{counted(cost.calls, 'model call')} and {cost.tokens:,} tokens of budget.")


def design_table(cells: Sequence[Point], refused: Mapping[str, str]) -> pd.DataFrame:
    """The design's cells: each one's levels, and whether it runs on this backend or is refused (with why)."""
    return pd.DataFrame([{"cell": p.name, **{f: LEVEL_WORDS[f][getattr(p, f)] for f in FACTORS},
                          "on this backend": f"refused: {refused[p.name]}" if p.name in refused else "runs"}
                         for p in cells])


def not_run_phrase(command: str) -> Markdown:
    """Why the design did not run (that it did not is the page's verdict, said once on its first screen)."""
    return Markdown("The design's runs are more than the default book's time target allows, and this build holds "
                    "no complete records of them. Run it with ", code(command), ".")


def components_reading(cells: factorial.Cells | None, effects: Sequence[factorial.Effect],
                       refused: Mapping[str, str], design_text: Markdown, command: str,
                       cells_run: Sequence[Point] = ()) -> Reading:
    """The page's numbers, phrases and tables; ``cells`` None when the design did not run; ``cells_run`` the
    design's cells, shown with their levels whether or not they ran."""
    reading = Reading(phrases={"design": design_text}, tables={"design_cells": design_table(cells_run, refused)})
    if cells is None:
        reading.phrases["status"] = not_run_phrase(command)
        reading.headline = Headline(HEADLINE, "ablation_no_constrained_drop",
                                    missing="the design of chapter 07 did not run in this build")
        return reading
    reading.tables["cells"] = factorial.cell_table(cells).round(1)
    reading.tables["effects"] = factorial.effect_table(effects).round(1)
    reading.tables["verdicts"] = verdict_table(effects, cells, refused)
    reading.phrases["status"] = Markdown(f"The design ran on {counted(len(cells.ids), 'instance')} that every "
                                         f"cell answered ({counted(len(cells.points), 'cell')}).")
    regex = next((e for e in effects if e.name == "constraint"), None)
    reading.headline = (Headline(HEADLINE, "ablation_no_constrained_drop", regex.estimate,
                                 regex.low, regex.high) if regex is not None else
                        Headline(HEADLINE, "ablation_no_constrained_drop",
                                 missing="the constraint did not vary in this design"))
    reading.numbers = {"n_instances": float(len(cells.ids)),
                       "regex_effect": regex.estimate if regex is not None else math.nan}
    return reading


def cells_from(runs: Mapping[Point, Sequence[RunRecord]]) -> factorial.Cells | None:
    """The cells of a run design, or None when nothing ran."""
    return factorial.Cells.of(runs) if runs else None


def repair_tables(runs: Mapping[tuple[str, int], Sequence[RunRecord]], instances: Sequence[Instance]
                  ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The repair round against Structured Thinking on the same instances: at the first seed that ran it, how
    many graphs moved from each quality to each (:func:`audit.repair_transitions`: invalid to valid, to exact);
    and the paired F1 comparison per seed."""
    from ...analysis import audit, tables

    references = {i.id: audit.reference_analysis(i) for i in instances}
    seed = min(s for name, s in runs if name == "structured_repair")
    moved = audit.repair_transitions(runs[("structured_repair", seed)], references.get)
    return moved, tables.gain_table(tables.paired_frame(runs, "structured_repair", ["structured"], n_resamples=2000))
