"""What each chapter says about its tables: the numbers its prose quotes and the sentences it computes.

A :class:`Reading` holds numbers (pasted into a page's markdown with ``{glue:text}`name:.1f```), phrases
(computed sentences and counts with their nouns in the right number, pasted with ``{glue:md}`name``` or,
when they hold no markup, ``{glue:text}`name```) and small tables (pasted with the ``{glue}`` directive). Each chapter's function builds them from the same frames its tables show,
so the prose and the tables can never disagree; :meth:`Reading.glue` hands them to myst-nb. The paper's
figures enter the prose the same way, read from ``data/paper_reported.csv``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from . import experiments as ex
from . import tables
from .config import RunConfig
from .data import Instance
from .metrics import OmittedGroup, counted
from .records import RunRecord

TARGET, BASELINE = "structured", "baseline_enhanced"
REFERENCE = "reference agent"


class Phrase(str):
    """A sentence that pastes both as plain text (``{glue:text}``) and as inline markdown (``{glue:md}``)."""

    def _repr_markdown_(self) -> str:
        return str(self)


@dataclass
class Reading:
    """Numbers, phrases and tables one page quotes, by glue name (tables paste as markdown tables, with the
    ``{glue:md}`` directive and ``:format: myst``)."""

    numbers: dict[str, float] = field(default_factory=dict)
    phrases: dict[str, str] = field(default_factory=dict)
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)

    def glue(self) -> None:
        """Glue everything for the page (not displayed where the cell runs; pasted where the prose asks)."""
        from myst_nb import glue

        for name, value in self.numbers.items():
            # Plain python numbers: myst-nb formats the text repr, which for numpy scalars is not a number.
            glue(name, float(value), display=False)
        for name, text in self.phrases.items():
            glue(name, Phrase(text), display=False)
        for name, table in self.tables.items():
            glue(name, Phrase(tables.markdown_table(table)), display=False)


def glue_figure(name: str, figure) -> None:
    """Glue a matplotlib figure for a ``{glue:figure}`` directive (with its caption) and close it, so it is
    shown once, where the caption is."""
    import matplotlib.pyplot as plt
    from myst_nb import glue

    glue(name, figure, display=False)
    plt.close(figure)


def signed(value: float, digits: int = 1) -> str:
    """``+1.2`` / ``-0.5``; ``n/a`` for a missing number; never a negative zero."""
    if value is None or math.isnan(value):
        return "n/a"
    text = f"{value:+.{digits}f}"
    return text.replace("-", "+", 1) if float(text) == 0 else text


def p_value(p: float) -> str:
    return "n/a" if p is None or math.isnan(p) else f"{p:.2g}"


def _gain_clause(row: Mapping[str, Any]) -> str:
    return (f"{signed(row['gain (pp)'])} pp (95% CI [{signed(row['CI low'])}, {signed(row['CI high'])}], "
            f"McNemar p = {p_value(row['McNemar p'])})")


def per_seed_gains(paired: pd.DataFrame, comparison: str) -> str:
    """Each seed's own gain, interval and p, in one sentence fragment (never averaged across seeds)."""
    rows = paired[paired["comparison"] == comparison]
    if rows.empty:
        return "no paired run"
    return "; ".join(f"seed {int(r['seed'])}: {_gain_clause(r)}" for _, r in rows.iterrows())


def verdict(paired: pd.DataFrame, comparison: str) -> str:
    """What the per-seed intervals say, counted over seeds."""
    rows = paired[paired["comparison"] == comparison]
    if rows.empty:
        return "There is no paired run to judge."
    above, below = int((rows["CI low"] > 0).sum()), int((rows["CI high"] < 0).sum())
    seeds = counted(len(rows), "seed")
    if above == below == 0:
        return (f"On {'its' if len(rows) == 1 else 'every one of its'} {seeds} the interval contains zero: "
                "this run cannot separate the two conditions.")
    parts = [f"{above} of {seeds} favour Structured Thinking" if above else "",
             f"{below} of {seeds} favour the baseline" if below else ""]
    return "By their own intervals, " + " and ".join(p for p in parts if p) + "."


def sample_phrases(instances: Sequence[Instance], seeds: Sequence[int]) -> dict[str, str]:
    positives = sum(i.label for i in instances)
    return {"sample_size": counted(len(instances), "instance"),
            "sample_positives": counted(positives, "gold positive"),
            "seed_count": counted(len(seeds), "seed")}


