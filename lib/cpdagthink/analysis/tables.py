"""The numbers behind the book's tables: run records turned into scores, paired gains, seed summaries, bins and
cost, and the paper's figures beside them (as a page shows them: :mod:`cpdagthink.book.presentation`).

A *run grid* maps ``(condition, seed)`` to that run's records, all on the same instances in the same order.
Every table here is narrow enough for the book's page (at most about eight columns); wide views are split
into two tables rather than scrolled. Records are :class:`~cpdagthink.run.records.RunRecord`; their fields are
read only by the small helpers at the top.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from ..method.conditions import parse_answer_flexible
from ..paths import PAPER_REPORTED
from ..run.records import RunRecord
from .metrics import (
    OmittedGroup,
    Usage,
    binary_scores,
    cost_summary,
    paired_by_group,
    paired_comparison,
    scores_against,
    scores_by_group,
    seed_summary,
)


Runs = Mapping[tuple[str, int], Sequence[RunRecord]]

# ------------------------------------------------------------------------------------------- record access


def usage(record: RunRecord) -> Usage:
    """Tokens and latency of one instance, summed over its turns (reasoning tokens where a turn's service
    reported them, else None). A turn answered through a batch file (``meta["batch"]``) has no time of its own
    (hours in a queue, shared by a whole file): such an instance's model time is NaN, not measured."""
    turns = record.turns
    reasoning = [t.meta["reasoning_tokens"] for t in turns if isinstance(t.meta.get("reasoning_tokens"), int)]
    batched = any(t.meta.get("batch") for t in turns)
    return Usage(sum(t.prompt_tokens for t in turns), sum(t.completion_tokens for t in turns),
                 math.nan if batched else sum(t.latency_s for t in turns), sum(reasoning) if reasoning else None)


def _columns(records: Sequence[RunRecord], labels: str = "gold") -> tuple[list[int | None], list[int]]:
    """Predictions (None: no answer, scored as NO and counted apart) and the truth to score them against
    (``gold`` or ``corrected``, the oracle's labels; a row the oracle cannot label keeps its published one,
    and :func:`scores_frame` counts such rows)."""
    truth = [r.gold_label if labels == "gold" or r.oracle_label is None else r.oracle_label for r in records]
    return [r.prediction for r in records], truth


def _variables(records: Sequence[RunRecord]) -> list[int]:
    return [r.num_variables for r in records]


# ------------------------------------------------------------------------------------------------- scores


def scores_frame(runs: Runs) -> pd.DataFrame:
    """One row per (condition, seed, labels) with F1, precision, recall, accuracy (%) and counts, including
    unparsed answers, instances cut off by the token budget, and (``published only``) rows the oracle could
    not label, which the corrected scores score against their published label."""
    rows = []
    for (condition, seed), records in runs.items():
        pred, gold = _columns(records, "gold")
        _, corrected = _columns(records, "corrected")
        truncated = sum(r.cut_off for r in records)
        unlabelled = sum(r.oracle_label is None for r in records)
        unparsed = sum(r.unparsed for r in records)  # RunRecord's rule: not rejected, not "not posed"
        for labels, s in scores_against(pred, gold, corrected).items():
            rows.append({"condition": condition, "seed": seed, "labels": labels, "n": s.n,
                         "F1": 100 * s.f1, "precision": 100 * s.precision, "recall": 100 * s.recall,
                         "accuracy": 100 * s.accuracy, "tp": s.tp, "fp": s.fp, "fn": s.fn, "tn": s.tn,
                         "unparsed": unparsed, "cut off": truncated,
                         "published only": unlabelled if labels == "corrected" else 0})
    return pd.DataFrame(rows)


def score_table(scores: pd.DataFrame, labels: str = "gold", truth: Sequence[int] | None = None) -> pd.DataFrame:
    """The rates of :func:`scores_frame` against one set of labels, one row per (condition, seed); with the
    sample's ``truth``, two last rows score the predictors that read nothing (always YES, the majority class)
    on the same sample, so every F1 stands beside them."""
    table = (scores[scores["labels"] == labels]
             .set_index(["condition", "seed"])[["n", "F1", "precision", "recall", "accuracy"]])
    if truth is None:
        return table
    majority = int(2 * sum(truth) > len(truth))
    trivial = {"always YES (this sample)": binary_scores([1] * len(truth), list(truth)),
               f"majority class, always {'YES' if majority else 'NO'}": binary_scores([majority] * len(truth), list(truth))}
    rows = pd.DataFrame([{"condition": name, "seed": math.nan, "n": s.n, "F1": 100 * s.f1,
                          "precision": 100 * s.precision, "recall": 100 * s.recall, "accuracy": 100 * s.accuracy}
                         for name, s in trivial.items()]).set_index(["condition", "seed"])
    return pd.concat([table, rows])


