"""Chapter 01, the main results: F1 per condition beside the paper's Table 1 and the gain of Structured
Thinking over BaselineEnhanced.
"""

from __future__ import annotations

import math
from dataclasses import replace
from collections.abc import Mapping, Sequence

import pandas as pd

from ...analysis import tables
from ...analysis.markup import Markdown, code, emphasis
from ...analysis.metrics import counted
from ...causal.instance import Instance
from ...run.records import RunRecord
from .. import presentation
from .glue import (BASELINE, REFERENCE, Reading, TARGET, constant_phrase, paper_numbers, per_seed_gains, sample_phrases,
                   sentence, trivial_phrase)
from .verdicts import paired_headline, verdict


MAIN_CONDITIONS = {"structured": "structured", "baseline": BASELINE, "prose": "twoturn_prose_pc",
                   "singleturn": "singleturn_structured", "reference": REFERENCE}


PRIMARY_SEED = "paper Qwen3.5-27B, primary seed"
THREE_SEEDS = "paper Qwen3.5-27B, mean of 3 seeds"


def main_summary_table(scores: pd.DataFrame, seeds: Sequence[int]) -> pd.DataFrame:
    """Table 1 compared like with like: this run's first seed (its primary run) beside the paper's primary
    seed, and, with several seeds, this run's mean and sd over them beside the paper's three-seed mean and sd
    (§4.2). Each paper figure sits in its own model's column: Qwen3.5-27B for the main rows, Qwen3.6-27B for
    the single-turn diagnostic and its own baseline."""
    gold = scores[scores["labels"] == "gold"]
    first = gold[gold["seed"] == seeds[0]].set_index("condition")["F1"]
    frame = pd.DataFrame({f"this run, seed {seeds[0]}": first})
    primary = tables.paper(["main_f1_baseline", "main_f1_structured", "prose_f1", "baseline_qwen36", "singleturn_qwen36"])
    for model, part in primary.groupby("model", sort=False):
        name = PRIMARY_SEED if model == "Qwen3.5-27B" else f"paper {model}"
        frame = frame.join(part.set_index("condition")["value"].rename(name), how="outer")
    if len(seeds) > 1:
        over = tables.seed_frame(scores, "gold").set_index("condition")
        three = tables.paper(["seeds_f1_baseline", "seeds_f1_structured"]).set_index("condition")["value"]
        spread = tables.paper(["seeds_f1_baseline_sd", "seeds_f1_structured_sd"]).set_index("condition")["value"]
        frame = frame.join(pd.DataFrame({f"this run, mean of {len(seeds)} seeds": over["F1 mean"], "sd": over["F1 sd"],
                                         THREE_SEEDS: three, "paper sd": spread}), how="outer")
    order = [BASELINE, TARGET, "twoturn_prose_pc", "singleturn_structured", REFERENCE]
    return frame.reindex(sorted(frame.index, key=lambda c: order.index(c) if c in order else len(order)))


def budget_note(scores: pd.DataFrame) -> str:
    """Which conditions lost answers to the token budget or to unparsable output (empty when none did)."""
    gold = scores[scores["labels"] == "gold"]
    totals = gold.groupby("condition", sort=False)[["n", "unparsed", "cut off"]].sum()
    parts = [f"{c}: {int(r['cut off'])} of {counted(int(r['n']), 'answer')} cut off by the token budget, "
             f"{int(r['unparsed'])} without a parsable answer"
             for c, r in totals.iterrows() if r["cut off"] or r["unparsed"]]
    if not parts:
        return "No answer was cut off by the token budget or left unparsed."
    return ("Budgets shaped this run: " + "; ".join(parts) + ". An unparsed answer counts as NO, so where "
            "answers are missing, F1 reflects the token budget as much as the model's causal reasoning.")


def answer_reading(runs: Mapping[tuple[str, int], Sequence[RunRecord]]) -> Markdown:
    """Which reading of the replies the page's scores use (the strict one) and how many rows the flexible one
    would read otherwise (:func:`tables.reading_frame`), per condition with its F1 under each reading."""
    frame = tables.reading_frame(runs)
    strict = Markdown("Every score here reads answers strictly: the ", code("Answer: YES|NO"), " line the prompt "
                      "asks for, or a bare YES or NO. A flexible reading (the last answer the reply states, as in ",
                      emphasis("The answer is YES."), ", like lm-evaluation-harness's flexible-extract beside its "
                      "strict-match) ")
    if frame.empty:
        return Markdown("")
    differ = frame[frame["differ"] > 0].groupby("condition", sort=False)[["differ", "n", "F1 strict", "F1 flexible"]]
    totals = differ.agg({"differ": "sum", "n": "sum", "F1 strict": "mean", "F1 flexible": "mean"})
    if totals.empty:
        return Markdown(strict, f"reads the same answer on every one of the {counted(int(frame['n'].sum()), 'row')}.")
    parts = "; ".join(f"{presentation.label(c)}: {counted(int(r['differ']), 'row')} of {int(r['n'])}, F1 "
                      f"{r['F1 strict']:.1f} strict and {r['F1 flexible']:.1f} flexible"
                      for c, r in totals.iterrows())
    return Markdown(strict, f"differs on {counted(int(totals['differ'].sum()), 'row')}: {parts}.")


