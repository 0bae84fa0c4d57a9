"""What each chapter says about its tables: the numbers its prose quotes and the sentences it computes.

A :class:`Reading` holds numbers (pasted into a page's markdown with ``{glue:text}`name:.1f```), phrases
(computed sentences and counts with their nouns in the right number, each a :class:`markup.Markdown` built
from typed parts, pasted with ``{glue:md}`name``` or, when they hold no markup, ``{glue:text}`name```) and
small tables (pasted with the ``{glue}`` directive). Each chapter's function builds them from the same frames its tables show,
so the prose and the tables can never disagree; :meth:`Reading.glue` hands them to myst-nb. The paper's
figures enter the prose the same way, read from ``data/paper_reported.csv``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from ..analysis import tables
from ..analysis.markup import Markdown, code, emphasis, strong
from ..analysis.metrics import OmittedGroup, counted, min_instances_for_f1
from ..causal.instance import Instance
from ..causal.oracle import GAPS, UNREADABLE
from ..run.config import RunConfig
from ..run.records import RunRecord
from . import experiments as ex
from . import figures

TARGET, BASELINE = "structured", "baseline_enhanced"
REFERENCE = "reference agent"


@dataclass
class Reading:
    """Numbers, phrases and tables one page quotes, by glue name (tables paste as markdown tables, with the
    ``{glue:md}`` directive and ``:format: myst``)."""

    numbers: dict[str, float] = field(default_factory=dict)
    phrases: dict[str, Markdown | str] = field(default_factory=dict)  # a str is text (shown literally)
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    headline: "Headline | None" = None  # the page's key figure, for its first screen and the intro

    def glue(self) -> None:
        """Glue everything for the page (not displayed where the cell runs; pasted where the prose asks)."""
        from myst_nb import glue

        for name, value in self.numbers.items():
            # Plain python numbers: myst-nb formats the text repr, which for numpy scalars is not a number.
            glue(name, float(value), display=False)
        for name, text in self.phrases.items():
            glue(name, Markdown(text), display=False)
        for name, table in self.tables.items():
            glue(name, tables.markdown_table(table), display=False)


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


def sentence(text: str) -> str:
    """``text`` as a sentence: its first letter upper case (the rest as written), a full stop at the end."""
    return text[:1].upper() + text[1:] + ("" if text.endswith(".") else ".")


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


def answer_causes(sides: Mapping[str, Sequence[RunRecord]], figure: str) -> tuple[tuple[str, ...], bool]:
    """What the answers behind ``figure`` rest on, named from the records (``sides``: each side's records by
    condition, the side the figure is read from first): rows without a finished answer, answers cut off at
    the token budget, constant answers, two sides scored alike on every row; and whether these make the figure
    degenerate (a side with a finished answer on fewer than half its rows, a first side whose scored answers are
    all the same, or two sides scored alike on every row), so that it is what such answers produce rather than
    a finding. A constant second side is named but can be a finding (a probe that turns every answer to NO)."""
    causes, degenerate = [], False
    for i, (condition, records) in enumerate(sides.items()):
        p, name = tables.answer_profile(records), tables.label(condition)
        if 2 * p.finished < p.n:
            degenerate = True
            causes.append(f"{name} finished {p.finished} of its {counted(p.n, 'answer')} ({p.cut_off} cut off at "
                          "the token budget; a missing answer scores NO)")
        elif p.constant:
            degenerate = degenerate or i == 0
            rows = (f"every one of its {counted(p.n, 'row')}" if p.finished == p.n else
                    f"every row it finished ({p.finished} of {p.n}; the rest score NO)")
            causes.append(f"{name} answered {p.constant} on {rows}")
        elif p.cut_off:
            causes.append(f"{p.cut_off} of {name}'s {counted(p.n, 'answer')} were cut off at the token budget")
    scored = [[r.says_yes for r in records] for records in sides.values()]
    if len(scored) == 2 and scored[0] == scored[1] and scored[0]:
        degenerate = True
        first, second = map(tables.label, sides)
        causes.append(f"{first} and {second} gave the same scored answer on every row, so {figure} is 0 by "
                      "construction")
    return tuple(causes), degenerate


def pair_causes(runs: Mapping[tuple[str, int], Sequence[RunRecord]], comparison: str, seed: int,
                figure: str) -> tuple[tuple[str, ...], bool]:
    """:func:`answer_causes` of both sides of ``comparison`` (``target vs other``) at ``seed``; nothing when
    either side's run is not in ``runs``."""
    sides = comparison.split(" vs ", 1)
    if any((side, seed) not in runs for side in sides):
        return (), False
    return answer_causes({side: runs[(side, seed)] for side in sides}, figure)