def count_table(scores: pd.DataFrame, labels: str = "gold") -> pd.DataFrame:
    """The counts of :func:`scores_frame` against one set of labels, one row per (condition, seed)."""
    return (scores[scores["labels"] == labels]
            .set_index(["condition", "seed"])[["tp", "fp", "fn", "tn", "unparsed", "cut off"]])


def answer_counts(records: Sequence[RunRecord]) -> dict[str, Any]:
    """What one run produced, by :class:`RunRecord`'s own definitions: its YES answers (``YES 4/4``, flagged
    ``constant`` when every answer is the same), its parsed turn-1 objects (a dash for conditions without a
    tool call), and its unparsed, cut-off and rejected instances."""
    n = len(records)
    yes = sum(r.says_yes for r in records)
    constant = n > 1 and yes in (0, n) and not any(r.prediction is None for r in records)
    tools = [r for r in records if r.tool_flow]
    return {"answers": f"YES {yes}/{n}" + (" (constant)" if constant else ""),
            "objects": f"{sum(r.emitted is not None for r in tools)}/{len(tools)}" if tools else "—",
            "unparsed": sum(r.unparsed for r in records), "cut off": sum(r.cut_off for r in records),
            "rejected": sum(r.rejected for r in records)}


@dataclass(frozen=True)
class AnswerProfile:
    """What one run's scored answers rest on: its rows, those with a finished (parsed) YES or NO, those cut off
    at the token budget, and its scored YES (a missing answer scores as NO)."""

    n: int
    finished: int
    cut_off: int
    yes: int

    @property
    def constant(self) -> str | None:
        """``YES`` or ``NO`` when every scored answer of several rows is the same (its F1 is a constant
        predictor's), else None."""
        if self.n < 2 or 0 < self.yes < self.n:
            return None
        return "YES" if self.yes else "NO"


def answer_profile(records: Sequence[RunRecord]) -> AnswerProfile:
    """:class:`AnswerProfile` of one run, by :class:`RunRecord`'s own definitions."""
    return AnswerProfile(len(records), sum(r.answer is not None for r in records), sum(r.cut_off for r in records),
                         sum(r.says_yes for r in records))


def produced_no_object(records: Sequence[RunRecord]) -> bool:
    """A tool condition's run in which no instance's turn-1 object could be parsed (a gain or drop against it
    compares with nothing)."""
    tool = [r for r in records if r.tool_flow]
    return bool(tool) and all(r.emitted is None for r in tool)


def same_first_requests(records: Sequence[RunRecord], others: Sequence[RunRecord]) -> bool:
    """Whether two runs sent the same turn-1 request on every row, by the hashes their records keep: a condition
    whose switch the backend does not apply (no regex sent to a generic OpenAI-compatible server, thinking off
    on a model without it) asks exactly what the other asked, so it cannot differ from it."""
    if not records or len(records) != len(others):
        return False
    firsts = [(a.turns[0].request_sha256 if a.turns else "", b.turns[0].request_sha256 if b.turns else "")
              for a, b in zip(records, others)]
    return all(x and x == y for x, y in firsts)


def constraint_not_enforced(records: Sequence[RunRecord]) -> bool:
    """Whether the backend noted, on every row's turn 1, that the request's constraint was not enforced (an
    OpenAI-compatible API without regex support and without a strict or forced tool call)."""
    return bool(records) and all(r.turns and r.turns[0].meta.get("constraint") == "not enforced" for r in records)


def flexible_answer(record: RunRecord) -> str | None:
    """The answer a reviewer reads in the record's reply (:func:`conditions.parse_answer_flexible`): the stored,
    strict answer when there is one; else what the last turn's reply states, unless that turn stopped at its
    token budget (a cut-off reply states no final answer) or the call was refused or never posed. Computed
    beside the record, never stored in it."""
    if record.answer is not None:
        return record.answer
    if record.rejected or record.problem is not None or not record.turns or record.turns[-1].cut_off:
        return None
    return parse_answer_flexible(record.turns[-1].text)


