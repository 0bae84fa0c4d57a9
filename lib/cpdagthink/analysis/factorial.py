"""What carries the gain: the design's cells scored, and each factor's effect on per-instance correctness with an
interval that respects the pairing (every cell answers the same instances).

A cell is one design point (:mod:`cpdagthink.method.design`) run on the sample. An effect is a contrast of the
cells' per-instance correctness: for instance ``i``, ``d_i = sum_j w_j c_ij`` with ``c_ij`` 1 when cell ``j``
answered ``i`` correctly; the effect is the mean of ``d_i`` and its interval the percentile interval of that mean
over instances resampled with replacement (one resample shared by every cell, so the pairing is kept). In the
typed arm, with each factor coded +1 at the paper's level and -1 at the other:

- the main effect of a factor is the mean correctness of the cells at the paper's level minus that of the cells
  at the other, each cell weighing the same (positive: the paper's level helps);
- the two-way interaction of two factors is the same contrast on the product of their codes, which is half the
  difference between one factor's effect at the other's paper level and at its other level;
- in the half fraction (I = ABCD) each two-way interaction is aliased with its complement (AB = CD), and is
  reported once under both names.

The intermediate is compared at matched turn-2 settings: the typed object against lightly structured prose uses
the typed cell that, like the prose arms, has no constraint and gets its text in a user message under the E.2
template; lightly structured prose is compared with free prose directly.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from ..method.design import BINARY, FACTORS, LEVEL_WORDS, Point
from ..run.records import RunRecord
from .metrics import bootstrap_indices, percentile_interval

MATCHED_TYPED = Point(constraint="none", delivery="user")  # the typed cell at the prose arms' turn-2 settings


@dataclass(frozen=True)
class Effect:
    """One contrast in percentage points, with its paired bootstrap interval; ``aliases`` names the effects it
    cannot be told apart from (the half fraction's)."""

    name: str
    kind: str  # main | interaction | intermediate
    estimate: float
    low: float
    high: float
    n: int
    aliases: str = ""

    @property
    def detected(self) -> bool:
        return self.low > 0 or self.high < 0


@dataclass(frozen=True)
class Cells:
    """The cells' answers on the instances every cell answered: correctness (cells x instances), YES masks and
    the truth they are scored against."""

    points: tuple[Point, ...]
    ids: tuple[str, ...]
    correct: np.ndarray
    yes: np.ndarray
    truth: np.ndarray

    @classmethod
    def of(cls, runs: Mapping[Point, Sequence[RunRecord]], labels: str = "gold") -> "Cells":
        """Align the cells' records on the instances all of them answered (a row that could not be posed in one
        cell is left out of every cell, so each contrast stays paired)."""
        points = tuple(runs)
        by_id = [{r.id: r for r in runs[p] if r.problem is None} for p in points]
        ids = tuple(i for i in by_id[0] if all(i in cell for cell in by_id[1:])) if by_id else ()
        if not ids:
            raise ValueError("the cells answered no instance in common")
        first = by_id[0]
        truth = np.array([_truth(first[i], labels) for i in ids], dtype=bool)
        yes = np.array([[cell[i].prediction == 1 for i in ids] for cell in by_id], dtype=bool)
        return cls(points, ids, yes == truth[None, :], yes, truth)

    def row(self, point: Point) -> int:
        return self.points.index(point)


def f1_yes(tp: np.ndarray | int, predicted: np.ndarray | int, gold: np.ndarray | int) -> np.ndarray:
    """F1(YES) as 2tp / (predicted YES + gold YES), 0 where both are 0 (:func:`metrics.binary_scores`' rule)."""
    denominator = np.asarray(predicted + gold, dtype=float)
    return np.divide(2 * np.asarray(tp, dtype=float), denominator, out=np.zeros(denominator.shape),
                     where=denominator > 0)


def _truth(record: RunRecord, labels: str) -> int:
    return record.gold_label if labels == "gold" or record.oracle_label is None else record.oracle_label


def _interval(values: np.ndarray, indices: np.ndarray, confidence: float) -> tuple[float, float]:
    return percentile_interval(values[indices].mean(axis=1), confidence)


def cell_table(cells: Cells, resamples: int = 2000, seed: int = 0, confidence: float = 0.95) -> pd.DataFrame:
    """Per cell (named by its levels, :attr:`Point.name`): F1(YES) and accuracy (percent) with paired percentile
    intervals, on the ``len(cells.ids)`` instances every cell answered."""
    indices = bootstrap_indices(len(cells.ids), resamples, seed)
    gold = cells.truth[indices].sum(axis=1)
    rows = []
    for k, point in enumerate(cells.points):
        yes, correct = cells.yes[k], cells.correct[k]
        f1s = f1_yes((yes & cells.truth)[indices].sum(axis=1), yes[indices].sum(axis=1), gold)
        f1 = float(f1_yes(int((yes & cells.truth).sum()), int(yes.sum()), int(cells.truth.sum())))
        f1_low, f1_high = percentile_interval(f1s, confidence)
        acc_low, acc_high = _interval(correct.astype(float), indices, confidence)
        rows.append({"cell": point.name, "F1 (YES)": 100 * f1, "F1 low": 100 * f1_low, "F1 high": 100 * f1_high,
                     "accuracy": 100 * float(correct.mean()), "acc low": 100 * acc_low, "acc high": 100 * acc_high})
    return pd.DataFrame(rows)


def _code(point: Point, factor: str) -> int:
    return 1 if point.paper_level(factor) else -1


def _contrast(cells: Cells, weights: np.ndarray, indices: np.ndarray, confidence: float) -> tuple[float, float, float]:
    per_instance = weights @ cells.correct.astype(float)
    low, high = _interval(per_instance, indices, confidence)
    return 100 * float(per_instance.mean()), 100 * low, 100 * high


def _signs(points: Sequence[Point], factors: Sequence[str]) -> np.ndarray:
    return np.array([np.prod([_code(p, f) for f in factors]) for p in points], dtype=float)


def _typed_effects(cells: Cells, factors: Sequence[str], indices: np.ndarray, confidence: float) -> list[Effect]:
    """Main effects and two-way interactions of the varied factors, over the typed cells (module docstring)."""
    typed = [k for k, p in enumerate(cells.points) if p.intermediate == "typed"]
    points = [cells.points[k] for k in typed]
    effects, seen = [], {}
    for group in [(f,) for f in factors] + list(combinations(factors, 2)):
        signs = _signs(points, group)
        if abs(signs.sum()) == len(signs):
            continue  # the factor does not vary in these cells
        weights = np.zeros(len(cells.points))
        weights[typed] = np.where(signs > 0, 1 / (signs > 0).sum(), -1 / (signs < 0).sum())
        key = tuple(signs)
        name = " x ".join(group)
        if len(group) == 2 and key in seen:  # aliased with an interaction already estimated (half fraction)
            effects[seen[key]] = _aliased(effects[seen[key]], name)
            continue
        estimate, low, high = _contrast(cells, weights, indices, confidence)
        seen[key] = len(effects)
        effects.append(Effect(name, "main" if len(group) == 1 else "interaction", estimate, low, high, len(cells.ids)))
    return effects


def _aliased(effect: Effect, other: str) -> Effect:
    aliases = f"{effect.aliases}, {other}" if effect.aliases else other
    return Effect(effect.name, effect.kind, effect.estimate, effect.low, effect.high, effect.n, aliases)


INTERMEDIATE_CONTRASTS = (("typed vs lightly structured prose", MATCHED_TYPED, Point("light_prose", "none", "paper",
                                                                                     "user", "e2")),
                          ("lightly structured vs free prose", Point("light_prose", "none", "paper", "user", "e2"),
                           Point("free_prose", "none", "paper", "user", "e2")),
                          ("typed (the paper's point) vs free prose", Point(), Point("free_prose", "none", "paper",
                                                                                     "user", "e2")))


def _intermediate_effects(cells: Cells, indices: np.ndarray, confidence: float) -> list[Effect]:
    effects = []
    for name, a, b in INTERMEDIATE_CONTRASTS:
        if a in cells.points and b in cells.points:
            weights = np.zeros(len(cells.points))
            weights[cells.row(a)], weights[cells.row(b)] = 1.0, -1.0
            effects.append(Effect(name, "intermediate", *_contrast(cells, weights, indices, confidence),
                                  len(cells.ids)))
    return effects


def effects(cells: Cells, factors: Sequence[str] = BINARY, resamples: int = 2000, seed: int = 0,
            confidence: float = 0.95) -> list[Effect]:
    """Every effect these cells can estimate: the typed arm's main effects and two-way interactions of
    ``factors``, and the intermediate's contrasts whose two cells both ran (module docstring)."""
    indices = bootstrap_indices(len(cells.ids), resamples, seed)
    return _typed_effects(cells, factors, indices, confidence) + _intermediate_effects(cells, indices, confidence)


def effect_table(found: Sequence[Effect]) -> pd.DataFrame:
    """The effects as a table, in percentage points."""
    return pd.DataFrame([{"effect": e.name, "kind": e.kind, "estimate (pp)": e.estimate, "CI low": e.low,
                          "CI high": e.high, "n": e.n, "aliased with": e.aliases} for e in found])


def interaction_means(cells: Cells, a: str, b: str) -> pd.DataFrame:
    """Mean accuracy (percent) of the typed cells at each pair of levels of ``a`` and ``b`` (averaged over the
    other factors, each cell weighing the same): the points of an interaction plot."""
    rows = []
    for level_a in FACTORS[a]:
        for level_b in FACTORS[b]:
            ks = [k for k, p in enumerate(cells.points)
                  if p.intermediate == "typed" and getattr(p, a) == level_a and getattr(p, b) == level_b]
            if ks:
                rows.append({a: LEVEL_WORDS[a][level_a], b: LEVEL_WORDS[b][level_b],
                             "accuracy": 100 * float(cells.correct[ks].mean())})
    return pd.DataFrame(rows)
