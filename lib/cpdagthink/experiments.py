"""What the notebooks call: a run setup from their parameters, cached runs, tables with the paper beside ours.

Notebooks stay thin: they build one :class:`Setup` from their ``parameters`` cell, ask for runs by
condition and seed (re-executions reuse records and the call cache, new parameters run what is missing),
and turn records into tables with :mod:`cpdagthink.tables`.
"""

from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Iterable, Sequence

from .backends import make_backend
from .conditions import Decoding, Intervention, get_condition
from .data import PROJECT_ROOT, Instance, load_split, read_csv, sample
from .metrics import counted
from .runner import run_condition

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
    out_root: str = str(PROJECT_ROOT / "outputs" / "runs")
    cache_dir: str = str(PROJECT_ROOT / "outputs" / "cache")
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

    path = PROJECT_ROOT / "outputs" / "generated" / f"{family}-of-test-seed{seed}.csv"
    if not path.is_file():
        write_rows(perturb(load_split("test"), family, seed), path)
    return path


def stress_csv(family: str, graphs: int, per_graph: int, seed: int) -> Path:
    """A generated stress set (``random7``, ``alarm7``, ``asia8``), written once under outputs/generated."""
    from .generate import generate, write_rows

    path = PROJECT_ROOT / "outputs" / "generated" / f"{family}-g{graphs}-k{per_graph}-seed{seed}.csv"
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


def banner(setup: Setup, instances: Sequence[Instance], seeds: Sequence[int]) -> str:
    """The line every page prints: which model, which data, how many instances and seeds."""
    positives = sum(i.label for i in instances)
    source = setup.data or f"Corr2Cause {setup.split} split"
    drawn = (f" drawn from rows with {', '.join(map(str, setup.sample_variables))} variables"
             if setup.limit > 0 and setup.sample_variables else "")
    return (f"**This run:** backend `{setup.backend}`, model `{setup.model or 'default'}`, {source}, "
            f"sample of {counted(len(instances), 'instance')}{drawn} ({counted(positives, 'gold positive')}), "
            f"{counted(len(seeds), 'seed')} {list(seeds)}. "
            f"Figures labelled *paper* are the paper's, reported for Qwen3.5-27B or the named model on the full data.")