def _flexible_cause(runs: Mapping[tuple[str, int], Sequence[RunRecord]], seed: int) -> tuple[str, ...]:
    """The headline's word on its reading of the replies, when the flexible one would read some of its rows
    otherwise (the compared conditions at ``seed``)."""
    compared = {key: runs[key] for key in ((TARGET, seed), (BASELINE, seed)) if key in runs}
    differ = int(tables.reading_frame(compared)["differ"].sum()) if compared else 0
    if not differ:
        return ()
    return (f"the gain reads answers strictly; a flexible reading would read {counted(differ, 'row')} of "
            "Structured Thinking and BaselineEnhanced otherwise",)


def main_results(scores: pd.DataFrame, paired: pd.DataFrame, instances: Sequence[Instance],
                 seeds: Sequence[int], runs: Mapping[tuple[str, int], Sequence[RunRecord]] | None = None) -> Reading:
    """Chapter 01: F1 per condition (mean and sd over seeds), the structured-vs-baseline gain per seed with
    its own CI and McNemar p, the mean and sd of that gain, and the paper's figures beside them."""
    f1 = tables.seed_frame(scores, "gold").set_index("condition")
    comparison = f"{TARGET} vs {BASELINE}"
    gains = tables.gain_seed_frame(paired).set_index("comparison")
    numbers = {f"f1_{name}": float(f1["F1 mean"].get(c, math.nan)) for name, c in MAIN_CONDITIONS.items()}
    numbers |= {f"sd_{name}": float(f1["F1 sd"].get(c, math.nan)) for name, c in MAIN_CONDITIONS.items()}
    has_gain = comparison in gains.index
    numbers |= {"gain_mean": float(gains.loc[comparison, "gain mean"]) if has_gain else math.nan,
                "gain_sd": float(gains.loc[comparison, "gain sd"]) if has_gain else math.nan}
    numbers |= paper_numbers(["main_f1_structured", "main_f1_baseline", "main_delta", "main_ci_low",
                              "main_ci_high", "main_mcnemar_p", "seeds_f1_structured", "seeds_f1_structured_sd",
                              "seeds_f1_baseline", "seeds_f1_baseline_sd", "seeds_delta", "seeds_delta_sd",
                              "prose_f1", "baseline_qwen36", "singleturn_qwen36", "split_size_id"])
    reference = f1["F1 mean"].get(REFERENCE, math.nan)
    spread = ("a single seed, so no spread across seeds" if len(seeds) < 2 else
              f"sd across seeds {numbers['sd_structured']:.1f} and {numbers['sd_baseline']:.1f}; "
              f"gain sd {numbers['gain_sd']:.1f} pp")
    phrases = sample_phrases(instances, seeds) | {
        "seed_spread": spread,
        "seed_gains": per_seed_gains(paired, comparison),
        "verdict": verdict(paired, comparison, runs, on_first_screen=seeds[0]),  # its headline's seed
        "budget_note": budget_note(scores),
        "answer_reading": answer_reading(runs or {}),
        "reference": ("On the reference backend every row above is the reference agent's own." if math.isnan(reference)
                      else f"The reference agent, which reads the oracle's CPDAG exactly, reaches {reference:.1f} "
                      "against gold." + ("" if reference >= 100 else " It falls short of 100 only on rows whose gold "
                                         "label is one of the dataset's 18 errors.")),
        "trivial": sentence(trivial_phrase(instances)),
        "constant": constant_phrase(runs or {}),
    }
    headline = paired_headline(paired, comparison, "the gain of Structured Thinking over BaselineEnhanced",
                               "main_delta", runs=runs)
    headline = replace(headline, causes=headline.causes + _flexible_cause(runs or {}, seeds[0]))
    summary = main_summary_table(scores, seeds)
    always_yes = tables.trivial_predictors([i.label for i in instances])["always-YES F1"]
    for column in (c for c in summary.columns if c.startswith("this run")):  # the same sample under every seed
        summary.loc["always YES (this sample)", column] = always_yes
    return Reading(numbers, phrases, {"summary_table": summary}, headline)


def show_cost(runs: Mapping[tuple[str, int], Sequence[RunRecord]]) -> None:
    """Chapter 01's cost section (§7.3): tokens per instance and condition, then model time, beside the paper's
    ratios; only what the records measured: a run whose calls counted no tokens (the reference agent computes its
    answers) shows no ratios of zeros, and times are shown only where calls took any."""
    from IPython.display import display

    tokens, times = tables.cost_tables({k: v for k, v in runs.items() if k[0] != REFERENCE})
    if tokens.empty or not (tokens["mean_total_tokens"] > 0).any():
        display(Markdown("No call of this run counted tokens (the reference agent computes its answers, and a "
                         "cost needs the baseline's run), so there is no cost to compare."))
        return
    display(Markdown("Tokens per instance and condition (means over every seed's rows; the method's cost, as the "
                     "paper's token ratio):"))
    display(presentation.show(tokens, 1))
    if (times["mean_latency_s"] > 0).any():
        display(Markdown("Model time, per instance and per completion token: wall time of each call on this machine, "
                         "which its load at the time shares in (other processes, other builds), so it is not the "
                         "method's cost and a ratio of times compares loads as much as conditions:"))
        display(presentation.show(times, 2))
    display(presentation.show(presentation.paper_view(["cost_tokens_ratio", "cost_time_ratio"])))
