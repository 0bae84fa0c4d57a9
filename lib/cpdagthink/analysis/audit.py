"""Audits: emitted CPDAG fields against the reference (paper §7.1), the dataset's gold errors, and the
alphabetical-order shortcut.

Field scores are set-based. The four compared fields and their element types:

* skeleton: unordered pairs ``{X, Y}`` (read from the ``skeleton`` field);
* v-structures: ``({X, Y}, Z)`` (X -> Z <- Y, the two tails unordered);
* directed edges: ordered pairs ``(tail, head)``;
* undirected edges: unordered pairs.

Empty-set conventions: precision = 1 when nothing is emitted, recall = 1 when the reference is empty (both
vacuous), and F1 = 2·tp / (|emitted| + |reference|), which is 1.0 when both are empty and 0 whenever
tp = 0 otherwise. Many Corr2Cause CPDAGs have no v-structure; emitting none there is a perfect answer.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from ..causal.dag import holds
from ..causal.instance import Instance
from ..causal.oracle import UnfaithfulFactsError, analyse_premise, readable_label
from ..causal.premise import PremiseError, Relation, pair, parse_hypothesis, parse_premise
from ..method.schema import CausalAnalysis
from ..method.validate import ViolationKind, violations
from ..run.records import RunRecord

FIELDS = ("skeleton", "v_structures", "directed", "undirected")
QUALITIES = ("exact", "valid_not_exact", "violations", "unparsed")


@dataclass(frozen=True)
class FieldScore:
    """Precision, recall and F1 of one field, with the counts they come from."""

    tp: int
    emitted: int
    reference: int

    @property
    def precision(self) -> float:
        return self.tp / self.emitted if self.emitted else 1.0

    @property
    def recall(self) -> float:
        return self.tp / self.reference if self.reference else 1.0

    @property
    def f1(self) -> float:
        total = self.emitted + self.reference
        return 2 * self.tp / total if total else 1.0


@dataclass(frozen=True)
class FieldScores:
    """Per-field scores of one emitted object and whether all four fields match exactly."""

    skeleton: FieldScore
    v_structures: FieldScore
    directed: FieldScore
    undirected: FieldScore
    exact_match: bool


def field_sets(a: CausalAnalysis) -> dict[str, frozenset]:
    """The four compared fields of an object as sets (see the module docstring)."""
    return {
        "skeleton": frozenset(pair(x, y) for x, y in a.skeleton),
        "v_structures": frozenset((pair(x, y), z) for x, z, y in a.v_structures),
        "directed": frozenset((x, y) for x, y in a.directed_edges),
        "undirected": frozenset(pair(x, y) for x, y in a.undirected_edges),
    }


def _score(emitted: frozenset, reference: frozenset) -> FieldScore:
    return FieldScore(tp=len(emitted & reference), emitted=len(emitted), reference=len(reference))


def field_scores(emitted: CausalAnalysis, reference: CausalAnalysis) -> FieldScores:
    """Set-based precision/recall/F1 of each field; ``exact_match`` iff all four sets are equal."""
    got, want = field_sets(emitted), field_sets(reference)
    scores = {name: _score(got[name], want[name]) for name in FIELDS}
    return FieldScores(**scores, exact_match=all(got[name] == want[name] for name in FIELDS))


# ------------------------------------------------------------------------------------ run records


def graph_quality(scores: FieldScores | None, kinds: Sequence[str]) -> str:
    """``exact`` beats everything (the reference is valid, though a stray sepset may still violate),
    then ``valid_not_exact``, then ``violations``; a missing object is ``unparsed``."""
    if scores is None:
        return "unparsed"
    if scores.exact_match:
        return "exact"
    return "violations" if kinds else "valid_not_exact"


def audit_record(record: RunRecord, reference: CausalAnalysis) -> dict[str, Any]:
    """One audit row for a run record."""
    emitted = record.emitted
    scores = field_scores(emitted, reference) if emitted is not None else None
    # Against the premise's variables too: a foreign name is a violation, not a parse failure.
    kinds = sorted({v.kind.value for v in violations(emitted, variables=reference.variables)}) if emitted is not None else []
    oracle = record.oracle_label
    row: dict[str, Any] = {"id": record.id, "condition": record.condition, "parsed": emitted is not None}
    for name in FIELDS:
        row[f"{name}_f1"] = getattr(scores, name).f1 if scores else float("nan")
        for count in ("tp", "emitted", "reference"):
            row[f"{name}_{count}"] = getattr(getattr(scores, name), count) if scores else 0
    row.update(
        exact_match=bool(scores and scores.exact_match),
        valid=None if emitted is None else not kinds,
        violation_kinds=kinds,
        graph_quality=graph_quality(scores, kinds),
        prediction=record.prediction,
        gold_label=record.gold_label,
        oracle_label=oracle,
        correct=int(record.says_yes) == record.gold_label,
        correct_corrected=None if oracle is None else int(record.says_yes) == oracle,
    )
    return row


def reference_analysis(instance: Instance) -> CausalAnalysis | None:
    """The oracle's CPDAG of an instance's premise as a :class:`CausalAnalysis`; None when it has none (a
    premise no DAG satisfies, one too large for the oracle, or one it cannot read)."""
    try:
        return CausalAnalysis.from_cpdag(analyse_premise(instance.premise).cpdag)
    except (UnfaithfulFactsError, PremiseError):
        return None


def label_gaps(instances: Iterable[Instance]) -> dict[str, int]:
    """How many instances have no oracle label, by why (:attr:`OracleLabel.gap`, in its alphabetical order;
    absent reasons are left out)."""
    gaps: dict[str, int] = {}
    for instance in instances:
        gap = readable_label(instance.text).gap
        if gap is not None:
            gaps[gap] = gaps.get(gap, 0) + 1
    return dict(sorted(gaps.items()))


def audit_records(records: Iterable[RunRecord], reference_for: Callable[[str], CausalAnalysis]) -> pd.DataFrame:
    """One row per record of a tool-flow run: parse status, per-field F1 (and counts), exact match,
    validity, violation kinds, graph quality, and correctness against gold and corrected labels.

    ``reference_for(record_id)`` returns the reference object, e.g.
    ``CausalAnalysis.from_cpdag(analyse_premise(instance.premise).cpdag)``.
    """
    rows = [audit_record(r, reference_for(r.id)) for r in records]
    frame = pd.DataFrame(rows)
    if not rows:
        return frame
    frame["correct_corrected"] = frame["correct_corrected"].astype("boolean")
    frame["valid"] = frame["valid"].astype("boolean")
    return frame


def audit_summary(df: pd.DataFrame) -> dict[str, Any]:
    """Rates over the parsed records: mean per-record F1 of each field (``<field>_f1``), the pooled
    (micro) F1 from summed counts (``<field>_f1_micro``), exact-match and violation rates, and the share
    of parsed records showing each violation kind."""
    parsed = df[df["parsed"]] if len(df) else df
    n = len(parsed)
    summary: dict[str, Any] = {"records": len(df), "parsed": n, "parse_rate": n / len(df) if len(df) else float("nan")}
    for name in FIELDS:
        summary[f"{name}_f1"] = float(parsed[f"{name}_f1"].mean()) if n else float("nan")
        pooled = FieldScore(*(int(parsed[f"{name}_{c}"].sum()) if n else 0 for c in ("tp", "emitted", "reference")))
        summary[f"{name}_f1_micro"] = pooled.f1 if n else float("nan")
    summary["exact_match_rate"] = float(parsed["exact_match"].mean()) if n else float("nan")
    summary["violation_rate"] = float((~parsed["valid"].astype(bool)).mean()) if n else float("nan")
    summary["violation_kind_rates"] = {
        kind.value: sum(kind.value in lst for lst in parsed["violation_kinds"]) / n if n else float("nan")
        for kind in ViolationKind
    }
    return summary


def accuracy_by_quality(df: pd.DataFrame) -> pd.DataFrame:
    """``n``, ``accuracy`` (against gold) and ``accuracy_corrected`` per graph quality, in the order
    exact, valid_not_exact, violations, unparsed (absent qualities: n = 0, accuracy NaN)."""
    rows = []
    for quality in QUALITIES:
        part = df[df["graph_quality"] == quality] if len(df) else df
        rows.append({
            "graph_quality": quality,
            "n": len(part),
            "accuracy": float(part["correct"].mean()) if len(part) else float("nan"),
            "accuracy_corrected": float(part["correct_corrected"].astype("Float64").mean()) if len(part) else float("nan"),
        })
    return pd.DataFrame(rows).set_index("graph_quality")


def summary_frame(audited: pd.DataFrame, conditions: Sequence[str]) -> pd.DataFrame:
    """:func:`audit_summary` per condition, transposed for reading: one row per rate, one column per
    condition (the per-kind violation shares are in :func:`violation_rates`)."""
    return pd.DataFrame({c: {k: v for k, v in audit_summary(audited[audited["condition"] == c]).items()
                             if k != "violation_kind_rates"} for c in conditions})


def violation_kinds(audited: pd.DataFrame) -> pd.DataFrame:
    """One row per (parsed output, violation kind it shows)."""
    parsed = audited[audited["graph_quality"] != "unparsed"] if len(audited) else audited
    if parsed.empty:
        return pd.DataFrame(columns=["condition", "violation_kinds"])
    return parsed.explode("violation_kinds").dropna(subset=["violation_kinds"])


def violation_counts(audited: pd.DataFrame) -> pd.DataFrame:
    """Per condition and violation kind, the number of parsed outputs showing it (long form, for a plot)."""
    counts = violation_kinds(audited).groupby(["condition", "violation_kinds"]).size()
    return counts.rename("outputs").reset_index()


def violation_rates(audited: pd.DataFrame) -> pd.DataFrame:
    """Share of each condition's parsed outputs showing each violation kind (rows: kinds; empty if none)."""
    kinds = violation_kinds(audited)
    if kinds.empty:
        return pd.DataFrame()
    parsed = audited[audited["graph_quality"] != "unparsed"].groupby("condition").size()
    return (kinds.groupby(["condition", "violation_kinds"]).size() / parsed).unstack(0).fillna(0)


