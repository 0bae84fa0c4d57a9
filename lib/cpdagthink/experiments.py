"""What the notebooks call: a run setup from their parameters, cached runs, tables with the paper beside ours.

Notebooks stay thin: they build one :class:`Setup` from their ``parameters`` cell, ask for runs by
condition and seed (re-executions reuse records and the call cache, new parameters run what is missing),
and turn records into tables with the helpers here.
"""

from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import pandas as pd

from .backends import make_backend
from .conditions import Decoding, Intervention, get_condition
from .data import OUTPUTS_ROOT, PROJECT_ROOT, Instance, load_split, read_csv, sample
from .metrics import Usage, cost_summary, paired_comparison, scores_against, scores_by_group, seed_summary
from .runner import run_condition

PAPER_CSV = PROJECT_ROOT / "data" / "paper_reported.csv"


@dataclass(frozen=True)
class Setup:
    """Everything that identifies a run besides its condition and seed."""

    backend: str = "local"
    model: str | None = None
    base_url: tuple[str, ...] = ()
    split: str = "test"
    data: str | None = None  # a Corr2Cause-format CSV instead of a hub split
    limit: int = 12
    sample_seed: int = 0
    sample_variables: tuple[int, ...] | None = None  # draw the sample from rows with these variable counts
    out_root: str = str(OUTPUTS_ROOT / "runs")
    cache_dir: str = str(OUTPUTS_ROOT / "cache")
    decoding: Decoding = field(default_factory=Decoding)

    @property
    def label(self) -> str:
        return f"{self.backend}:{self.model or 'default'}"

    def all_instances(self) -> list[Instance]:
        """Every row of the setup's CSV or split. ``generated:paraphrase`` and ``generated:refactor`` are this
        project's offline stand-ins for the hub's OOD splits, made from the test split and named as such."""
        if self.data:
            return read_csv(self.data)
        if self.split.startswith("generated:"):
            return read_csv(generated_split(self.split.partition(":")[2]), split=self.split)
        return load_split(self.split)

    def instances(self) -> list[Instance]:
        """The sample every condition of this setup runs on (seeded, label-stratified, drawn from rows with
        ``sample_variables`` variables when given). ``limit=0`` is the whole split, whatever ``sample_variables``."""
        rows = self.all_instances()
        if self.limit > 0 and self.sample_variables:
            rows = [r for r in rows if r.num_variables in self.sample_variables]
            if not rows:
                raise ValueError(f"no row has {list(self.sample_variables)} variables")
        return sample(rows, self.limit, self.sample_seed)

    def with_split(self, split: str) -> "Setup":
        return replace(self, split=split, data=None)

    def with_data(self, data: str | Path, limit: int | None = None) -> "Setup":
        return replace(self, data=str(data), limit=self.limit if limit is None else limit)


def make_setup(backend: str = "local", model: str | None = None, base_url: Sequence[str] | None = None,
               split: str = "test", data: str | None = None, limit: int = 12, sample_seed: int = 0,
               tool_choice: str = "auto", max_tokens_turn1: int = 1024, max_tokens_answer: int = 512,
               out_root: str | None = None, cache_dir: str | None = None,
               sample_variables: Sequence[int] | None = None) -> Setup:
    """A :class:`Setup` from a notebook's flat parameters (None keeps the default folders)."""
    folders = {k: v for k, v in (("out_root", out_root), ("cache_dir", cache_dir)) if v}
    decoding = Decoding(tool_choice=tool_choice, max_tokens_turn1=max_tokens_turn1, max_tokens_answer=max_tokens_answer)
    return Setup(backend=backend, model=model or None, base_url=tuple(base_url or ()), split=split, data=data or None,
                 limit=limit, sample_seed=sample_seed, decoding=decoding,
                 sample_variables=tuple(sample_variables) if sample_variables else None, **folders)


