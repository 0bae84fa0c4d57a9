"""Chapter 05, the graph audit: every emitted object against the oracle's CPDAG, the violations of the
certified validator and the split's gold errors.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import pandas as pd

from ...analysis.markup import Markdown, code, strong
from ...analysis.metrics import counted
from ...causal.instance import Instance
from ...causal.oracle import GAPS, UNREADABLE
from ...run.records import RunRecord
from .. import presentation
from .glue import Headline, Reading, TARGET, paper_numbers, sample_phrases, show_figure


def audit_runs(runs: Mapping[tuple[str, int], Sequence[RunRecord]], instances: Sequence[Instance]) -> pd.DataFrame:
    """Every emitted object of every run, audited against the oracle's CPDAG of its premise; records whose
    premise has no reference CPDAG are left out (the first screen counts those rows, :func:`label_gaps_note`)."""
    from ...analysis import audit

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
    display(presentation.show(pooled_summary(scopes, conditions), 3))


def pooled_summary(scopes: Mapping[str, pd.DataFrame], conditions: Sequence[str]) -> pd.DataFrame:
    """:func:`audit.summary_frame` of each scope side by side, one column per condition and scope, named
    by both (``Structured Thinking, pooled over 3 seeds``)."""
    from ...analysis import audit

    return pd.concat([audit.summary_frame(frame, conditions).rename(columns=lambda c: f"{presentation.label(c)}, {scope}")
                      for scope, frame in scopes.items()], axis=1)


def violation_caveat() -> Markdown:
    """What this page's violation rate counts beside what the paper's does: an object with any kind the
    certified validator checks in the audit (every structural kind and the premise's variable set; the
    premise checks, ``facts_*``, are not part of the audit), against the paper's undefined "graph-consistency
    violations" (§7.1; §8 says its schema does not certify acyclicity, Meek closure or full consistency)."""
    from ...method.validate import ViolationKind

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
                        Markdown("The oracle agrees with gold on every row of the ", code(split), " split."))
                       + _class_evidence(errors) + _gaps_clause(gaps),
        "violation_caveat": violation_caveat(),
        "shortcut": (f"In the whole split, {counted(shortcut_count, 'causal hypothesis', 'causal hypotheses')} "
                     f"{'names' if shortcut_count == 1 else 'name'} a cause declared after its effect; all are "
                     "labelled 0, so answering NO to them is free accuracy that says nothing about causal reasoning."
                     + _gaps_clause({why: n for why, n in (gaps or {}).items() if why == GAPS[UNREADABLE]})),
    }
    return Reading(numbers, phrases)


def _class_evidence(errors: pd.DataFrame) -> str:
    """What listing each disagreeing row's class DAG by DAG shows (:func:`audit.gold_errors` ``holds_in``): a
    hypothesis that holds in every DAG of the class is entailed (its label is 1), one that fails in some is not
    (0). Counted from the rows, so a row where the listing sided with gold would be said too."""
    if not len(errors) or "holds_in" not in errors:
        return ""
    every = errors["holds_in"] == errors["class_size"]
    with_oracle = int((every == (errors["oracle"] == 1)).sum())
    return (f" Each row's class is listed DAG by DAG in the table below: on {with_oracle} of the {len(errors)} the "
            "listing agrees with the oracle (the hypothesis holds in every DAG of the class where the oracle says 1, "
            "fails in at least one where it says 0), so there the published label contradicts the premise.")


def _gaps_clause(gaps: Mapping[str, int] | None) -> str:
    """The split's rows without an oracle label, left out of a comparison (empty when there are none)."""
    if not gaps:
        return ""
    return (f" Left out: {counted(sum(gaps.values()), 'row')} of the split with no oracle label ("
            + "; ".join(f"{counted(n, 'row')}: {why}" for why, n in gaps.items()) + ").")


def show_violations(audited: pd.DataFrame, instances: Sequence[Instance], seeds: Sequence[int]) -> None:
    """Violation rates by kind and their figure, or one sentence when no parsed output had one."""
    from IPython.display import display

    from ...analysis import audit
    from .. import figures  # seaborn and matplotlib, loaded where a figure is drawn: the planner imports this package

    rates, counts = audit.violation_rates(audited), audit.violation_counts(audited)
    if not len(rates) or not (counts["outputs"] > 0).any():
        display(Markdown("No parsed output of this run had a violation (or none was parsed)."))
        return
    display(presentation.show(rates, 3))
    show_figure(figures.count_bars(counts, "outputs", "violation_kinds", "condition", "outputs with this violation"),
                f"This run's parsed outputs showing each violation kind of the certified CPDAG validator, per "
                f"condition, on {counted(len(instances), 'instance')} × {counted(len(seeds), 'seed')}. The paper "
                "reports only the overall violation rate.")


def violation_causes(audited: pd.DataFrame, condition: str = TARGET, most: int = 2) -> tuple[str, ...]:
    """The violation kinds shown by most of ``condition``'s parsed objects in ``audited``
    (:func:`audit_runs`), at most ``most`` of them, each counted against the parsed objects."""
    from ...analysis import audit

    if not len(audited):
        return ()
    mine = audited[audited["condition"] == condition]
    parsed = int((mine["graph_quality"] != "unparsed").sum())
    counts = audit.violation_counts(mine).sort_values("outputs", ascending=False, kind="stable").head(most)
    return tuple(f"{int(n)} of {parsed} parsed {presentation.label(condition)} objects show the violation “{presentation.label(kind)}”"
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
