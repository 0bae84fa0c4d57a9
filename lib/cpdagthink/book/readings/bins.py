"""Chapter 02, complexity: the paired gain per number of variables with both rules that omit a bin, the OOD
split and the stress sets.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from ...analysis import tables
from ...analysis.markup import Markdown, code
from ...analysis.metrics import OmittedGroup, counted, min_instances_for_f1
from ...causal.instance import Instance
from ...run.records import RunRecord
from .. import presentation
from .glue import (BASELINE, Headline, Reading, TARGET, fill_command, gain_clause, not_run, paper_numbers, per_seed_gains,
                   sample_phrases, sentence, show_figure, trivial_phrase)
from .verdicts import pair_causes, verdict


CHAPTER = "02_complexity"  # the page these sections are part of, for the commands that fill them


def omission_sentence(omitted: Sequence[OmittedGroup], scored: Sequence[int], min_positives: int,
                      min_variables: int = tables.PAPER_MIN_VARIABLES) -> str:
    """Both rules that omit a bin, stated, and which bins each omitted here with their actual positives:
    the paper's (n below ``min_variables``; §4.3 omits n ≤ 4), then the positive-count guard."""
    scored_text = ("F1 and the paired gain are scored for " + ", ".join(f"n = {n}" for n in scored)
                   if scored else "No bin is scored")
    rule = (f"Bins follow the paper's rule (§4.3: bins with fewer than {min_variables} variables are omitted) "
            f"and, as a second condition, need at least {counted(min_positives, 'gold positive')}")
    by_rule = [o for o in omitted if o.group < min_variables]
    by_guard = [o for o in omitted if o.group >= min_variables]

    def bins(groups: Sequence[OmittedGroup]) -> str:
        return "; ".join(f"n = {o.group} ({counted(o.positives, 'gold positive')} in {counted(o.n, 'instance')})"
                         for o in groups)

    parts = [f"omitted by the paper's rule: {bins(by_rule)}" if by_rule else "",
             f"omitted for fewer than {counted(min_positives, 'gold positive')}: {bins(by_guard)}" if by_guard else ""]
    omissions = "; ".join(p for p in parts if p) or "no bin of this sample is omitted"
    return f"{rule}. {scored_text}; {omissions}."


def paper_bin_key(split: str, n: int) -> str | None:
    """The paper's Figure 2 gain for ``n`` variables on a split like this one (ID for the test split, OOD for
    a paraphrase split), or None where the paper reports none."""
    kind = "ood" if "paraphras" in split else "id" if split in ("test", "ID") else None
    key = f"gain_n{n}_{kind}"
    return key if kind and key in set(tables.paper()["key"]) else None