def quality_frame(audited: pd.DataFrame, conditions: Sequence[str]) -> pd.DataFrame:
    """:func:`accuracy_by_quality` for each condition, stacked (index: condition, graph quality)."""
    return pd.concat({c: accuracy_by_quality(audited[audited["condition"] == c]) for c in conditions},
                     names=["condition"])


# ------------------------------------------------------------------------------------ dataset audit


def _edges_text(cpdag) -> tuple[str, str]:
    order = {v: i for i, v in enumerate(cpdag.variables)}
    directed = ", ".join(f"{a}->{b}" for a, b in sorted(cpdag.directed, key=lambda e: (order[e[0]], order[e[1]])))
    undirected = ", ".join(
        "-".join(sorted(p, key=order.__getitem__)) for p in sorted(cpdag.undirected, key=lambda p: sorted(order[v] for v in p)))
    return directed, undirected


def gold_errors(instances: Sequence[Instance]) -> pd.DataFrame:
    """Every row whose oracle label (``label_text``) differs from gold, with its equivalence class and the
    evidence a reader can check: ``holds_in``, in how many of the class's DAGs (listed one by one, not the
    oracle's CPDAG reading) the hypothesis holds. Gold 1 is right only if it holds in all of them, gold 0 only if
    it fails in at least one.

    Rows the oracle cannot label (:func:`label_gaps` counts them) are not disagreements and are left out.
    """
    rows = []
    for index, instance in enumerate(instances):
        verdict = readable_label(instance.text)
        if verdict.label is None or verdict.label == instance.label:
            continue
        analysis = analyse_premise(instance.premise)
        directed, undirected = _edges_text(analysis.cpdag)
        rows.append({
            "index": index,
            "id": instance.id,
            "template": instance.template,
            "num_variables": instance.num_variables,
            "hypothesis": instance.hypothesis,
            "gold": instance.label,
            "oracle": verdict.label,
            "class_size": len(analysis.members),
            "holds_in": sum(holds(member, verdict.query) for member in analysis.members),
            "directed": directed,
            "undirected": undirected,
        })
    columns = ["index", "id", "template", "num_variables", "hypothesis", "gold", "oracle", "class_size", "holds_in",
               "directed", "undirected"]
    return pd.DataFrame(rows, columns=columns)