def paper_numbers(keys: Sequence[str]) -> dict[str, float]:
    """Paper figures by glue name ``paper_<key>``."""
    table = tables.paper(keys)
    return {f"paper_{k}": float(v) for k, v in zip(table["key"], table["value"])}


# -------------------------------------------------------------------------------------- 01 main results

MAIN_CONDITIONS = {"structured": "structured", "baseline": BASELINE, "prose": "twoturn_prose_pc",
                   "singleturn": "singleturn_structured", "reference": REFERENCE}


def main_summary_table(seeds_f1: pd.DataFrame) -> pd.DataFrame:
    """This run's F1 (mean and sd over seeds) beside the paper's, each paper figure in its own model's
    column: Qwen3.5-27B for the main rows, Qwen3.6-27B for the single-turn diagnostic and its own baseline."""
    paper = tables.paper(["main_f1_baseline", "main_f1_structured", "prose_f1", "baseline_qwen36",
                          "singleturn_qwen36"])
    ours = seeds_f1.set_index("condition")
    # One seed has no spread: its sd shows as a dash, not as 0.
    frame = pd.DataFrame({"this run F1": ours["F1 mean"], "sd": ours["F1 sd"].where(ours["seeds"] > 1)})
    for model, part in paper.groupby("model", sort=False):
        frame = frame.join(part.set_index("condition")["value"].rename(f"paper {model}"), how="outer")
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


def main_results(scores: pd.DataFrame, paired: pd.DataFrame, instances: Sequence[Instance],
                 seeds: Sequence[int]) -> Reading:
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
        "verdict": verdict(paired, comparison),
        "budget_note": budget_note(scores),
        "reference_note": ("" if math.isnan(reference) or reference >= 100 else
                           " It falls short of 100 only on rows whose gold label is one of the dataset's 18 errors."),
    }
    return Reading(numbers, phrases, {"summary_table": main_summary_table(tables.seed_frame(scores, "gold"))})


# -------------------------------------------------------------------------------------- 02 complexity


def omission_sentence(omitted: Sequence[OmittedGroup], scored: Sequence[int], min_positives: int) -> str:
    """Which bins are scored and which are omitted, with each omitted bin's actual positives; compared with
    the paper's rule (n ≤ 4 omitted on the full split) by what this run actually omitted."""
    scored_text = ("F1 and the paired gain are scored for " + ", ".join(f"n = {n}" for n in scored)
                   if scored else "No bin has enough positives for F1")
    if not omitted:
        return f"{scored_text}; no bin is omitted (each has at least {counted(min_positives, 'gold positive')})."
    bins = "; ".join(f"n = {o.group} ({counted(o.positives, 'gold positive')} in {counted(o.n, 'instance')})"
                     for o in omitted)
    same = all(o.group <= 4 for o in omitted) and all(n > 4 for n in scored)
    paper = ("the same cut as the paper's n ≤ 4" if same else
             "the paper instead omits n ≤ 4 on its full split, for the same reason")
    return (f"{scored_text}. Omitted, with fewer than {counted(min_positives, 'gold positive')}: {bins}; "
            f"{paper}.")


def bin_gains_sentence(gains: pd.DataFrame) -> str:
    if gains.empty:
        return "none, as no bin has enough positives"
    return "; ".join(f"n = {int(r['variables'])}, seed {int(r['seed'])}: {_gain_clause(r)}"
                     for _, r in gains.iterrows())


def stress_runs(setup: RunConfig, families: Sequence[str], graphs: int | None, per_graph: int | None, seed: int,
                conditions: Sequence[str], seeds: Sequence[int]) -> dict[str, dict[tuple[str, int], list[RunRecord]]]:
    """Run grids on each generated larger-graph stress set (every hypothesis of the set, no sampling; None:
    the family's default size, the paper's N where it states one)."""
    from .generate import stress_csv

    return {family: ex.run_grid(ex.updated(setup, data=str(stress_csv(family, graphs, per_graph, seed)), limit=0),
                                conditions, seeds) for family in families}