@functools.lru_cache(maxsize=4)
def _backend(name: str, model: str | None, base_url: tuple[str, ...]):
    options: dict[str, Any] = {}
    if model:
        options["model"] = model
    if base_url:
        options["base_url"] = list(base_url)
    return make_backend(name, **options)


def backend_identity(setup: Setup) -> dict[str, Any]:
    """The identity of the setup's backend (model, revision or sha256)."""
    return _backend(setup.backend, setup.model, setup.base_url).identity()


def thinking_supported(setup: Setup) -> bool:
    """Whether the setup's model has a thinking switch (the no-thinking ablation means nothing otherwise)."""
    return _backend(setup.backend, setup.model, setup.base_url).thinking_supported


def generated_split(family: str, seed: int = 0) -> Path:
    """A perturbed copy of the test split (``paraphrase`` or ``refactor``), written once under outputs/generated."""
    from .generate import perturb, write_rows

    path = OUTPUTS_ROOT / "generated" / f"{family}-of-test-seed{seed}.csv"
    if not path.is_file():
        write_rows(perturb(load_split("test"), family, seed), path)
    return path


def stress_csv(family: str, graphs: int, per_graph: int, seed: int) -> Path:
    """A generated stress set (``random7``, ``alarm7``, ``asia8``), written once under outputs/generated."""
    from .generate import generate, write_rows

    path = OUTPUTS_ROOT / "generated" / f"{family}-g{graphs}-k{per_graph}-seed{seed}.csv"
    if not path.is_file():
        write_rows(generate(family, seed=seed, graphs=graphs, per_graph=per_graph), path)
    return path


def run_dir(setup: Setup, condition: str, seed: int, instances: Sequence[Instance], probe: str | None = None) -> Path:
    """A run folder named by what it is, with short hashes of the instance ids and of the decoding settings
    (so samples and budgets never mix; the runner also refuses to resume a folder of another configuration)."""
    ids = hashlib.sha256("\n".join(i.id for i in instances).encode()).hexdigest()[:8]
    settings = {k: v for k, v in setup.decoding.__dict__.items() if k not in ("seed", "tool_choice")}
    decoding = hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:6]
    model = (setup.model or "default").replace("/", "_")
    source = Path(setup.data).stem if setup.data else setup.split
    parts = [condition, setup.backend, model, source, f"n{len(instances)}-{ids}", f"seed{seed}", f"dec{decoding}"]
    if setup.decoding.tool_choice != "auto":
        parts.append(f"tool-{setup.decoding.tool_choice}")
    if probe:
        parts.append(f"probe-{probe}")
    return Path(setup.out_root) / "-".join(parts)


def run(setup: Setup, condition: str, seed: int = 0, instances: Sequence[Instance] | None = None,
        intervention: Intervention | None = None, probe: str | None = None, progress: bool = True) -> list[dict]:
    """Records of ``condition`` at ``seed`` on the setup's sample (cached and resumable)."""
    instances = list(instances if instances is not None else setup.instances())
    backend = _backend(setup.backend, setup.model, setup.base_url)
    result = run_condition(
        get_condition(condition), backend, instances, run_dir(setup, condition, seed, instances, probe),
        decoding=replace(setup.decoding, seed=seed), cache_dir=setup.cache_dir, intervention=intervention,
        intervention_name=probe, progress=progress,
        chunk_size=backend.preferred_chunk_size,
    )
    order = {i.id: k for k, i in enumerate(instances)}
    return sorted(result.records, key=lambda r: order[r["id"]])


def run_grid(setup: Setup, conditions: Iterable[str], seeds: Iterable[int],
             instances: Sequence[Instance] | None = None) -> dict[tuple[str, int], list[dict]]:
    """Every (condition, seed) run, keyed by that pair."""
    instances = list(instances if instances is not None else setup.instances())
    return {(c, s): run(setup, c, s, instances) for s in seeds for c in conditions}


# ------------------------------------------------------------------------------------------------ tables


