"""The glue every chapter's reading uses: :class:`Reading` and :class:`Headline`, the small phrases (signed
numbers, sentences, counts, the paper's figures) and the page's first screen.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import pandas as pd

from ...backends import answers_without_model
from ...analysis import tables
from ...analysis.markup import Markdown, code, emphasis
from ...analysis.metrics import counted
from ...causal.instance import Instance
from ...run.config import RunSet
from ...run.records import RunRecord
from .. import experiments as ex
from .. import presentation
from ..chapters import METADATA_KEY, reproduce_command


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
            glue(name, presentation.markdown_table(table), display=False)


def glue_figure(name: str, figure) -> None:
    """Glue a matplotlib figure for a ``{glue:figure}`` directive (with its caption) and close it, so it is
    shown once, where the caption is."""
    import matplotlib.pyplot as plt
    from myst_nb import glue

    glue(name, figure, display=False)
    plt.close(figure)


def show_figure(figure, caption: str) -> None:
    """Display a figure a section draws only when it ran, with its caption below it, and close it."""
    import matplotlib.pyplot as plt
    from IPython.display import display

    display(figure)
    display(emphasis(caption))
    plt.close(figure)


def fill_command(chapter: str, namespace: Mapping[str, Any], **changes: Any) -> str:
    """The command that fills a section this page did not run: the page's own (its backend, model, limit and
    every other parameter it ran with, :func:`chapters.reproduce_command`) with ``changes``."""
    return reproduce_command(chapter, {**namespace, **changes})


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
    return ("Constant answers: " + "; ".join(f"{presentation.label(c)} answered {what}" for c, what in found.items())
            + ". Such a condition's F1 is that of a constant predictor, not a reading of the premise.")


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
    """``= 0.04``, ``< 0.001`` or ``= n/a``: a p-value after its name (:func:`presentation.p_text`)."""
    text = presentation.p_text(p)
    return text if text.startswith("<") else f"= {text}"


def gain_clause(row: Mapping[str, Any]) -> str:
    return (f"{signed(row['gain (pp)'])} pp (95% CI [{signed(row['CI low'])}, {signed(row['CI high'])}], "
            f"McNemar p {p_value(row['McNemar p'])})")


def per_seed_gains(paired: pd.DataFrame, comparison: str) -> str:
    """Each seed's own gain, interval and p, in one sentence fragment (never averaged across seeds)."""
    rows = paired[paired["comparison"] == comparison]
    if rows.empty:
        return "no paired run"
    return "; ".join(f"seed {int(r['seed'])}: {gain_clause(r)}" for _, r in rows.iterrows())


def sample_phrases(instances: Sequence[Instance], seeds: Sequence[int]) -> dict[str, str]:
    positives = sum(i.label for i in instances)
    return {"sample_size": counted(len(instances), "instance"),
            "sample_positives": counted(positives, "gold positive"),
            "seed_count": counted(len(seeds), "seed")}


def scale_phrase(instances: Sequence[Instance], backend: str) -> str:
    """What a page's differences can mean at this run's size and for what answered, chosen from the run (never
    from the default sample): the reference agent's rows show the pipeline on an exact graph, not a model; a
    small sample leaves only large differences outside the noise; a large one lets each interval decide."""
    n = counted(len(instances), "instance")
    if answers_without_model(backend):  # what answered is the page's verdict, said once on its first screen
        return "These rows show what the pipeline does with a perfect graph."
    if len(instances) < 100:
        return (f"With {n}, differences of a few points are within noise; only large ones, with intervals that "
                "exclude zero, say more.")
    return f"With {n}, each figure's own interval says which differences are more than noise."


def paper_numbers(keys: Sequence[str]) -> dict[str, float]:
    """Paper figures by glue name ``paper_<key>``."""
    table = tables.paper(keys)
    return {f"paper_{k}": float(v) for k, v in zip(table["key"], table["value"])}


AGREES = "This build answers the paper's claim in its direction"
AGAINST = "This build answers the paper's claim against its direction"
NO_EFFECT = "This build finds no effect of the paper's size"
UNDECIDED = "This build cannot tell the direction"


def claim_status(value: float, low: float, high: float, paper: float) -> str:
    """What a key figure's 95% CI answers about the paper's figure ``paper`` (all in pp): an interval wholly on
    one side of zero answers the direction (:data:`AGREES` with the paper's sign, :data:`AGAINST` otherwise),
    whatever its width; one that contains zero is :data:`NO_EFFECT` when it is narrower than the paper's
    effect (so it excludes it), :data:`UNDECIDED` otherwise; empty when a number is missing."""
    if any(x is None or math.isnan(x) for x in (value, low, high)):
        return ""
    if low > 0 or high < 0:
        return AGREES if (low > 0) == (paper > 0) else AGAINST
    return NO_EFFECT if high - low < abs(paper) else UNDECIDED