def later_causes_earlier(instance: Instance) -> bool:
    """A direct or indirect causal hypothesis whose cause is declared after its effect in the premise (False
    for a row whose premise or hypothesis the oracle cannot read)."""
    try:
        variables = parse_premise(instance.premise).variables
        query = parse_hypothesis(instance.hypothesis, variables)
    except PremiseError:
        return False
    if query.relation not in (Relation.DIRECT_CAUSE, Relation.INDIRECT_CAUSE):
        return False
    return variables.index(query.x) > variables.index(query.y)


def _is_causal(instance: Instance) -> bool:
    try:
        query = parse_hypothesis(instance.hypothesis)
    except PremiseError:
        return False
    return query.relation in (Relation.DIRECT_CAUSE, Relation.INDIRECT_CAUSE)


def shortcut_table(records_by_condition: Mapping[str, Sequence[RunRecord]], instances: Sequence[Instance]) -> pd.DataFrame:
    """Per condition, on the later-causes-earlier hypotheses: how many, the share predicted NO (the
    shortcut's answer; an unparsed answer counts as NO, as in :mod:`cpdagthink.analysis.metrics`), and whether
    gold (and the oracle) label every one 0. ``no_rate_other_causal`` is the NO share on the remaining
    causal hypotheses, for contrast."""
    by_id = {i.id: i for i in instances}
    later = {i.id for i in instances if later_causes_earlier(i)}
    causal = {i.id for i in instances if _is_causal(i)}
    rows = [{"condition": condition, **_shortcut_row(records, by_id, later, causal - later)}
            for condition, records in records_by_condition.items()]
    return pd.DataFrame(rows).set_index("condition") if rows else pd.DataFrame(rows)


