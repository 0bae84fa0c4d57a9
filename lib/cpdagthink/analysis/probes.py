"""Scoring the turn-2 probes (paper §6, Table 3): each probed run against the unprobed run it shares
instances with. The probes themselves, and their table ``PROBES``, are in :mod:`cpdagthink.method.interventions`.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import pandas as pd

from ..run.records import RunRecord
from .metrics import binary_scores

__all__ = ["probe_table"]


def _intervened(record: RunRecord) -> bool:
    given = record.intervention
    if given is None:
        return False
    return (not given.include_premise) or given.analysis != record.emitted


def _f1_scores(before: Sequence[RunRecord], after: Sequence[RunRecord]) -> dict[str, float]:
    """F1(YES) of the unprobed records ``before`` and the probed ``after`` (paired by position) against the
    published labels and, on the rows with one, the oracle's; ``nan`` when no row has an oracle label."""
    pred_b, pred_p = [r.prediction for r in before], [r.prediction for r in after]
    gold = [r.gold_label for r in before]
    labelled = [i for i, r in enumerate(before) if r.oracle_label is not None]
    oracle = [before[i].oracle_label for i in labelled]
    return {
        "base_f1_gold": binary_scores(pred_b, gold).f1,
        "f1_gold": binary_scores(pred_p, gold).f1,
        "base_f1_oracle": binary_scores([pred_b[i] for i in labelled], oracle).f1 if labelled else float("nan"),
        "f1_oracle": binary_scores([pred_p[i] for i in labelled], oracle).f1 if labelled else float("nan"),
    }


def _probe_row(before: Sequence[RunRecord], shared: Sequence[RunRecord]) -> dict[str, float | int]:
    """One probe's row of :func:`probe_table` but its name: ``shared`` its records, ``before`` the unprobed
    run's records of the same instances, in the same order."""
    f1 = _f1_scores(before, shared)
    return {
        "n": len(shared),
        **{k: round(100 * v, 2) for k, v in f1.items()},
        "drop_gold_pp": round(100 * (f1["base_f1_gold"] - f1["f1_gold"]), 2),
        "drop_oracle_pp": round(100 * (f1["base_f1_oracle"] - f1["f1_oracle"]), 2),
        "flipped_share": sum((a.prediction == 1) != (b.prediction == 1)
                             for a, b in zip(before, shared)) / len(shared),
        "intervened_share": sum(_intervened(r) for r in shared) / len(shared),
    }


def probe_table(base_records: Sequence[RunRecord],
                probe_records_by_name: Mapping[str, Sequence[RunRecord]]) -> pd.DataFrame:
    """One row per probe (index), scored on the instance ids it shares with the unprobed run.

    Columns: ``n``; F1(YES) in percent of the unprobed and probed runs against the published labels
    (``base_f1_gold``, ``f1_gold``) and the oracle's corrected labels (``*_oracle``, rows without an oracle
    label left out); ``drop_gold_pp`` / ``drop_oracle_pp`` = base F1 - probed F1 (positive = the probe hurt);
    ``flipped_share``: fraction of instances whose prediction changed (YES vs not-YES; an unparsed answer
    counts as NO, as in :mod:`cpdagthink.analysis.metrics`); ``intervened_share``: fraction where the probe really
    changed turn 2 (some probes leave e.g. an object without v-structures as it is).
    """
    base = {r.id: r for r in base_records}
    rows = []
    for name, records in probe_records_by_name.items():
        shared = [r for r in records if r.id in base]
        if not shared:
            raise ValueError(f"probe {name!r} shares no instance id with the base run")
        rows.append({"probe": name, **_probe_row([base[r.id] for r in shared], shared)})
    columns = ["probe", "n", "base_f1_gold", "f1_gold", "drop_gold_pp", "base_f1_oracle", "f1_oracle",
               "drop_oracle_pp", "flipped_share", "intervened_share"]
    return pd.DataFrame(rows, columns=columns).set_index("probe")