def reading_frame(runs: Runs) -> pd.DataFrame:
    """Per (condition, seed), the strict reading the scores use beside the flexible one (:func:`flexible_answer`),
    as lm-evaluation-harness reports strict-match beside flexible-extract: rows, rows each reading finds an
    answer on, rows where they differ, and F1 (gold, %) under each."""
    rows = []
    for (condition, seed), records in runs.items():
        flexible = [flexible_answer(r) for r in records]
        gold = [r.gold_label for r in records]
        strict_f1 = binary_scores([r.prediction for r in records], gold).f1
        flexible_f1 = binary_scores([None if a is None else int(a == "YES") for a in flexible], gold).f1
        rows.append({"condition": condition, "seed": seed, "n": len(records),
                     "strict answers": sum(r.answer is not None for r in records),
                     "flexible answers": sum(a is not None for a in flexible),
                     "differ": sum(a != r.answer for a, r in zip(flexible, records)),
                     "F1 strict": 100 * strict_f1, "F1 flexible": 100 * flexible_f1})
    return pd.DataFrame(rows, columns=["condition", "seed", "n", "strict answers", "flexible answers", "differ",
                                       "F1 strict", "F1 flexible"])


def answers_frame(runs: Runs) -> pd.DataFrame:
    """:func:`answer_counts` per (condition, seed): the columns every page that reports a score shows."""
    return pd.DataFrame([{"condition": c, "seed": s, **answer_counts(records)} for (c, s), records in runs.items()])


def constant_conditions(runs: Runs) -> dict[str, str]:
    """Conditions whose answers were the same on every instance of some seed, with what they answered."""
    found = {}
    for (condition, seed), records in runs.items():
        answers = answer_counts(records)["answers"]
        if answers.endswith("(constant)"):
            found.setdefault(condition, f"{answers.removesuffix(' (constant)')} (seed {seed})")
    return found


def trivial_predictors(truth: Sequence[int]) -> dict[str, float]:
    """What a predictor that reads nothing scores on these labels (%): always YES (its F1) and the majority
    class (its accuracy). Every F1 of a page stands beside these."""
    yes = binary_scores([1] * len(truth), list(truth))
    positives = sum(truth)
    return {"always-YES F1": 100 * yes.f1,
            "majority-class accuracy": 100 * max(positives, len(truth) - positives) / max(len(truth), 1)}


def seed_frame(scores: pd.DataFrame, labels: str = "gold") -> pd.DataFrame:
    """Mean and sample standard deviation of F1 across seeds, per condition (sd 0 with one seed)."""
    rows = []
    for condition, group in scores[scores["labels"] == labels].groupby("condition", sort=False):
        summary = seed_summary(list(group["F1"]))
        rows.append({"condition": condition, "seeds": summary.n, "F1 mean": summary.mean, "F1 sd": summary.std})
    return pd.DataFrame(rows)


# ------------------------------------------------------------------------------------------ paired gains



def paired_frame(runs: Runs, target: str, others: Iterable[str], labels: str = "gold",
                 n_resamples: int = 10_000) -> pd.DataFrame:
    """``target`` against each other condition on the same instances, one row per seed (paper §4.2, App. B):
    F1 of both, the gain (target minus other) with its own bootstrap 95% CI and exact McNemar p, and the
    false-negative / false-positive shifts (Table 5). The bootstrap of seed ``s`` is seeded with ``s``."""
    others = list(others)
    columns = ["comparison", "seed", "n", "F1 other", f"F1 {target}", "gain (pp)", "CI low", "CI high",
               "McNemar p", "FN other", f"FN {target}", "FP other", f"FP {target}"]
    rows = []
    for (condition, seed), records in runs.items():
        if condition not in others or (target, seed) not in runs:
            continue
        pred_a, truth = _columns(records, labels)
        pred_b, _ = _columns(runs[(target, seed)], labels)
        c = paired_comparison(pred_a, pred_b, truth, n_resamples=n_resamples, seed=seed)
        rows.append({"comparison": f"{target} vs {condition}", "seed": seed, "n": c.n, "F1 other": 100 * c.f1_a,
                     f"F1 {target}": 100 * c.f1_b, "gain (pp)": 100 * c.delta, "CI low": 100 * c.ci_low,
                     "CI high": 100 * c.ci_high, "McNemar p": c.mcnemar_p, "FN other": c.fn_a,
                     f"FN {target}": c.fn_b, "FP other": c.fp_a, f"FP {target}": c.fp_b})
    return pd.DataFrame(rows, columns=columns)