def _shortcut_row(records: Sequence[RunRecord], by_id: Mapping[str, Instance], later: set[str],
                  others: set[str]) -> dict[str, Any]:
    """One condition's row of :func:`shortcut_table`: ``later`` the later-causes-earlier ids, ``others`` the
    remaining causal ones."""
    hits = [r for r in records if r.id in later]
    return {
        "n_later_causes_earlier": len(hits),
        "prediction_no_rate": _share(not r.says_yes for r in hits),
        "no_rate_other_causal": _share(not r.says_yes for r in records if r.id in others),
        "gold_all_zero": all(by_id[r.id].label == 0 for r in hits),
        "oracle_all_zero": all(r.oracle_label == 0 for r in hits),
    }


def _share(flags: Iterable[bool]) -> float:
    values = list(flags)
    return sum(values) / len(values) if values else float("nan")


__all__ = [
    "FIELDS",
    "QUALITIES",
    "FieldScore",
    "FieldScores",
    "accuracy_by_quality",
    "audit_record",
    "audit_records",
    "audit_summary",
    "field_scores",
    "field_sets",
    "gold_errors",
    "graph_quality",
    "label_gaps",
    "later_causes_earlier",
    "quality_frame",
    "reference_analysis",
    "shortcut_table",
    "summary_frame",
    "violation_counts",
    "violation_kinds",
    "violation_rates",
]


def _quality(analysis: CausalAnalysis | None, reference: CausalAnalysis) -> str:
    if analysis is None:
        return "unparsed"
    kinds = [v.kind.value for v in violations(analysis, variables=reference.variables)]
    return graph_quality(field_scores(analysis, reference), kinds)


def repair_transitions(records: Iterable[RunRecord], reference_for: Callable[[str], CausalAnalysis | None]
                       ) -> pd.DataFrame:
    """What the repair round (``structured_repair``) did to each graph, counted: its quality before (turn 1's
    object) and after (the object turn 2 showed: the reply's where it parsed, turn 1's otherwise), in the
    audit's terms (:data:`QUALITIES`, graded against the reference CPDAG, which the round itself never saw). Rows
    without a reference or without a round are left out."""
    counts: dict[tuple[str, str], int] = {}
    for record in records:
        reference = reference_for(record.id)
        if reference is None or record.repair is None:
            continue
        before = _quality(record.emitted, reference)
        after = _quality(record.repair.analysis, reference) if record.repair.analysis is not None else before
        counts[(before, after)] = counts.get((before, after), 0) + 1
    order = {q: i for i, q in enumerate(QUALITIES)}
    rows = [{"before": b, "after": a, "graphs": n} for (b, a), n in sorted(counts.items(),
                                                                            key=lambda i: (order[i[0][0]], order[i[0][1]]))]
    return pd.DataFrame(rows, columns=["before", "after", "graphs"])