def verdict(paired: pd.DataFrame, comparison: str,
            runs: Mapping[tuple[str, int], Sequence[RunRecord]] | None = None) -> str:
    """What the per-seed intervals say, counted over seeds; given the ``runs``, a seed whose answers make its
    gain degenerate (:func:`answer_causes`) is named with its causes and not counted as a finding."""
    rows = paired[paired["comparison"] == comparison]
    if rows.empty:
        return "There is no paired run to judge."
    lead = ""
    for seed in list(rows["seed"]):
        causes, degenerate = pair_causes(runs or {}, comparison, int(seed), "the gain")
        if degenerate:
            lead += sentence(f"Seed {int(seed)} is not a finding: " + "; ".join(causes)) + " "
            rows = rows[rows["seed"] != seed]
    if rows.empty:
        return lead.strip()
    above, below = int((rows["CI low"] > 0).sum()), int((rows["CI high"] < 0).sum())
    seeds = counted(len(rows), "seed")
    if above == below == 0:
        return lead + (f"On {'its' if len(rows) == 1 else 'every one of its'} {seeds} the interval contains zero: "
                       "this run cannot separate the two conditions.")
    parts = [f"{above} of {seeds} favour Structured Thinking" if above else "",
             f"{below} of {seeds} favour the baseline" if below else ""]
    return lead + "By their own intervals, " + " and ".join(p for p in parts if p) + "."


def sample_phrases(instances: Sequence[Instance], seeds: Sequence[int]) -> dict[str, str]:
    positives = sum(i.label for i in instances)
    return {"sample_size": counted(len(instances), "instance"),
            "sample_positives": counted(positives, "gold positive"),
            "seed_count": counted(len(seeds), "seed")}


def paper_numbers(keys: Sequence[str]) -> dict[str, float]:
    """Paper figures by glue name ``paper_<key>``."""
    table = tables.paper(keys)
    return {f"paper_{k}": float(v) for k, v in zip(table["key"], table["value"])}


@dataclass
class Headline:
    """A chapter's key figure: this build's value (pp) with its 95% CI, beside the paper's figure ``paper_key``;
    ``missing`` says why there is no value when there is none."""

    figure: str
    paper_key: str
    value: float = math.nan
    ci_low: float = math.nan
    ci_high: float = math.nan
    missing: str = ""
    note: str = ""  # a descriptive chapter's verdict in place of the CI rule
    unit: str = "pp"  # a gain or drop in points; "" for a score
    causes: tuple[str, ...] = ()  # what its answers rest on (:func:`answer_causes`)
    degenerate: bool = False  # those answers make the value what they produce, not a finding

    @property
    def paper(self) -> float:
        return float(tables.paper([self.paper_key])["value"].iloc[0])

    def verdict(self) -> str:
        """One sentence, before any number of the page: whether this build can see an effect of the paper's
        size (the gain's CI narrower than that effect) or cannot test the claim at all, naming the causes its
        answers rest on (constant answers, cut-offs, rows without a finished answer)."""
        caveat = " " + sentence("; ".join(self.causes)) if self.causes else ""
        if self.note and not self.missing:
            return self.note + caveat
        if self.missing or math.isnan(self.value):
            return f"This build cannot test the paper's claim: {self.missing or f'no {self.figure} was computed'}."
        if self.degenerate:
            return (f"This build cannot test the paper's claim: {'; '.join(self.causes)}. So {self.figure} "
                    f"({signed(self.value)} {self.unit}) is what such answers produce, not a finding.")
        return self._width_verdict() + caveat

    def _width_verdict(self) -> str:
        width = self.ci_high - self.ci_low
        paper = f"{signed(self.paper, 2)} pp"
        if width == 0:
            return (f"This build cannot test the paper's claim: for {self.figure} both sides answered alike on every "
                    f"resampled row, so its interval has no width and says nothing about an effect of {paper}.")
        if math.isnan(width) or width > abs(self.paper):
            return (f"This build cannot test the paper's claim: the 95% CI of {self.figure} is {width:.1f} pp wide, "
                    f"wider than the paper's whole effect ({paper}).")
        return (f"This build can test the paper's claim: the 95% CI of {self.figure} is {width:.1f} pp wide, "
                f"narrower than the paper's effect ({paper}).")

    def record(self) -> dict[str, Any]:
        """Plain values for the notebook's metadata (missing numbers as None)."""
        def plain(x: float) -> float | None:
            return None if math.isnan(x) else round(float(x), 2)

        return {"figure": self.figure, "paper_key": self.paper_key, "paper": self.paper, "value": plain(self.value),
                "ci_low": plain(self.ci_low), "ci_high": plain(self.ci_high), "unit": self.unit,
                "verdict": self.verdict(), "causes": list(self.causes), "degenerate": self.degenerate}