def stress_table(runs_by_family: Mapping[str, Mapping]) -> pd.DataFrame:
    """Per family and condition, in the paper's order: hypotheses and F1 (mean over seeds) of this run, beside
    the paper's pilot (App. C); families this run did not generate have no numbers of their own."""
    rows = []
    for family, runs in runs_by_family.items():
        scores = tables.scores_frame(runs)
        for condition, group in scores[scores["labels"] == "gold"].groupby("condition", sort=False):
            rows.append({"family": family, "condition": condition, "n": int(group["n"].iloc[0]),
                         "this run F1": group["F1"].mean()})
    ours = pd.DataFrame(rows, columns=["family", "condition", "n", "this run F1"])
    paper = tables.paper([f"{f}_{c}" for f in ("random7", "alarm7", "asia8") for c in ("baseline", "structured")])
    paper = paper.assign(family=paper["key"].str.split("_").str[0]).rename(columns={"value": "paper F1"})
    return paper[["family", "condition", "paper F1"]].merge(ours, on=["family", "condition"], how="left") \
        .set_index(["family", "condition"])[["n", "this run F1", "paper F1"]]


def complexity(bin_gains: pd.DataFrame, omitted: Sequence[OmittedGroup], min_positives: int,
               instances: Sequence[Instance], seeds: Sequence[int], ood_paired: pd.DataFrame | None,
               ood_name: str | None, stress: pd.DataFrame) -> Reading:
    """Chapter 02: per-bin paired gains with CIs, the omission rule with each omitted bin's positives, the
    OOD paired comparison when one ran, and the stress sets."""
    scored = sorted(set(int(v) for v in bin_gains["variables"]))
    comparison = f"{TARGET} vs {BASELINE}"
    if ood_paired is None:
        ood = "No OOD split was run for this page (`ood_split = None`)."
    else:
        ood = (f"On `{ood_name}`, Structured Thinking against BaselineEnhanced: "
               f"{per_seed_gains(ood_paired, comparison)}. {verdict(ood_paired, comparison)}")
    ran = stress.dropna(subset=["this run F1"]) if len(stress) else stress
    stress_text = ("No stress set was run here, so this page has no larger-graph numbers of its own." if ran.empty
                   else "On the stress sets, " + "; ".join(
                       f"{family} {condition}: {r['this run F1']:.1f} on {counted(int(r['n']), 'hypothesis', 'hypotheses')}"
                       for (family, condition), r in ran.iterrows()) + ".")
    sizes = ("; ".join(f"{family}: {counted(int(n), 'hypothesis', 'hypotheses')}"
                       for family, n in ran.groupby(level="family", sort=False)["n"].first().items())
             if not ran.empty else "no stress set ran, so only the paper's bars are drawn")
    phrases = sample_phrases(instances, seeds) | {
        "stress_sizes": sizes,
        "omission": omission_sentence(omitted, scored, min_positives),
        "bin_gains": bin_gains_sentence(bin_gains),
        "ood": ood,
        "stress": stress_text,
    }
    numbers = paper_numbers(["gain_n5_id", "gain_n6_id", "gain_n5_ood", "gain_n6_ood", "gain_paraphrase",
                             "split_size_ood", "random7_baseline", "random7_structured", "alarm7_baseline",
                             "alarm7_structured", "asia8_baseline", "asia8_structured", "asia8_9b_n"])
    return Reading(numbers, phrases)


def ood_setup(setup: RunConfig, ood_split: str) -> RunConfig:
    """The same sample size and settings on an OOD split: a CSV path or a split name (hub or ``generated:``)."""
    if str(ood_split).endswith(".csv"):
        return ex.updated(setup, data=str(ood_split))
    return ex.updated(setup, split=ood_split, data=None)


# --------------------------------------------------------------------------------------- 03 ablations


def ablation_table(scores: pd.DataFrame) -> pd.DataFrame:
    """F1 per condition (mean over seeds) and its change against Structured Thinking."""
    f1 = tables.seed_frame(scores, "gold").set_index("condition")["F1 mean"]
    return pd.DataFrame({"F1": f1, "change vs structured (pp)": f1 - f1.get(TARGET, math.nan)})


