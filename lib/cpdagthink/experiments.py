"""What the notebooks call: a run setup from their parameters, cached runs, tables with the paper beside ours.

Notebooks stay thin: they build one :class:`RunConfig` from their ``parameters`` cell, ask for runs by
condition and seed (re-executions reuse records and the call cache, new parameters run what is missing),
and turn records into tables with the helpers here.
"""

from __future__ import annotations

import functools
import json
from typing import Any, Iterable, Mapping, Sequence

import pandas as pd

from .backends import Backend, make_backend
from .conditions import Intervention, get_condition
from .config import RunConfig, RunParameters
from .data import PROJECT_ROOT, Instance
from .metrics import Usage, cost_summary, paired_comparison, scores_against, scores_by_group, seed_summary
from .records import RunRecord
from .runner import run_condition

PAPER_CSV = PROJECT_ROOT / "data" / "paper_reported.csv"


Setup = RunConfig  # the notebooks' name for the configuration their runs share


def setup_from_parameters(namespace: Mapping[str, Any]) -> RunConfig:
    """A notebook's one-line setup: the names of its parameters cell (``globals()``) that are run parameters,
    validated into a :class:`RunConfig` (a bad value fails here, naming the parameter)."""
    known = {k: namespace[k] for k in RunParameters.model_fields if k in namespace}
    return RunParameters(**known).to_config()


def reference_of(setup: RunConfig) -> RunConfig:
    """The same sample and seeds answered by the symbolic reference agent (the upper-bound row)."""
    return RunConfig.model_validate({**setup.model_dump(), "backend": "reference", "model": None,
                                     "backend_options": {}})


def updated(setup: RunConfig, **changes: Any) -> RunConfig:
    """``setup`` with some fields changed, validated again (e.g. another model, split or tool choice)."""
    decoding = changes.pop("decoding", {})
    data = setup.model_dump()
    data["decoding"] = {**data["decoding"], **decoding}
    return RunConfig.model_validate({**data, **changes})


@functools.lru_cache(maxsize=4)
def _backend(name: str, arguments: str) -> Backend:
    return make_backend(name, **json.loads(arguments))


def backend_of(setup: RunConfig) -> Backend:
    """The setup's backend, built once per process (loading a model is the expensive part)."""
    return _backend(setup.backend, json.dumps(setup.backend_arguments(), sort_keys=True))


def run(setup: RunConfig, condition: str, seed: int = 0, instances: Sequence[Instance] | None = None,
        intervention: Intervention | None = None, probe: str | None = None, progress: bool = True) -> list[RunRecord]:
    """Records of ``condition`` at ``seed`` on the setup's sample (cached and resumable), in sample order."""
    instances = list(instances if instances is not None else setup.instances())
    config = setup.for_run(condition, seed, probe)
    if probe is not None and intervention is None:
        from .probes import PROBES

        intervention = PROBES[probe]
    result = run_condition(
        get_condition(condition), backend_of(setup), instances, config.folder(instances),
        decoding=config.decoding, cache_dir=config.cache_dir, intervention=intervention, intervention_name=probe,
        progress=progress, chunk_size=config.chunk_size, config=config,
    )
    return result.records


def run_grid(setup: RunConfig, conditions: Iterable[str], seeds: Iterable[int],
             instances: Sequence[Instance] | None = None) -> dict[tuple[str, int], list[RunRecord]]:
    """Every (condition, seed) run, keyed by that pair."""
    instances = list(instances if instances is not None else setup.instances())
    return {(c, s): run(setup, c, s, instances) for s in seeds for c in conditions}


# ------------------------------------------------------------------------------------------------ tables


def _columns(records: Sequence[RunRecord]) -> tuple[list[int | None], list[int], list[int | None]]:
    return [r.prediction for r in records], [r.gold_label for r in records], [r.oracle_label for r in records]


def scores_frame(runs: Mapping[tuple[str, int], Sequence[RunRecord]]) -> pd.DataFrame:
    """One row per (condition, seed, labels) with F1, precision, recall, accuracy (%) and counts, including
    unparsed answers and instances cut off by the token budget."""
    rows = []
    for (condition, seed), records in runs.items():
        pred, gold, corrected = _columns(records)
        truncated = sum(r.cut_off for r in records)
        for labels, s in scores_against(pred, gold, corrected).items():
            rows.append({"condition": condition, "seed": seed, "labels": labels, "n": s.n,
                         "F1": 100 * s.f1, "precision": 100 * s.precision, "recall": 100 * s.recall,
                         "accuracy": 100 * s.accuracy, "tp": s.tp, "fp": s.fp, "fn": s.fn, "tn": s.tn,
                         "unparsed": s.unparsed, "cut off": truncated})
    return pd.DataFrame(rows)


def seed_frame(scores: pd.DataFrame, labels: str = "gold") -> pd.DataFrame:
    """Mean and standard deviation of F1 across seeds, per condition."""
    rows = []
    for condition, group in scores[scores["labels"] == labels].groupby("condition", sort=False):
        summary = seed_summary(list(group["F1"]))
        rows.append({"condition": condition, "seeds": summary.n, "F1 mean": summary.mean, "F1 sd": summary.std})
    return pd.DataFrame(rows)