def _columns(records: Sequence[dict]) -> tuple[list[int | None], list[int], list[int]]:
    predictions = [None if r["unparsed"] else r["prediction"] for r in records]
    return predictions, [r["gold_label"] for r in records], [r["oracle_label"] for r in records]


def cut_off(record: dict) -> bool:
    """Whether any turn of the instance stopped at its token budget (its answer may be missing for that)."""
    return any(t.get("finish_reason") == "length" for t in record["turns"])


def scores_frame(runs: Mapping[tuple[str, int], Sequence[dict]]) -> pd.DataFrame:
    """One row per (condition, seed, labels) with F1, precision, recall, accuracy (%) and counts, including
    unparsed answers and instances cut off by the token budget."""
    rows = []
    for (condition, seed), records in runs.items():
        pred, gold, corrected = _columns(records)
        truncated = sum(cut_off(r) for r in records)
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


def paired_frame(runs: Mapping[tuple[str, int], Sequence[dict]], target: str, others: Iterable[str],
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


def by_variables_frame(runs: Mapping[tuple[str, int], Sequence[dict]], labels: str = "gold",
                       min_positives: int = 3) -> tuple[pd.DataFrame, list[str]]:
    """F1 per number of variables; bins with too few positives are omitted and the omissions returned."""
    rows, omitted = [], []
    for (condition, seed), records in runs.items():
        pred, gold, corrected = _columns(records)
        kept, dropped = scores_by_group(pred, gold if labels == "gold" else corrected,
                                        [r["num_variables"] for r in records], min_positives=min_positives)
        rows += [{"condition": condition, "seed": seed, "num_variables": n, "F1": 100 * s.f1, "n": s.n}
                 for n, s in kept.items()]
        omitted += [f"{condition} (seed {seed}): {o.reason}" for o in dropped]
    return pd.DataFrame(rows), omitted


def bins_frame(runs: Mapping[tuple[str, int], Sequence[dict]], labels: str = "gold") -> pd.DataFrame:
    """Every number-of-variables bin, however few its positives: instances, positives, accuracy (%) and
    unparsed answers. Accuracy stays readable where F1 is omitted for lack of positives."""
    rows = []
    for (condition, seed), records in runs.items():
        pred, gold, corrected = _columns(records)
        every, _ = scores_by_group(pred, gold if labels == "gold" else corrected,
                                   [r["num_variables"] for r in records], min_positives=0)
        rows += [{"condition": condition, "seed": seed, "num_variables": n, "n": s.n, "positives": s.tp + s.fn,
                  "accuracy": 100 * s.accuracy, "unparsed": s.unparsed} for n, s in every.items()]
    return pd.DataFrame(rows)


def usage(record: dict) -> Usage:
    """Tokens and latency of one instance, summed over its turns."""
    turns = record["turns"]
    return Usage(sum(t["prompt_tokens"] for t in turns), sum(t["completion_tokens"] for t in turns),
                 sum(t["latency_s"] for t in turns))


def cost_frame(runs: Mapping[tuple[str, int], Sequence[dict]], baseline: str = "baseline_enhanced") -> pd.DataFrame:
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


def banner(setup: Setup, instances: Sequence[Instance], seeds: Sequence[int]) -> str:
    """The line every page prints: which model, which data, how many instances and seeds."""
    positives = sum(i.label for i in instances)
    source = setup.data or f"Corr2Cause {setup.split} split"
    drawn = (f" drawn from rows with {', '.join(map(str, setup.sample_variables))} variables"
             if setup.limit > 0 and setup.sample_variables else "")
    return (f"**This run:** backend `{setup.backend}`, model `{setup.model or 'default'}`, {source}, "
            f"sample of {len(instances)} instances{drawn} ({positives} gold positives), seeds {list(seeds)}. "
            f"Figures labelled *paper* are the paper's, reported for Qwen3.5-27B or the named model on the full data.")