def _by_other(paired: pd.DataFrame) -> pd.DataFrame:
    """Rows named by the other condition of each comparison and the seed (short enough for the page)."""
    other = paired["comparison"].str.split(" vs ", n=1).str[1]
    return paired.assign(other=other).set_index(["other", "seed"])


def gain_table(paired: pd.DataFrame) -> pd.DataFrame:
    """The per-seed gains of :func:`paired_frame` (F1, gain, CI, McNemar p), without the error shifts;
    rows are named by the other condition and the seed."""
    return _by_other(paired)[[c for c in paired.columns if c not in ("comparison", "seed")
                              and not c.startswith(("FN", "FP"))]]


def error_shift_table(paired: pd.DataFrame) -> pd.DataFrame:
    """The per-seed false-negative and false-positive counts of :func:`paired_frame` (paper Table 5)."""
    return _by_other(paired)[["n"] + [c for c in paired.columns if c.startswith(("FN", "FP"))]]


def gain_seed_frame(paired: pd.DataFrame) -> pd.DataFrame:
    """Across seeds, per comparison: mean and sd of the gain (never of the CI bounds or the p-values), and
    on how many seeds the seed's own interval excludes zero."""
    rows = []
    for comparison, group in paired.groupby("comparison", sort=False):
        gain = seed_summary(list(group["gain (pp)"]))
        excludes = int(((group["CI low"] > 0) | (group["CI high"] < 0)).sum())
        rows.append({"comparison": comparison, "seeds": gain.n, "gain mean": gain.mean, "gain sd": gain.std,
                     "CI excludes 0": f"{excludes} of {gain.n}"})
    return pd.DataFrame(rows, columns=["comparison", "seeds", "gain mean", "gain sd", "CI excludes 0"])


# ------------------------------------------------------------------------------------ number of variables


def by_variables_frame(runs: Runs, labels: str = "gold",
                       min_positives: int = 3) -> tuple[pd.DataFrame, list[str]]:
    """F1 per number of variables; bins with too few positives are omitted and the omissions returned."""
    rows, omitted = [], []
    for (condition, seed), records in runs.items():
        pred, truth = _columns(records, labels)
        kept, dropped = scores_by_group(pred, truth, _variables(records), min_positives=min_positives)
        rows += [{"condition": condition, "seed": seed, "num_variables": n, "F1": 100 * s.f1, "n": s.n}
                 for n, s in kept.items()]
        omitted += [f"{condition} (seed {seed}): {o.reason}" for o in dropped]
    return pd.DataFrame(rows), omitted


def bins_frame(runs: Runs, labels: str = "gold") -> pd.DataFrame:
    """Every number-of-variables bin, however few its positives: instances, positives, accuracy (%) and
    unparsed answers. Accuracy stays readable where F1 is omitted for lack of positives."""
    rows = []
    for (condition, seed), records in runs.items():
        pred, truth = _columns(records, labels)
        every, _ = scores_by_group(pred, truth, _variables(records), min_positives=0)
        rows += [{"condition": condition, "seed": seed, "num_variables": n, "n": s.n, "positives": s.tp + s.fn,
                  "accuracy": 100 * s.accuracy, "unparsed": s.unparsed} for n, s in every.items()]
    return pd.DataFrame(rows)


BIN_GAIN_COLUMNS = ["seed", "variables", "n", "positives", "F1 baseline", "F1 target", "gain (pp)", "CI low",
                    "CI high", "McNemar p"]


PAPER_MIN_VARIABLES = 5  # the paper's Figure 2 omits n <= 4 (§4.3)


def _omitted_small(records: Sequence[RunRecord], min_variables: int) -> dict[int, OmittedGroup]:
    """The bins the paper's rule omits (fewer than ``min_variables`` variables), by number of variables."""
    small: dict[int, list[int]] = {}
    for r in records:
        if r.num_variables < min_variables:
            small.setdefault(r.num_variables, []).append(r.gold_label)
    return {n: OmittedGroup(n, len(gold), sum(gold), f"n = {n} omitted by the paper's rule "
                            f"(fewer than {min_variables} variables)") for n, gold in small.items()}


