"""What a key figure rests on: the causes its answers name (constant answers, cut-offs, rows without a
finished answer), the verdict of the per-seed intervals, and a paired comparison's :class:`~.glue.Headline`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd

from ...analysis import tables
from ...analysis.metrics import counted
from ...run.records import RunRecord
from .. import presentation
from .glue import Headline, sentence


MIN_ROWS = 10  # fewer paired rows than this carry no finding, however their answers fall


def answer_causes(sides: Mapping[str, Sequence[RunRecord]], figure: str) -> tuple[tuple[str, ...], bool]:
    """What the answers behind ``figure`` rest on, named from the records (``sides``: each side's records by
    condition, the side the figure is read from first), and whether they carry no information, so that the
    figure is what such answers produce rather than a finding (degenerate): a side with a finished answer on
    fewer than half its rows (cut off or unparsed), one constant answer on every row of every side, or fewer
    than :data:`MIN_ROWS` rows. Two sides that gave the same scored answer on every row are named but are a
    finding (a probe whose answers do not depend on the graph shown), as is one constant side beside a varied
    one (a probe that turns every answer to NO)."""
    causes, degenerate, constants = [], False, []
    for condition, records in sides.items():
        p = tables.answer_profile(records)
        constants.append(p.constant)
        cause = _side_cause(presentation.label(condition), p)
        causes += [cause] if cause else []
        degenerate = degenerate or 2 * p.finished < p.n
    if constants and all(constants) and len(set(constants)) == 1:
        degenerate = True
    scored = [[r.says_yes for r in records] for records in sides.values()]
    if len(scored) == 2 and scored[0] == scored[1] and scored[0] and not degenerate:
        first, second = map(presentation.label, sides)
        causes.append(f"{first} and {second} gave the same scored answer on every one of its "
                      f"{counted(len(scored[0]), 'row')}, so {figure} is 0 with no spread: on this build the answers "
                      "do not depend on what differs between them, a finding")
    smallest = min((len(records) for records in sides.values()), default=0)
    if smallest < MIN_ROWS:
        degenerate = True
        causes.append(f"a sample of {counted(smallest, 'row')} is too small to carry a finding (at least {MIN_ROWS})")
    return tuple(causes), degenerate


def _side_cause(name: str, p: tables.AnswerProfile) -> str:
    """What one side's answers rest on (:func:`answer_causes`): most rows unfinished, one constant answer, or
    some rows cut off; empty when none."""
    if 2 * p.finished < p.n:
        return (f"{name} finished {p.finished} of its {counted(p.n, 'answer')} ({p.cut_off} cut off at the token "
                f"budget, {p.n - p.finished - p.cut_off} unparsed; a missing answer scores NO)")
    if p.constant:
        rows = (f"every one of its {counted(p.n, 'row')}" if p.finished == p.n else
                f"every row it finished ({p.finished} of {p.n}; the rest score NO)")
        return f"{name} answered {p.constant} on {rows}"
    if p.cut_off:
        return f"{p.cut_off} of {name}'s {counted(p.n, 'answer')} were cut off at the token budget"
    return ""


def pair_causes(runs: Mapping[tuple[str, int], Sequence[RunRecord]], comparison: str, seed: int,
                figure: str) -> tuple[tuple[str, ...], bool]:
    """:func:`answer_causes` of both sides of ``comparison`` (``target vs other``) at ``seed``; nothing when
    either side's run is not in ``runs``."""
    sides = comparison.split(" vs ", 1)
    if any((side, seed) not in runs for side in sides):
        return (), False
    return answer_causes({side: runs[(side, seed)] for side in sides}, figure)


def _degenerate_seeds(rows: pd.DataFrame, comparison: str, runs: Mapping[tuple[str, int], Sequence[RunRecord]],
                      on_first_screen: int | None) -> tuple[str, pd.DataFrame]:
    """:func:`verdict`'s words on the seeds whose answers make their gain degenerate, and the other rows."""
    lead = ""
    for seed in list(rows["seed"]):
        causes, degenerate = pair_causes(runs, comparison, int(seed), "the gain")
        if degenerate:
            lead += (f"Seed {int(seed)} is not a finding, for the reasons the verdict above gives. "
                     if int(seed) == on_first_screen else
                     sentence(f"Seed {int(seed)} is not a finding: " + "; ".join(causes)) + " ")
            rows = rows[rows["seed"] != seed]
    return lead, rows


def verdict(paired: pd.DataFrame, comparison: str,
            runs: Mapping[tuple[str, int], Sequence[RunRecord]] | None = None, paper_key: str = "main_delta",
            on_first_screen: int | None = None) -> str:
    """What the per-seed intervals say, counted over seeds; given the ``runs``, a seed whose answers make its
    gain degenerate (:func:`answer_causes`) is named with its causes and not counted as a finding, except the
    seed ``on_first_screen``, whose causes the page's verdict already names (said once per page). Intervals that
    all contain zero find no effect of the paper's size (``paper_key``) when each is narrower than it."""
    rows = paired[paired["comparison"] == comparison]
    if rows.empty:
        return "There is no paired run to judge."
    lead, rows = _degenerate_seeds(rows, comparison, runs or {}, on_first_screen)
    if rows.empty:
        return lead.strip()
    above, below = int((rows["CI low"] > 0).sum()), int((rows["CI high"] < 0).sum())
    seeds = counted(len(rows), "seed")
    if above == below == 0:
        paper = float(tables.paper([paper_key])["value"].iloc[0])
        narrow = bool(((rows["CI high"] - rows["CI low"]) < abs(paper)).all())
        return lead + (f"On {'its' if len(rows) == 1 else 'every one of its'} {seeds} the interval contains zero: "
                       + (f"narrower than the paper's effect ({paper:+g} pp), it finds no effect of that size."
                          if narrow else "this run cannot separate the two conditions."))
    parts = [f"{above} of {seeds} {'favours' if above == 1 else 'favour'} Structured Thinking" if above else "",
             f"{below} of {seeds} {'favours' if below == 1 else 'favour'} the baseline" if below else ""]
    return lead + "By their own intervals, " + " and ".join(p for p in parts if p) + "."


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