def paired_frame(runs: Mapping[tuple[str, int], Sequence[RunRecord]], target: str, others: Iterable[str],
                 labels: str = "gold", n_resamples: int = 10_000) -> pd.DataFrame:
    """``target`` against each other condition on the same instances, per seed: F1 gain with a bootstrap
    95% CI, exact McNemar p, and the false-negative / false-positive shifts (paper Table 5)."""
    rows = []
    for (condition, seed), records in runs.items():
        if condition not in others or (target, seed) not in runs:
            continue
        pred_a, gold, corrected = _columns(records)
        pred_b, _, _ = _columns(runs[(target, seed)])
        truth = gold if labels == "gold" else corrected
        c = paired_comparison(pred_a, pred_b, truth, n_resamples=n_resamples, seed=seed)
        rows.append({"comparison": f"{target} vs {condition}", "seed": seed, "n": c.n, "F1 other": 100 * c.f1_a,
                     f"F1 {target}": 100 * c.f1_b, "gain (pp)": 100 * c.delta, "CI low": 100 * c.ci_low,
                     "CI high": 100 * c.ci_high, "McNemar p": c.mcnemar_p, "FN other": c.fn_a,
                     f"FN {target}": c.fn_b, "FP other": c.fp_a, f"FP {target}": c.fp_b})
    return pd.DataFrame(rows)


def by_variables_frame(runs: Mapping[tuple[str, int], Sequence[RunRecord]], labels: str = "gold",
                       min_positives: int = 3) -> tuple[pd.DataFrame, list[str]]:
    """F1 per number of variables; bins with too few positives are omitted and the omissions returned."""
    rows, omitted = [], []
    for (condition, seed), records in runs.items():
        pred, gold, corrected = _columns(records)
        kept, dropped = scores_by_group(pred, gold if labels == "gold" else corrected,
                                        [r.num_variables for r in records], min_positives=min_positives)
        rows += [{"condition": condition, "seed": seed, "num_variables": n, "F1": 100 * s.f1, "n": s.n}
                 for n, s in kept.items()]
        omitted += [f"{condition} (seed {seed}): {o.reason}" for o in dropped]
    return pd.DataFrame(rows), omitted


def bins_frame(runs: Mapping[tuple[str, int], Sequence[RunRecord]], labels: str = "gold") -> pd.DataFrame:
    """Every number-of-variables bin, however few its positives: instances, positives, accuracy (%) and
    unparsed answers. Accuracy stays readable where F1 is omitted for lack of positives."""
    rows = []
    for (condition, seed), records in runs.items():
        pred, gold, corrected = _columns(records)
        every, _ = scores_by_group(pred, gold if labels == "gold" else corrected,
                                   [r.num_variables for r in records], min_positives=0)
        rows += [{"condition": condition, "seed": seed, "num_variables": n, "n": s.n, "positives": s.tp + s.fn,
                  "accuracy": 100 * s.accuracy, "unparsed": s.unparsed} for n, s in every.items()]
    return pd.DataFrame(rows)


def usage(record: RunRecord) -> Usage:
    """Tokens and latency of one instance, summed over its turns."""
    turns = record.turns
    return Usage(sum(t.prompt_tokens for t in turns), sum(t.completion_tokens for t in turns),
                 sum(t.latency_s for t in turns))


def cost_frame(runs: Mapping[tuple[str, int], Sequence[RunRecord]], baseline: str = "baseline_enhanced") -> pd.DataFrame:
    """Mean tokens and model time per instance, and the ratios to the one-turn baseline (§7.3). Latency of
    cached calls is the latency measured when they were first made."""
    by_condition: dict[str, list[Usage]] = {}
    for (condition, _), records in runs.items():
        by_condition.setdefault(condition, []).extend(usage(r) for r in records)
    if baseline not in by_condition:
        return pd.DataFrame()
    return pd.DataFrame([row.__dict__ for row in cost_summary(by_condition, baseline)])


def paper(keys: Iterable[str] | None = None, section: str | None = None) -> pd.DataFrame:
    """Paper-reported figures (``data/paper_reported.csv``), always labelled as the paper's."""
    table = pd.read_csv(PAPER_CSV)
    if keys is not None:
        table = table[table["key"].isin(list(keys))]
    if section is not None:
        table = table[table["section"].str.contains(section, regex=False)]
    return table.assign(source="paper").reset_index(drop=True)


def banner(setup: RunConfig, instances: Sequence[Instance], seeds: Sequence[int]) -> str:
    """The line every page prints: which model, which data, how many instances and seeds, which decoding."""
    positives = sum(i.label for i in instances)
    source = setup.data or f"Corr2Cause {setup.split} split"
    drawn = (f" drawn from rows with {', '.join(map(str, setup.sample_variables))} variables"
             if setup.limit > 0 and setup.sample_variables else "")
    return (f"**This run:** backend `{setup.backend}`, model `{setup.model or 'default'}`, {source}, "
            f"sample of {len(instances)} instances{drawn} ({positives} gold positives), seeds {list(seeds)}, "
            f"{_decoding_text(setup.decoding)}. "
            f"Figures labelled *paper* are the paper's, reported for Qwen3.5-27B or the named model on the full data.")


def _decoding_text(decoding: Any) -> str:
    if decoding.greedy:
        return "greedy decoding"
    return (f"sampling at temperature {decoding.temperature:g}, top_p {decoding.top_p:g}, top_k {decoding.top_k}, "
            f"min_p {decoding.min_p:g}")