def paper_figure(value: float) -> str:
    """A paper's figure signed, at the paper's own precision (``+13.35``, ``+5.2``): as ``paper_reported.csv``
    holds it, with no digits added or rounded away."""
    return f"{value:+g}"


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
    answered_by: str = ""  # the backend kind that answered ("reference": an upper bound, not a model)

    @property
    def paper(self) -> float:
        return float(tables.paper([self.paper_key])["value"].iloc[0])

    def verdict(self) -> str:
        """One sentence, before any number of the page: what this build's interval answers about the paper's
        claim (:func:`claim_status`: an interval that excludes zero answers its direction, whatever its width;
        the width only decides whether the build can tell the paper's size of effect from another), or why it
        cannot test it, naming the causes its answers rest on (constant answers, cut-offs, rows without a
        finished answer). What the reference agent answered is never read as evidence about LLMs."""
        caveat = " " + sentence("; ".join(self.causes)) if self.causes else ""
        if self.note and not self.missing:
            return self.note + caveat
        if self.missing or math.isnan(self.value):
            return f"This build cannot test the paper's claim: {self.missing or f'no {self.figure} was computed'}."
        if self.answered_by == "reference":
            return (f"This build makes no claim about LLMs: the symbolic reference agent answered, an upper bound "
                    f"that reads the exact CPDAG, not a model; {self.figure} is {self._interval()} for that agent.")
        if self.degenerate:
            return (f"This build cannot test the paper's claim: {'; '.join(self.causes)}. So {self.figure} "
                    f"({signed(self.value)} {self.unit}) is what such answers produce, not a finding.")
        return self._interval_verdict() + caveat

    def _interval(self) -> str:
        unit = f" {self.unit}" if self.unit else ""
        return f"{signed(self.value)}{unit} (95% CI [{signed(self.ci_low)}, {signed(self.ci_high)}])"

    def _interval_verdict(self) -> str:
        status = claim_status(self.value, self.ci_low, self.ci_high, self.paper)
        width, paper = self.ci_high - self.ci_low, f"{paper_figure(self.paper)} pp"
        interval = f"{self.figure} is {self._interval()}"
        if status in (AGREES, AGAINST):
            where = "wholly above zero" if self.ci_low > 0 else "wholly below zero"
            inside = "inside" if self.ci_low <= self.paper <= self.ci_high else "outside"
            size = (f"at {width:.1f} pp wide it can tell an effect of the paper's size ({paper}, {inside} the interval) "
                    "from another" if width <= abs(self.paper) else
                    f"at {width:.1f} pp wide it cannot tell the paper's size of effect ({paper}) from another")
            return f"{status}: {interval}, an interval {where}; {size}."
        if status == NO_EFFECT and width == 0:
            return (f"{status}: {interval}; both sides gave the same scored answer on every row, so the interval "
                    f"has no width and excludes an effect of the paper's size ({paper}).")
        if status == NO_EFFECT:
            return (f"{status}: {interval}, an interval that contains zero and is {width:.1f} pp wide, narrower than "
                    f"the paper's effect ({paper}).")
        return (f"{status}: {interval}, an interval that contains zero and is {width:.1f} pp wide, wider than the "
                f"paper's effect ({paper}), so this run cannot separate the two sides.")

    def record(self) -> dict[str, Any]:
        """Plain values for the notebook's metadata (missing numbers as None)."""
        def plain(x: float) -> float | None:
            return None if math.isnan(x) else round(float(x), 2)

        return {"figure": self.figure, "paper_key": self.paper_key, "paper": self.paper, "value": plain(self.value),
                "ci_low": plain(self.ci_low), "ci_high": plain(self.ci_high), "unit": self.unit,
                "verdict": self.verdict(), "causes": list(self.causes), "degenerate": self.degenerate,
                "answered_by": self.answered_by}


def first_screen(setup: RunSet, instances: Sequence[Instance], seeds: Sequence[int], chapter: str,
                 namespace: Mapping[str, Any], headline: Headline, conditions: Sequence[str] = (),
                 probes: Sequence[str] = ()) -> None:
    """Display the page's first screen (:func:`experiments.banner` with the headline's verdict and the
    command that reproduces the page); its configuration and headline travel in the output's metadata,
    where ``cpdagthink render`` reads them for the intro."""
    from IPython.display import display

    command = reproduce_command(chapter, namespace)
    # the verdict knows what answered: a reference run's figures are an upper bound's, not a model's
    headline = replace(headline, answered_by=headline.answered_by or setup.backend)
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
    from ...analysis import audit

    gaps = audit.label_gaps(instances)
    if not gaps:
        return ""
    reasons = "; ".join(f"{counted(n, 'row')}: {why}" for why, n in gaps.items())
    return (f"Left out: {counted(sum(gaps.values()), 'row')} of this sample {'has' if sum(gaps.values()) == 1 else 'have'} "
            f"no oracle label ({reasons}). A premise no DAG satisfies, or one too large for the oracle, is not "
            "posed to the model; text the oracle cannot read is posed. Scores against the corrected labels take "
            "these rows at their published label, the failure gallery does not localise them, and the graph "
            "audit leaves out a row without a reference CPDAG.")
