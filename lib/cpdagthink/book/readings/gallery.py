"""Chapter 06, the failure gallery: the errors it localises, per condition and kind.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd

from ...analysis.metrics import counted
from ...causal.instance import Instance
from ...run.records import RunRecord
from .glue import Headline, Reading, paper_numbers, sample_phrases


def failure_kinds(counts: pd.DataFrame) -> pd.DataFrame:
    """The per-kind columns of :func:`failures.failure_counts` in long form (condition, kind, errors)."""
    from ...analysis.failures import KIND_ORDER

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