def paired_headline(paired: pd.DataFrame, comparison: str, figure: str, paper_key: str, missing: str = "",
                    runs: Mapping[tuple[str, int], Sequence[RunRecord]] | None = None) -> Headline:
    """The key figure from a :func:`tables.paired_frame`: the first seed's gain and CI (the primary run), with
    the causes its answers rest on, read from the ``runs`` the frame was computed from."""
    rows = paired[paired["comparison"] == comparison]
    if rows.empty or missing:
        return Headline(figure, paper_key, missing=missing or f"{figure} was not run")
    first = rows.iloc[0]
    causes, degenerate = pair_causes(runs or {}, comparison, int(first["seed"]), figure)
    return Headline(figure, paper_key, float(first["gain (pp)"]), float(first["CI low"]), float(first["CI high"]),
                    causes=causes, degenerate=degenerate)


METADATA_KEY = "cpdagthink"


def first_screen(setup: RunConfig, instances: Sequence[Instance], seeds: Sequence[int], chapter: str,
                 namespace: Mapping[str, Any], headline: Headline, conditions: Sequence[str] = (),
                 probes: Sequence[str] = ()) -> None:
    """Display the page's first screen (:func:`experiments.banner` with the headline's verdict and the
    command that reproduces the page); its configuration and headline travel in the output's metadata,
    where ``cpdagthink render`` reads them for the intro."""
    from IPython.display import display

    command = ex.reproduce_command(chapter, namespace)
    text = ex.banner(setup, instances, seeds, conditions=conditions, probes=probes, verdict=headline.verdict(),
                     command=command)
    display(text, metadata={METADATA_KEY: {
        "chapter": chapter, "command": command, "headline": headline.record(),
        "configuration": ex.configuration(setup, instances, seeds, conditions, probes)}})
    gaps = label_gaps_note(instances)
    if gaps:
        display(Markdown(gaps))


def label_gaps_note(instances: Sequence[Instance]) -> str:
    """What the page leaves out of its oracle-based views and why: the sample's rows without an oracle label,
    counted by reason (empty when every row has one). Counts and fixed words only: no row's text or id."""
    from ..analysis import audit

    gaps = audit.label_gaps(instances)
    if not gaps:
        return ""
    reasons = "; ".join(f"{counted(n, 'row')}: {why}" for why, n in gaps.items())
    return (f"Left out: {counted(sum(gaps.values()), 'row')} of this sample {'has' if sum(gaps.values()) == 1 else 'have'} "
            f"no oracle label ({reasons}). A premise no DAG satisfies, or one too large for the oracle, is not "
            "posed to the model; text the oracle cannot read is posed. Scores against the corrected labels take "
            "these rows at their published label, the failure gallery does not localise them, and the graph "
            "audit leaves out a row without a reference CPDAG.")


def show_figure(figure, caption: str) -> None:
    """Display a figure a section draws only when it ran, with its caption below it, and close it."""
    import matplotlib.pyplot as plt
    from IPython.display import display

    display(figure)
    display(emphasis(caption))
    plt.close(figure)


def not_run(what: str, command: str) -> Markdown:
    """A section that could not run, collapsed to one sentence and the command that fills it."""
    return Markdown(what, " Fill it with ", code(command), ".")


def trivial_phrase(instances: Sequence[Instance]) -> str:
    """The scores of predictors that read nothing, on this sample (every F1 of a page stands beside them)."""
    t = tables.trivial_predictors([i.label for i in instances])
    return (f"on this sample, answering YES to everything scores F1 {t['always-YES F1']:.1f} and always "
            f"answering the majority class scores accuracy {t['majority-class accuracy']:.1f}")


def constant_phrase(runs: Mapping[tuple[str, int], Sequence[RunRecord]]) -> str:
    """Conditions whose answers were all the same, flagged in prose (empty when none)."""
    found = tables.constant_conditions(runs)
    if not found:
        return ""
    return ("Constant answers: " + "; ".join(f"{tables.label(c)} answered {what}" for c, what in found.items())
            + ". Such a condition's F1 is that of a constant predictor, not a reading of the premise.")


# -------------------------------------------------------------------------------------- 01 main results

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
        "verdict": verdict(paired, comparison, runs),
        "budget_note": budget_note(scores),
        "reference": ("On the reference backend every row above is the reference agent's own." if math.isnan(reference)
                      else f"The reference agent, which reads the oracle's CPDAG exactly, reaches {reference:.1f} "
                      "against gold." + ("" if reference >= 100 else " It falls short of 100 only on rows whose gold "
                                         "label is one of the dataset's 18 errors.")),
        "trivial": sentence(trivial_phrase(instances)),
        "constant": constant_phrase(runs or {}),
    }
    headline = paired_headline(paired, comparison, "the gain of Structured Thinking over BaselineEnhanced",
                               "main_delta", runs=runs)
    summary = main_summary_table(scores, seeds)
    always_yes = tables.trivial_predictors([i.label for i in instances])["always-YES F1"]
    for column in (c for c in summary.columns if c.startswith("this run")):  # the same sample under every seed
        summary.loc["always YES (this sample)", column] = always_yes
    return Reading(numbers, phrases, {"summary_table": summary}, headline)