def scale_table(setup: RunConfig, scores: pd.DataFrame, models: Sequence[str], conditions: Sequence[str],
                seeds: Sequence[int], instances: Sequence[Instance]) -> pd.DataFrame:
    """F1 (gold, mean over seeds) per condition and model: the setup's model and each of ``models`` on the
    same backend and sample (the scale interaction of App. D)."""
    frames = [scores.assign(model=setup.model or "default")]
    frames += [tables.scores_frame(ex.run_grid(ex.updated(setup, model=other), conditions, seeds, instances))
               .assign(model=other) for other in models]
    every = pd.concat(frames)
    return every[every["labels"] == "gold"].pivot_table(index="condition", columns="model", values="F1", sort=False)


def tool_choice_table(setup: RunConfig, runs: Mapping, seeds: Sequence[int],
                      instances: Sequence[Instance]) -> pd.DataFrame:
    """Structured Thinking with ``tool_choice="auto"`` (plus the prompt instruction) against the tool forced
    by name (App. A.1): F1 mean and sd over seeds."""
    forced = ex.updated(setup, decoding={"tool_choice": "forced"})
    both = {("structured (auto)", s): runs[(TARGET, s)] for s in seeds}
    both |= {("structured (forced)", s): ex.run(forced, TARGET, s, instances) for s in seeds}
    return tables.seed_frame(tables.scores_frame(both))


def ablations(drops: pd.DataFrame, thinking_supported: bool, instances: Sequence[Instance],
              seeds: Sequence[int], refused: Mapping[str, str] | None = None) -> Reading:
    """Chapter 03: each one-factor removal's change in F1 against Structured Thinking; ``refused`` names the
    conditions this model cannot serve (:func:`experiments.refusals`), with the reason."""
    change = drops["change vs structured (pp)"]
    numbers = {f"change_{c}": float(change.get(c, math.nan))
               for c in ("minimal_instruction", "no_constrained_decoding", "no_thinking")}
    numbers |= paper_numbers(["ablation_minimal_f1", "ablation_no_thinking_drop", "ablation_no_constrained_drop",
                              "ablation_9b_no_thinking_structured_gain", "ablation_9b_no_thinking_baseline_gain",
                              "ablation_9b_constrained_gain"])
    note = ("" if thinking_supported else "This model has no thinking mode, so the no-thinking row sends the same "
            "prompts as Structured Thinking: its difference is zero by construction, not a finding.")
    if refused:
        note = " ".join(f"`{c}` was not run: {why}." for c, why in refused.items())
    return Reading(numbers, sample_phrases(instances, seeds) | {"thinking_note": note})


# ----------------------------------------------------------------------------------------- 04 probes


def probe_grid(setup: RunConfig, probes: Sequence[str], seeds: Sequence[int], instances: Sequence[Instance],
               agent: str) -> tuple[pd.DataFrame, dict[str, list[RunRecord]]]:
    """Every probe on Structured Thinking's recorded turn 1, per seed: :func:`probes.probe_table` rows with
    the agent's name and seed, and the probed records of the first seed (for an example)."""
    from .probes import PROBES, probe_table

    frames, example = [], {}
    for seed in seeds:
        base = ex.run(setup, TARGET, seed, instances, progress=False)
        probed = {name: ex.run(setup, TARGET, seed, instances, intervention=PROBES[name], probe=name,
                               progress=False) for name in probes}
        example = example or probed
        frames.append(probe_table(base, probed).assign(agent=agent, seed=seed))
    return pd.concat(frames).reset_index(), example


def probe_summary(table: pd.DataFrame) -> pd.DataFrame:
    """Per agent and probe, means over seeds of the F1 drop (gold and oracle labels) and the shares of
    answers flipped and of turns the probe really changed."""
    columns = ["n", "drop_gold_pp", "drop_oracle_pp", "flipped_share", "intervened_share"]
    return table.groupby(["agent", "probe"], sort=False)[columns].mean().astype({"n": int})


def probe_example(probed: Mapping[str, Sequence[RunRecord]]) -> str:
    """What the first probe changed on its first instance (the note kept in the record, never shown to the
    model)."""
    name, records = next(iter(probed.items()))
    record = records[0]
    note = record.intervention.note if record.intervention else "nothing"
    return f"Example of what a probe changed (`{name}`, {record.id}): {note}"