def bin_gain_frame(runs: Runs, target: str, baseline: str, labels: str = "gold", min_positives: int = 3,
                   n_resamples: int = 10_000, min_variables: int = PAPER_MIN_VARIABLES
                   ) -> tuple[pd.DataFrame, list[OmittedGroup]]:
    """Per seed and number of variables, the paired gain of ``target`` over ``baseline`` (paper Figure 2)
    with its bootstrap 95% CI and McNemar p. Two rules omit a bin: the paper's (fewer than ``min_variables``
    variables), then the positive-count guard (fewer than ``min_positives`` gold positives). The omitted
    bins (the same on every seed, since they depend on the labels only) are returned once each."""
    rows, omitted = [], {}
    for (condition, seed), records in runs.items():
        if condition != baseline or (target, seed) not in runs:
            continue
        omitted.update(_omitted_small(records, min_variables))
        kept = [i for i, r in enumerate(records) if r.num_variables >= min_variables]
        if not kept:  # every bin omitted by the paper's rule (listed above): no gain to compute
            continue
        pred_a, truth = _columns([records[i] for i in kept], labels)
        pred_b, _ = _columns([runs[(target, seed)][i] for i in kept], labels)
        groups = [records[i].num_variables for i in kept]
        compared, dropped = paired_by_group(pred_a, pred_b, truth, groups, min_positives=min_positives,
                                            n_resamples=n_resamples, seed=seed)
        omitted.update({o.group: o for o in dropped})
        positives = pd.Series(truth, dtype=float).groupby(groups).sum()
        rows += [{"seed": seed, "variables": n, "n": c.n, "positives": int(positives[n]),
                  "F1 baseline": 100 * c.f1_a, "F1 target": 100 * c.f1_b, "gain (pp)": 100 * c.delta,
                  "CI low": 100 * c.ci_low, "CI high": 100 * c.ci_high, "McNemar p": c.mcnemar_p}
                 for n, c in compared.items()]
    return pd.DataFrame(rows, columns=BIN_GAIN_COLUMNS), [omitted[k] for k in sorted(omitted)]


# --------------------------------------------------------------------------------------------------- cost


def cost_frame(runs: Runs, baseline: str = "baseline_enhanced") -> pd.DataFrame:
    """Mean tokens (prompt, completion, reasoning, total) and model time per instance, per condition, and the
    ratios to the one-turn baseline (§7.3). Latency of cached calls is the latency measured when they were first
    made; a shared machine's load shares in every time."""
    by_condition: dict[str, list[Usage]] = {}
    for (condition, _), records in runs.items():
        by_condition.setdefault(condition, []).extend(usage(r) for r in records)
    if baseline not in by_condition:
        return pd.DataFrame()
    return pd.DataFrame([row.__dict__ for row in cost_summary(by_condition, baseline)])


TOKEN_COLUMNS = ["condition", "n", "mean_prompt_tokens", "mean_completion_tokens", "mean_reasoning_tokens",
                 "mean_total_tokens", "token_ratio"]
TIME_COLUMNS = ["condition", "mean_latency_s", "ms_per_completion_token", "latency_ratio"]


def cost_tables(runs: Runs, baseline: str = "baseline_enhanced") -> tuple[pd.DataFrame, pd.DataFrame]:
    """:func:`cost_frame` as the page shows it: the tokens per instance and condition first (the method's
    cost, the paper's token ratio), then the model time, per instance and per completion token, labelled as
    the load-sensitive measure it is (both empty without the baseline)."""
    cost = cost_frame(runs, baseline)
    if cost.empty:
        return cost, cost
    return cost[TOKEN_COLUMNS], cost[TIME_COLUMNS]


# -------------------------------------------------------------------------------------------------- paper


def paper(keys: Iterable[str] | None = None, section: str | None = None) -> pd.DataFrame:
    """Paper-reported figures (``data/paper_reported.csv``) in the order asked for, labelled as the paper's.
    Asking for a key the file does not hold is an error, so a page never silently loses a figure."""
    with PAPER_REPORTED.open(encoding="utf-8") as handle:
        table = pd.read_csv(handle)
    if keys is not None:
        keys = list(keys)
        missing = sorted(set(keys) - set(table["key"]))
        if missing:
            raise KeyError(f"not in {PAPER_REPORTED.name}: {missing}")
        table = table.set_index("key").loc[keys].reset_index()
    if section is not None:
        table = table[table["section"].str.contains(section, regex=False)]
    return table.assign(source="paper").reset_index(drop=True)


def paper_by_condition(keys: Iterable[str]) -> dict[str, float]:
    """The paper's figures ``keys`` by the condition (or probe) each was measured on, for a figure's marks."""
    table = paper(keys)
    return dict(zip(table["condition"], table["value"].astype(float)))