# -------------------------------------------------------------------------------------- 02 complexity


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
    return "; ".join(f"n = {int(r['variables'])}, seed {int(r['seed'])}: {_gain_clause(r)}"
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
    from ..run.data import FINGERPRINTS

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
        f"{family} {tables.label(condition)}: {r['this run F1']:.1f} on "
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


def show_bin_gains(table: pd.DataFrame) -> None:
    """The per-bin gains beside the paper's and their figure, or one sentence and the command that fills them."""
    from IPython.display import display

    if table.empty:
        display(not_run("No bin of this sample meets both rules, so no per-bin gain is computed.",
                        "cpdagthink book --only 02 -p limit=0"))
        return
    display(tables.show(table))
    show_figure(figures.gain_points(table), "This run's paired gain (structured minus baseline, F1 pp, gold labels) "
                "per number of variables with bootstrap 95% intervals, one point per split and seed; crosses: the "
                "paper's Figure 2 gain for that split and bin.")


def show_ood(ood_paired: pd.DataFrame | None) -> None:
    """The OOD split's paired gain per seed, or one sentence and the command that runs it."""
    from IPython.display import display

    if ood_paired is None:
        display(not_run("No OOD split ran for this page.",
                        "cpdagthink book --only 02 -p ood_split=generated:paraphrase"))
        return
    display(tables.show(tables.gain_table(ood_paired), 3))
    display(tables.show(tables.gain_seed_frame(ood_paired)))
    display(tables.show(tables.paper_view(["gain_paraphrase", "split_size_ood"])))


def show_stress(stress: pd.DataFrame) -> None:
    """The stress sets this run generated beside the paper's pilot, or one sentence and the command."""
    from IPython.display import display

    if stress["this run F1"].isna().all():
        display(not_run("No stress set ran for this page.",
                        """cpdagthink book --only 02 -p 'stress_families=["alarm7"]'"""))
        return
    display(tables.show(stress))
    show_figure(figures.stress_bars(stress), f"F1(YES) per stress family and condition: this run's (left; "
                f"{counted_stress(stress)}) and the paper's Qwen3.5-27B pilot (right, single seed).")


# --------------------------------------------------------------------------------------- 03 ablations


ABLATIONS = {"minimal_instruction": "replacing the PC prompt with a minimal instruction",
             "no_constrained_decoding": "removing the regex constraint", "no_thinking": "switching thinking off"}


def ablation_table(scores: pd.DataFrame, runs: Mapping[tuple[str, int], Sequence[RunRecord]]) -> pd.DataFrame:
    """F1 per condition (mean over seeds) and its drop: Structured Thinking minus the condition (pp; positive:
    the removal hurt). A condition whose drop would not be a finding gets none, and its note says why: a tool
    condition that produced no turn-1 object on any row, or answers that make its F1 degenerate on some seed
    (:func:`answer_causes`), its own or Structured Thinking's."""
    f1 = tables.seed_frame(scores, "gold").set_index("condition")["F1 mean"]
    empty = {c for (c, _), records in runs.items() if tables.produced_no_object(records)}
    degenerate: dict[str, str] = {}
    for (condition, seed), records in runs.items():
        if condition != TARGET and (TARGET, seed) in runs:
            causes, bad = answer_causes({TARGET: runs[(TARGET, seed)], condition: records}, "the drop")
            if bad:
                degenerate.setdefault(condition, f"seed {seed}: " + "; ".join(causes))
    note = pd.Series([NO_OBJECT if c in empty else
                      "no Structured Thinking object on any row" if TARGET in empty and c != TARGET else
                      degenerate.get(c, "") for c in f1.index], index=f1.index)
    drop = (f1.get(TARGET, math.nan) - f1).mask(note != "")
    return pd.DataFrame({"F1": f1, "drop vs Structured Thinking (pp)": drop, "note": note})


NO_OBJECT = "no turn-1 object on any row"


def ablation_phrase(drops: pd.DataFrame, refused: Mapping[str, str]) -> str:
    """Each one-factor removal's drop in words, or why there is none."""
    parts = []
    for condition, what in ABLATIONS.items():
        if condition in refused or condition not in drops.index:
            parts.append(f"{what} was not run")
        elif drops.loc[condition, "note"]:
            parts.append(f"{what} gives no drop to report ({drops.loc[condition, 'note']})")
        else:
            parts.append(f"{what} drops F1 by {signed(drops.loc[condition, 'drop vs Structured Thinking (pp)'])} pp")
    return sentence("; ".join(parts))


def scale_table(scores: pd.DataFrame, model: str | None,
                runs_by_model: Mapping[str, Mapping[tuple[str, int], Sequence[RunRecord]]]) -> pd.DataFrame:
    """F1 (gold, mean over seeds) per condition and model: the setup's ``model`` (``scores``) and each other
    model's runs on the same backend and sample (the scale interaction of App. D)."""
    frames = [scores.assign(model=model or "default")]
    frames += [tables.scores_frame(runs).assign(model=other) for other, runs in runs_by_model.items()]
    every = pd.concat(frames)
    return every[every["labels"] == "gold"].pivot_table(index="condition", columns="model", values="F1", sort=False)


def tool_choice_table(runs: Mapping[tuple[str, int], Sequence[RunRecord]],
                      forced: Mapping[tuple[str, int], Sequence[RunRecord]], seeds: Sequence[int]) -> pd.DataFrame:
    """Structured Thinking with ``tool_choice="auto"`` (plus the prompt instruction, ``runs``) against the tool
    forced by name (App. A.1; ``forced``, keyed ``structured (forced)``): F1 mean and sd over seeds."""
    both = {("structured (auto)", s): runs[(TARGET, s)] for s in seeds} | dict(forced)
    return tables.seed_frame(tables.scores_frame(both))


def ablations(drops: pd.DataFrame, thinking_supported: bool, instances: Sequence[Instance],
              seeds: Sequence[int], refused: Mapping[str, str] | None = None) -> Reading:
    """Chapter 03: each one-factor removal's drop in F1 against Structured Thinking (Structured Thinking minus
    the ablation); ``refused`` names the conditions this model cannot serve (:func:`experiments.refusals`)."""
    refused = refused or {}
    numbers = paper_numbers(["ablation_minimal_f1", "ablation_no_thinking_drop", "ablation_no_constrained_drop",
                             "ablation_9b_no_thinking_structured_gain", "ablation_9b_no_thinking_baseline_gain",
                             "ablation_9b_constrained_gain"])
    note = ("" if thinking_supported else "This model has no thinking mode, so the no-thinking row sends the same "
            "prompts as Structured Thinking: its difference is zero by construction, not a finding.")
    if refused:
        note = Markdown(" ").join(Markdown(code(c), f" was not run: {why}.") for c, why in refused.items())
    return Reading(numbers, sample_phrases(instances, seeds) | {"thinking_note": note,
                                                                "ablation_drops": ablation_phrase(drops, refused)})


def ablation_headline(paired: pd.DataFrame, drops: pd.DataFrame,
                      runs: Mapping[tuple[str, int], Sequence[RunRecord]] | None = None) -> Headline:
    """Chapter 03's key figure: the drop without constrained decoding (Structured Thinking minus it), with
    the first seed's paired CI and the causes its answers rest on (read from ``runs``)."""
    condition = "no_constrained_decoding"
    figure = "the drop without constrained decoding"
    missing = (f"{figure} has nothing to compare: the condition produced {NO_OBJECT}"
               if condition in drops.index and drops.loc[condition, "note"] == NO_OBJECT else "")
    return paired_headline(paired, f"{TARGET} vs {condition}", figure, "ablation_no_constrained_drop", missing, runs)


# ----------------------------------------------------------------------------------------- 04 probes


def probe_grid(runs: Mapping[tuple[str, int], Sequence[RunRecord]], probes: Sequence[str], seeds: Sequence[int],
               agent: str) -> tuple[pd.DataFrame, dict[str, Sequence[RunRecord]], pd.DataFrame]:
    """Every probe on Structured Thinking's recorded turn 1, per seed (``runs`` keyed ``(probe, seed)``, the
    unprobed run as ``unprobed``): :func:`probes.probe_table` rows with the agent's name and seed, the probed
    records of the first seed (for an example), and each probe's drop as a paired comparison
    (``unprobed vs <probe>``: the gain is unprobed minus probed, the drop)."""
    from ..analysis.probes import probe_table

    frames = []
    for seed in seeds:
        probed = {name: runs[(name, seed)] for name in probes}
        frames.append(probe_table(runs[("unprobed", seed)], probed).assign(agent=agent, seed=seed))
    example = {name: runs[(name, seeds[0])] for name in probes}
    paired = tables.paired_frame(runs, "unprobed", probes, n_resamples=2000)
    return pd.concat(frames).reset_index(), example, paired


def probe_headline(paired: pd.DataFrame, runs: Mapping[tuple[str, int], Sequence[RunRecord]],
                   seed: int) -> Headline:
    """Chapter 04's key figure: the drop under the full scramble (unprobed minus probed) at ``seed`` (the
    first), with the causes its answers rest on (``runs``: :func:`probe_grid`'s, keyed ``(probe, seed)``)."""
    missing = ("the model produced no turn-1 object on any row, so there was no graph to probe"
               if tables.produced_no_object(runs[("unprobed", seed)]) else "")
    return paired_headline(paired, "unprobed vs scramble_full", "the drop under the full scramble",
                           "probe_full_drop", missing, runs)


def probe_causes(runs: Mapping[tuple[str, int], Sequence[RunRecord]], probes: Sequence[str], seed: int) -> str:
    """Why the probes' drops at ``seed`` are not findings, from the records (empty when they can be read): the
    unprobed answers' own causes (:func:`answer_causes`) and the probes under which no scored answer changed,
    whose drops are 0 by construction."""
    base = runs[("unprobed", seed)]
    causes, degenerate = answer_causes({"unprobed": base}, "")
    same = [p for p in probes if (p, seed) in runs and [r.says_yes for r in runs[(p, seed)]] == [r.says_yes for r in base]]
    if same and base:
        causes += (f"under {', '.join(map(tables.label, same))} no scored answer changed, so "
                   f"{'its drop is' if len(same) == 1 else 'their drops are'} 0 by construction",)
    if not (degenerate or same):
        return ""
    return sentence(f"Not a finding at seed {seed}: " + "; ".join(causes))


def probe_summary(table: pd.DataFrame) -> pd.DataFrame:
    """Per agent and probe, means over seeds of the F1 drop (gold and oracle labels, pp) and the shares of
    answers flipped and of turns the probe really changed, in % like the drops beside them."""
    columns = ["n", "drop_gold_pp", "drop_oracle_pp", "flipped_share", "intervened_share"]
    means = table.groupby(["agent", "probe"], sort=False)[columns].mean().astype({"n": int})
    shares = ["flipped_share", "intervened_share"]
    return means.assign(**{c: 100 * means[c] for c in shares}).rename(columns={c: f"{c}_pct" for c in shares})


def probe_example(probed: Mapping[str, Sequence[RunRecord]]) -> Markdown:
    """What the first probe changed on its first instance (the note kept in the record, never shown to the
    model)."""
    name, records = next(iter(probed.items()))
    record = records[0]
    note = record.intervention.note if record.intervention else "nothing"
    return Markdown("Example of what a probe changed (", code(name), f", {record.id}): {note}")


def probes_reading(table: pd.DataFrame, agent: str, probes: Sequence[str], instances: Sequence[Instance],
                   seeds: Sequence[int], runs: Mapping[tuple[str, int], Sequence[RunRecord]] | None = None
                   ) -> Reading:
    """Chapter 04: the F1 drop under each probe (unprobed minus probed, as everywhere in the book) for the
    model, with why they are not findings where the model's ``runs`` (:func:`probe_grid`'s) say so, and the
    share of flipped answers for the model and for the reference agent."""
    mean = table.groupby(["agent", "probe"])["drop_gold_pp"].mean()
    flips = table.groupby("agent")["flipped_share"].mean()
    numbers = {f"drop_{p}": float(mean.get((agent, p), math.nan)) for p in probes}
    numbers |= {"flips_model": 100 * float(flips.get(agent, math.nan)),
                "flips_reference": 100 * float(flips.get(REFERENCE, math.nan))}
    numbers |= paper_numbers(["probe_full_drop", "probe_premise_drop", "probe_partial_drop_low",
                              "probe_partial_drop_high"])
    drops = Markdown("; ").join(Markdown(code(p), f" {signed(numbers[f'drop_{p}'])} pp") for p in probes)
    swap = ("" if "swap_valid_cpdag" in probes else
            Markdown(" The validity-preserving swaps were not run (add them to ", code("probes"), ")."))
    flips_reference = ("" if math.isnan(numbers["flips_reference"]) else
                       f", against {numbers['flips_reference']:.0f}% for the reference agent, which by construction "
                       "follows the graph it is shown")
    return Reading(numbers, sample_phrases(instances, seeds) | {
        "probe_drops": Markdown(drops, ".", swap, *([" ", probe_causes(runs, probes, seeds[0])] if runs else [])),
        "flips": f"On average {numbers['flips_model']:.0f}% of this model's answers flip under a probe{flips_reference}."})


# ------------------------------------------------------------------------------------------ 05 audit


def audit_runs(runs: Mapping[tuple[str, int], Sequence[RunRecord]], instances: Sequence[Instance]) -> pd.DataFrame:
    """Every emitted object of every run, audited against the oracle's CPDAG of its premise; records whose
    premise has no reference CPDAG are left out (the first screen counts those rows, :func:`label_gaps_note`)."""
    from ..analysis import audit

    references = {i.id: audit.reference_analysis(i) for i in instances}
    return pd.concat([audit.audit_records([r for r in records if references.get(r.id) is not None],
                                          references.__getitem__).assign(seed=seed)
                      for (_, seed), records in runs.items()], ignore_index=True)


def audit_scopes(runs: Mapping[tuple[str, int], Sequence[RunRecord]], instances: Sequence[Instance],
                 seeds: Sequence[int]) -> dict[str, pd.DataFrame]:
    """The graph audit by scope: first the primary run (the first seed; the paper audits its primary run),
    then, with several seeds, every seed's objects pooled, labelled as such."""
    first = {key: records for key, records in runs.items() if key[1] == seeds[0]}
    scopes = {f"primary run (seed {seeds[0]})": audit_runs(first, instances)}
    if len(seeds) > 1:
        scopes[f"pooled over {counted(len(seeds), 'seed')}"] = audit_runs(runs, instances)
    return scopes


def show_pooled_audit(scopes: Mapping[str, pd.DataFrame], conditions: Sequence[str]) -> None:
    """The audit's rates pooled over every seed (an extra beside the primary run's), or one sentence."""
    from IPython.display import display

    if len(scopes) < 2:
        display(Markdown("One seed ran, so the pooled audit is the primary run's, above."))
        return
    display(tables.show(pooled_summary(scopes, conditions), 3))


def pooled_summary(scopes: Mapping[str, pd.DataFrame], conditions: Sequence[str]) -> pd.DataFrame:
    """:func:`audit.summary_frame` of each scope side by side, one column per condition and scope, named
    by both (``Structured Thinking, pooled over 3 seeds``)."""
    from ..analysis import audit

    return pd.concat([audit.summary_frame(frame, conditions).rename(columns=lambda c: f"{tables.label(c)}, {scope}")
                      for scope, frame in scopes.items()], axis=1)


def violation_caveat() -> Markdown:
    """What this page's violation rate counts beside what the paper's does: an object with any kind the
    certified validator checks in the audit (every structural kind and the premise's variable set; the
    premise checks, ``facts_*``, are not part of the audit), against the paper's undefined "graph-consistency
    violations" (§7.1; §8 says its schema does not certify acyclicity, Meek closure or full consistency)."""
    from ..method.validate import ViolationKind

    audited = [code(k.value) for k in ViolationKind if not k.value.startswith("facts_")]
    return Markdown(
        "The two violation rates are not one measure. This page's counts an object with at least one of the "
        f"certified validator's {len(audited)} kinds (", Markdown(", ").join(audited), "), including the exact certificate "
            "that the object is the CPDAG of some DAG; the paper's counts what it calls graph-consistency "
            "violations, which it does not define further, and its own limitations (§8) say its checks did not "
            "certify acyclicity, Meek closure or full consistency. The validator is the stricter of the two: a "
            "higher rate here does not by itself mean worse graphs than the paper's.")


def audit_reading(summary: pd.DataFrame, errors: pd.DataFrame, split: str, shortcut_count: int,
                  instances: Sequence[Instance], seeds: Sequence[int], gaps: Mapping[str, int] | None = None
                  ) -> Reading:
    """Chapter 05: the structured condition's field scores and violation rate, the split's gold errors and
    its alphabetical-order shortcut; ``gaps`` (:func:`audit.label_gaps` of the split) are the split's rows
    the oracle gives no label, which neither compares."""
    s = summary.loc[TARGET] if TARGET in summary.index else pd.Series(dtype=float)
    numbers = {name: float(s.get(column, math.nan)) for name, column in
               [("skeleton_f1", "skeleton_f1"), ("vstructure_f1", "v_structures_f1"), ("directed_f1", "directed_f1")]}
    numbers |= {"exact_pct": 100 * float(s.get("exact_match_rate", math.nan)),
                "violations_pct": 100 * float(s.get("violation_rate", math.nan))}
    numbers |= paper_numbers(["audit_skeleton_f1", "audit_vstructure_f1", "audit_directed_f1", "audit_exact",
                              "audit_violations_id", "audit_violations_ood"])
    phrases = sample_phrases(instances, seeds) | {
        "gold_errors": (Markdown("The oracle disagrees with gold on ", strong(len(errors)), " rows of the ", code(split),
                                 f" split ({int((errors.gold == 0).sum())} gold 0 / oracle 1, "
                                 f"{int((errors.gold == 1).sum())} gold 1 / oracle 0).") if len(errors) else
                        Markdown("The oracle agrees with gold on every row of the ", code(split), " split.")) + _gaps_clause(gaps),
        "violation_caveat": violation_caveat(),
        "shortcut": (f"In the whole split, {counted(shortcut_count, 'causal hypothesis', 'causal hypotheses')} "
                     f"{'names' if shortcut_count == 1 else 'name'} a cause declared after its effect; all are "
                     "labelled 0, so answering NO to them is free accuracy that says nothing about causal reasoning."
                     + _gaps_clause({why: n for why, n in (gaps or {}).items() if why == GAPS[UNREADABLE]})),
    }
    return Reading(numbers, phrases)


def _gaps_clause(gaps: Mapping[str, int] | None) -> str:
    """The split's rows without an oracle label, left out of a comparison (empty when there are none)."""
    if not gaps:
        return ""
    return (f" Left out: {counted(sum(gaps.values()), 'row')} of the split with no oracle label ("
            + "; ".join(f"{counted(n, 'row')}: {why}" for why, n in gaps.items()) + ").")


def show_violations(audited: pd.DataFrame, instances: Sequence[Instance], seeds: Sequence[int]) -> None:
    """Violation rates by kind and their figure, or one sentence when no parsed output had one."""
    from IPython.display import display

    from ..analysis import audit

    rates, counts = audit.violation_rates(audited), audit.violation_counts(audited)
    if not len(rates) or not (counts["outputs"] > 0).any():
        display(Markdown("No parsed output of this run had a violation (or none was parsed)."))
        return
    display(tables.show(rates, 3))
    show_figure(figures.count_bars(counts, "outputs", "violation_kinds", "condition", "outputs with this violation"),
                f"This run's parsed outputs showing each violation kind of the certified CPDAG validator, per "
                f"condition, on {counted(len(instances), 'instance')} × {counted(len(seeds), 'seed')}. The paper "
                "reports only the overall violation rate.")


def violation_causes(audited: pd.DataFrame, condition: str = TARGET, most: int = 2) -> tuple[str, ...]:
    """The violation kinds shown by most of ``condition``'s parsed objects in ``audited``
    (:func:`audit_runs`), at most ``most`` of them, each counted against the parsed objects."""
    from ..analysis import audit

    if not len(audited):
        return ()
    mine = audited[audited["condition"] == condition]
    parsed = int((mine["graph_quality"] != "unparsed").sum())
    counts = audit.violation_counts(mine).sort_values("outputs", ascending=False, kind="stable").head(most)
    return tuple(f"{int(n)} of {parsed} parsed {tables.label(condition)} objects show the violation “{tables.label(kind)}”"
                 for kind, n in zip(counts["violation_kinds"], counts["outputs"]))


def audit_headline(summary: pd.DataFrame, runs: Mapping[tuple[str, int], Sequence[RunRecord]],
                   audited: pd.DataFrame | None = None) -> Headline:
    """Chapter 05 measures rather than tests a gain: its key figure is Structured Thinking's skeleton F1
    (``summary``: :func:`audit.summary_frame`, measures by condition), its verdict counts the objects audited
    and names the violation kinds most of them show (``audited``: :func:`audit_runs` of the same runs)."""
    records = [r for (c, _), rs in runs.items() if c == TARGET for r in rs]
    parsed = sum(r.emitted is not None for r in records)
    figure = "Structured Thinking's skeleton F1"
    if not parsed:
        return Headline(figure, "audit_skeleton_f1", missing="no turn-1 object was parsed, so there is nothing to audit")
    value = float(summary.loc["skeleton_f1", TARGET]) if TARGET in summary.columns else math.nan
    return Headline(figure, "audit_skeleton_f1", value, unit="", note=(
        f"This chapter describes rather than tests: it audits {parsed} parsed objects of "
        f"{counted(len(records), 'Structured Thinking answer')}; its rates are descriptive at this size."),
        causes=violation_causes(audited) if audited is not None else ())


# ---------------------------------------------------------------------------------------- 06 gallery


def failure_kinds(counts: pd.DataFrame) -> pd.DataFrame:
    """The per-kind columns of :func:`failures.failure_counts` in long form (condition, kind, errors)."""
    from ..analysis.failures import KIND_ORDER

    kinds = [k.value for k in KIND_ORDER]
    return counts[kinds].reset_index().melt(id_vars="condition", var_name="kind", value_name="errors")


def gallery_headline(counts: pd.DataFrame) -> Headline:
    """Chapter 06's key figure: the errors it localised, beside the paper's hand-labelled sample (descriptive,
    so its verdict says what the page does rather than whether it tests a claim)."""
    errors, answers = int(counts["errors"].sum()), int(counts["n"].sum())
    of = f" of {counted(answers, 'answer')}"
    return Headline("errors localised", "gallery_cases", float(errors), unit="", note=(
        f"This chapter describes rather than tests: it localises {counted(errors, 'error')}{of} of this run "
        "automatically, where the paper hand-labels a diagnostic sample of 32."))


def gallery_reading(counts: pd.DataFrame, instances: Sequence[Instance], seeds: Sequence[int],
                    records: Mapping[str, Sequence[RunRecord]] | None = None) -> Reading:
    """Chapter 06: errors per condition against the corrected labels (those the gallery localises), and,
    given the ``records``, against the published labels too, as chapter 01 counts them."""
    errors = ", ".join(f"{c}: {counted(int(n), 'error')}" for c, n in counts["errors"].items()) or "none"
    published = ", ".join(f"{c}: {counted(sum(int(r.says_yes) != r.gold_label for r in rs), 'error')}"
                          for c, rs in (records or {}).items()) or "none"
    return Reading(paper_numbers(["gallery_cases"]), sample_phrases(instances, seeds) | {
        "errors": errors, "published_errors": published})