def probes_reading(table: pd.DataFrame, agent: str, probes: Sequence[str], instances: Sequence[Instance],
                   seeds: Sequence[int]) -> Reading:
    """Chapter 04: F1 change (minus the drop) under each probe for the model, and the share of flipped
    answers for the model and for the reference agent."""
    mean = table.groupby(["agent", "probe"])["drop_gold_pp"].mean()
    flips = table.groupby("agent")["flipped_share"].mean()
    numbers = {f"change_{p}": 0.0 - float(mean.get((agent, p), math.nan)) for p in probes}
    numbers |= {"flips_model": 100 * float(flips.get(agent, math.nan)),
                "flips_reference": 100 * float(flips.get(REFERENCE, math.nan))}
    numbers |= paper_numbers(["probe_full_drop", "probe_premise_drop", "probe_partial_drop_low",
                              "probe_partial_drop_high"])
    changes = "; ".join(f"`{p}` {signed(numbers[f'change_{p}'])} pp" for p in probes)
    swap = ("" if "swap_valid_cpdag" in probes else
            " The validity-preserving swaps were not run (add them to `probes`).")
    return Reading(numbers, sample_phrases(instances, seeds) | {"probe_changes": changes + "." + swap})


# ------------------------------------------------------------------------------------------ 05 audit


def audit_runs(runs: Mapping[tuple[str, int], Sequence[RunRecord]], instances: Sequence[Instance]) -> pd.DataFrame:
    """Every emitted object of every run, audited against the oracle's CPDAG of its premise."""
    from . import audit
    from .oracle import analyse_premise
    from .schema import CausalAnalysis

    by_id = {i.id: i for i in instances}

    def reference_for(record_id: str) -> CausalAnalysis:
        return CausalAnalysis.from_cpdag(analyse_premise(by_id[record_id].premise).cpdag)

    return pd.concat([audit.audit_records(records, reference_for).assign(seed=seed)
                      for (_, seed), records in runs.items()], ignore_index=True)


def audit_reading(summary: pd.DataFrame, errors: pd.DataFrame, split: str, shortcut_count: int,
                  instances: Sequence[Instance], seeds: Sequence[int]) -> Reading:
    """Chapter 05: the structured condition's field scores and violation rate, the split's gold errors and
    its alphabetical-order shortcut."""
    s = summary.loc[TARGET] if TARGET in summary.index else pd.Series(dtype=float)
    numbers = {name: float(s.get(column, math.nan)) for name, column in
               [("skeleton_f1", "skeleton_f1"), ("vstructure_f1", "v_structures_f1"), ("directed_f1", "directed_f1")]}
    numbers |= {"exact_pct": 100 * float(s.get("exact_match_rate", math.nan)),
                "violations_pct": 100 * float(s.get("violation_rate", math.nan))}
    numbers |= paper_numbers(["audit_skeleton_f1", "audit_vstructure_f1", "audit_directed_f1", "audit_exact",
                              "audit_violations_id", "audit_violations_ood"])
    phrases = sample_phrases(instances, seeds) | {
        "gold_errors": (f"The oracle disagrees with gold on **{len(errors)}** rows of the `{split}` split "
                        f"({int((errors.gold == 0).sum())} gold 0 / oracle 1, "
                        f"{int((errors.gold == 1).sum())} gold 1 / oracle 0)." if len(errors) else
                        f"The oracle agrees with gold on every row of the `{split}` split."),
        "shortcut": (f"In the whole split, {counted(shortcut_count, 'causal hypothesis', 'causal hypotheses')} "
                     f"{'names' if shortcut_count == 1 else 'name'} a cause declared after its effect; all are "
                     "labelled 0, so answering NO to them is free accuracy that says nothing about causal reasoning."),
    }
    return Reading(numbers, phrases)


# ---------------------------------------------------------------------------------------- 06 gallery


def failure_kinds(counts: pd.DataFrame) -> pd.DataFrame:
    """The per-kind columns of :func:`failures.failure_counts` in long form (condition, kind, errors)."""
    from .failures import KIND_ORDER

    kinds = [k.value for k in KIND_ORDER]
    return counts[kinds].reset_index().melt(id_vars="condition", var_name="kind", value_name="errors")


def gallery_reading(counts: pd.DataFrame, instances: Sequence[Instance], seeds: Sequence[int]) -> Reading:
    """Chapter 06: errors per condition, counted with their nouns."""
    errors = ", ".join(f"{c}: {counted(int(n), 'error')}" for c, n in counts["errors"].items()) or "none"
    return Reading(paper_numbers(["gallery_cases"]), sample_phrases(instances, seeds) | {"errors": errors})
