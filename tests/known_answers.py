"""Runs of known answers at a size where intervals are narrow: hand-made records of several hundred rows, each
condition right on a chosen share of them, for the tests that read a chapter's verdict and the intro's box."""

from __future__ import annotations

import random
from collections.abc import Sequence

from cpdagthink.run.records import RunRecord, TurnRecord

from analyses import run_record

N = 400
GOLD = [i % 2 for i in range(N)]  # half positive, like the paper's balanced samples


def right_on(share: float, seed: int = 0, gold: Sequence[int] = GOLD) -> list[str]:
    """YES/NO answers right on ``share`` of the rows (which rows is drawn from ``seed``), wrong on the rest."""
    rows = set(random.Random(seed).sample(range(len(gold)), round(share * len(gold))))
    return ["YES" if (g == 1) == (i in rows) else "NO" for i, g in enumerate(gold)]


def records(condition: str, answers: Sequence[str | None], gold: Sequence[int] = GOLD, *, asked: str = "",
            cut_off: bool = False, texts: Sequence[str] | None = None, meta: dict | None = None) -> list[RunRecord]:
    """One run's records: row ``i`` answered ``answers[i]`` (None: no answer), its turn-1 request hashed as
    ``asked`` names it (default: the condition's own request, so two conditions differ), every turn stopped at
    the token budget when ``cut_off``; ``texts`` are the replies (default: the ``Answer:`` line asked for);
    ``meta``: what the backend noted of each call (e.g. ``{"constraint": "not enforced"}``)."""
    def turn(i: int, answer: str | None) -> TurnRecord:
        text = texts[i] if texts is not None else f"Answer: {answer}" if answer else ""
        return TurnRecord(messages_sha256="", request_sha256=f"{asked or condition}-{i}", text=text,
                          finish_reason="length" if cut_off else "stop", meta=dict(meta or {}))

    return [run_record(f"r{i}", answer=a, gold_label=g, oracle_label=g, condition=condition, turns=[turn(i, a)])
            for i, (a, g) in enumerate(zip(answers, gold))]