def bin_gain_table(gains_by_split: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """Per split, bin and seed, the paired gain with its CI beside the paper's Figure 2 gain for that split
    and bin (paper: the test split's ID bins and the paraphrase split's OOD bins)."""
    paper = tables.paper().set_index("key")["value"]
    rows = []
    for split, gains in gains_by_split.items():
        for _, r in gains.iterrows():
            key = paper_bin_key(split, int(r["variables"]))
            rows.append({"split": split, "variables": int(r["variables"]), "seed": int(r["seed"]), "n": int(r["n"]),
                         "positives": int(r["positives"]), "gain (pp)": r["gain (pp)"], "CI low": r["CI low"],
                         "CI high": r["CI high"], "paper gain (pp)": paper[key] if key else math.nan})
    return pd.DataFrame(rows, columns=["split", "variables", "seed", "n", "positives", "gain (pp)", "CI low",
                                       "CI high", "paper gain (pp)"])


def bin_headline(table: pd.DataFrame, min_positives: int,
                 runs_by_split: Mapping[str, Mapping[tuple[str, int], Sequence[RunRecord]]] | None = None) -> Headline:
    """Chapter 02's key figure: the gain of the largest scored bin the paper reports (first seed), with the
    causes the bin's answers rest on, read from its split's runs in ``runs_by_split``."""
    rows = table.dropna(subset=["paper gain (pp)"])
    if rows.empty:
        return Headline("the per-bin gain", "gain_n5_id", missing=(
            "no bin of this sample is scored where the paper reports one (n = 5 or 6 with at least "
            f"{counted(min_positives, 'gold positive')})"))
    r = rows.sort_values(["variables", "seed"], ascending=[False, True]).iloc[0]
    n, seed = int(r["variables"]), int(r["seed"])
    figure = f"the gain at n = {n} on {r['split']}"
    grid = (runs_by_split or {}).get(r["split"]) or {}
    in_bin = {key: [record for record in records if record.num_variables == n] for key, records in grid.items()}
    causes, degenerate = pair_causes(in_bin, f"{TARGET} vs {BASELINE}", seed, figure)
    return Headline(figure, paper_bin_key(r["split"], n), float(r["gain (pp)"]), float(r["CI low"]), float(r["CI high"]),
                    causes=causes, degenerate=degenerate)


def bin_gains_sentence(gains: pd.DataFrame) -> str:
    if gains.empty:
        return "none, as no bin is scored"
    return "; ".join(f"n = {int(r['variables'])}, seed {int(r['seed'])}: {gain_clause(r)}"
                     for _, r in gains.iterrows())


def stress_table(runs_by_family: Mapping[str, Mapping]) -> pd.DataFrame:
    """Per family and condition, in the paper's order: hypotheses and F1 (mean over seeds) of this run, beside
    the paper's pilot (App. C); families this run did not generate have no numbers of their own."""
    rows = []
    for family, runs in runs_by_family.items():
        scores = tables.scores_frame(runs)
        for condition, group in scores[scores["labels"] == "gold"].groupby("condition", sort=False):
            first = group.iloc[0]  # every seed answers the same rows
            rows.append({"family": family, "condition": condition, "n": int(first["n"]),
                         "positives": int(first["tp"] + first["fn"]), "this run F1": group["F1"].mean()})
    ours = pd.DataFrame(rows, columns=["family", "condition", "n", "positives", "this run F1"])
    paper = tables.paper([f"{f}_{c}" for f in ("random7", "alarm7", "asia8") for c in ("baseline", "structured")])
    paper = paper.assign(family=paper["key"].str.split("_").str[0]).rename(columns={"value": "paper F1"})
    return paper[["family", "condition", "paper F1"]].merge(ours, on=["family", "condition"], how="left") \
        .set_index(["family", "condition"])[["n", "positives", "this run F1", "paper F1"]]


def stress_caveats(stress: pd.DataFrame) -> str:
    """What the stress table's reader must know (empty when no set ran): F1(YES) depends on prevalence, and
    these sets are far more positive than the test split; the paper states N only for its ASIA-derived 9B
    row, and its 27B ASIA baseline figure needs more instances than that row's N."""
    from ...run.data import FINGERPRINTS

    ran = stress.dropna(subset=["this run F1"]) if len(stress) else stress
    if ran.empty:
        return ""
    split = FINGERPRINTS["test"]
    sets = ran.groupby(level="family", sort=False)[["n", "positives"]].first()
    shares = "; ".join(f"{family} {int(r['positives'])} of {int(r['n'])} ({100 * r['positives'] / r['n']:.0f}%)"
                       for family, r in sets.iterrows())
    text = (f"F1(YES) depends on prevalence: this run's stress sets hold {shares} gold positives, against "
            f"{100 * split.positives / split.rows:.1f}% in the test split ({split.positives} of {split.rows}), so "
            "their F1 is not on the test split's scale.")
    asia_n = tables.paper(["asia8_9b_n"])["value"].iloc[0]
    baseline = tables.paper(["asia8_baseline"])["value"].iloc[0]
    needed = min_instances_for_f1(baseline)
    text += (f" The paper states N only for its ASIA-derived 9B row ({asia_n:.0f}); its 27B rows give none, and "
             f"its 27B ASIA-derived baseline F1 of {baseline:.2f} cannot come from {asia_n:.0f} or fewer "
             f"instances (it needs at least {needed})")
    ours = int(sets.loc["asia8", "n"]) if "asia8" in sets.index else None
    if ours is not None and needed is not None and ours < needed:
        size = f"{ours}, the 9B row's size," if ours == asia_n else f"{ours}"
        text += f", so this run's ASIA set of {size} is smaller than the set the 27B figures beside it come from"
    return text + "."


def counted_stress(stress: pd.DataFrame) -> str:
    """The size of each stress set this run generated (empty when none ran)."""
    ran = stress.dropna(subset=["this run F1"]) if len(stress) else stress
    return "; ".join(f"{family}: {counted(int(n), 'hypothesis', 'hypotheses')}"
                     for family, n in ran.groupby(level="family", sort=False)["n"].first().items())


def complexity(bin_gains: pd.DataFrame, omitted: Sequence[OmittedGroup], min_positives: int,
               instances: Sequence[Instance], seeds: Sequence[int], ood_paired: pd.DataFrame | None,
               ood_name: str | None, stress: pd.DataFrame, min_variables: int = tables.PAPER_MIN_VARIABLES
               ) -> Reading:
    """Chapter 02: per-bin paired gains with CIs, both omission rules with each omitted bin's positives, the
    OOD paired comparison when one ran, and the stress sets."""
    scored = sorted(set(int(v) for v in bin_gains["variables"]))
    comparison = f"{TARGET} vs {BASELINE}"
    if ood_paired is None:
        ood = Markdown("No OOD split was run for this page (its parameter ", code("ood_split"), " names none).")
    else:
        ood = Markdown("On ", code(ood_name), ", Structured Thinking against BaselineEnhanced: ",
                       f"{per_seed_gains(ood_paired, comparison)}. {verdict(ood_paired, comparison)}")
    ran = stress.dropna(subset=["this run F1"]) if len(stress) else stress
    stress_text = ("" if ran.empty else "On the stress sets, " + "; ".join(
        f"{family} {presentation.label(condition)}: {r['this run F1']:.1f} on "
        f"{counted(int(r['n']), 'hypothesis', 'hypotheses')}" for (family, condition), r in ran.iterrows()) + ".")
    sizes = counted_stress(stress)
    phrases = sample_phrases(instances, seeds) | {
        "stress_sizes": sizes,
        "omission": omission_sentence(omitted, scored, min_positives, min_variables),
        "trivial": sentence(trivial_phrase(instances)),
        "bin_gains": bin_gains_sentence(bin_gains),
        "ood": ood,
        "stress": stress_text,
        "stress_caveats": stress_caveats(stress),
    }
    numbers = paper_numbers(["gain_n5_id", "gain_n6_id", "gain_n5_ood", "gain_n6_ood", "gain_paraphrase",
                             "split_size_ood", "random7_baseline", "random7_structured", "alarm7_baseline",
                             "alarm7_structured", "asia8_baseline", "asia8_structured", "asia8_9b_n"])
    return Reading(numbers, phrases)


def complexity_gains(runs: Mapping[tuple[str, int], Sequence[RunRecord]], split: str,
                     ood_runs: Mapping[tuple[str, int], Sequence[RunRecord]] | None, ood_split: str | None,
                     **rules: Any) -> tuple[pd.DataFrame, list[OmittedGroup], pd.DataFrame | None, pd.DataFrame]:
    """Chapter 02's per-bin paired gains (``rules``: :func:`tables.bin_gain_frame`'s) on ``split`` and, when
    ``ood_runs`` ran, on ``ood_split`` too: the in-split gains and omitted bins, the OOD split's overall paired
    frame (None without one) and :func:`bin_gain_table` over both splits."""
    gains, omitted = tables.bin_gain_frame(runs, TARGET, BASELINE, **rules)
    by_split, ood_paired = {split: gains}, None
    if ood_runs is not None:
        ood_paired = tables.paired_frame(ood_runs, TARGET, [BASELINE], n_resamples=rules.get("n_resamples", 10_000))
        by_split[ood_split] = tables.bin_gain_frame(ood_runs, TARGET, BASELINE, **rules)[0]
    return gains, omitted, ood_paired, bin_gain_table(by_split)


def show_bin_gains(table: pd.DataFrame, namespace: Mapping[str, Any] | None = None) -> None:
    """The per-bin gains beside the paper's and their figure, or one sentence and the command that fills them
    (the page's own, from its parameters in ``namespace``, on the whole split)."""
    from IPython.display import display

    from .. import figures

    if table.empty:
        display(not_run("No bin of this sample meets both rules, so no per-bin gain is computed (the summary names "
                        "each bin left out with its gold positives; the accuracy per bin below shows every bin).",
                        fill_command(CHAPTER, namespace or {}, limit=0)))
        return
    display(presentation.show(table))
    show_figure(figures.gain_points(table), "This run's paired gain (structured minus baseline, F1 pp, gold labels) "
                "per number of variables with bootstrap 95% intervals, one point per split and seed; crosses: the "
                "paper's Figure 2 gain for that split and bin.")


def show_ood(ood_paired: pd.DataFrame | None, namespace: Mapping[str, Any] | None = None) -> None:
    """The OOD split's paired gain per seed, or one sentence and the command that runs it (the page's own, from
    its parameters in ``namespace``, with the OOD split)."""
    from IPython.display import display

    if ood_paired is None:
        display(not_run("No OOD split ran for this page.",
                        fill_command(CHAPTER, namespace or {}, ood_split="generated:paraphrase")))
        return
    display(presentation.show(tables.gain_table(ood_paired), 3))
    display(presentation.show(tables.gain_seed_frame(ood_paired)))
    display(presentation.show(presentation.paper_view(["gain_paraphrase", "split_size_ood"])))


def show_stress(stress: pd.DataFrame, namespace: Mapping[str, Any] | None = None) -> None:
    """The stress sets this run generated beside the paper's pilot, or one sentence and the command (the page's
    own, from its parameters in ``namespace``, with a stress family)."""
    from IPython.display import display

    from .. import figures

    if stress["this run F1"].isna().all():
        display(not_run("No stress set ran for this page.",
                        fill_command(CHAPTER, namespace or {}, stress_families=["alarm7"])))
        return
    display(presentation.show(stress))
    show_figure(figures.stress_bars(stress), f"F1(YES) per stress family and condition: this run's (left; "
                f"{counted_stress(stress)}) and the paper's Qwen3.5-27B pilot (right, single seed).")
