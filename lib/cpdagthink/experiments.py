"""What the notebooks call: a run setup from their parameters and cached runs (tables: :mod:`cpdagthink.tables`).

Notebooks stay thin: they build one :class:`RunConfig` from their ``parameters`` cell, ask for runs by
condition and seed (re-executions reuse records and the call cache, new parameters run what is missing),
and turn records into tables with :mod:`cpdagthink.tables`.
"""

from __future__ import annotations

import functools
import json
from typing import Any, Iterable, Mapping, Sequence

from .backends import Backend, make_backend
from .conditions import Intervention, get_condition
from .config import RunConfig, RunParameters
from .data import Instance
from .metrics import counted
from .records import RunRecord
from .runner import run_condition


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


def refusals(setup: RunConfig, conditions: Iterable[str]) -> dict[str, str]:
    """The conditions this model cannot serve, each with the reason (e.g. ``no_thinking`` on a model that
    always reasons); the chapters leave them out and say why."""
    from pydantic import ValidationError

    refused = {}
    for condition in conditions:
        try:
            setup.for_run(condition)
        except ValidationError as error:
            refused[condition] = error.errors()[0]["msg"].removeprefix("Value error, ")
    return refused


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


def banner(setup: RunConfig, instances: Sequence[Instance], seeds: Sequence[int]) -> str:
    """The line every page prints: which model, which data, how many instances and seeds, which decoding."""
    positives = sum(i.label for i in instances)
    source = setup.data or f"Corr2Cause {setup.split} split"
    drawn = (f" drawn from rows with {', '.join(map(str, setup.sample_variables))} variables"
             if setup.limit > 0 and setup.sample_variables else "")
    return (f"**This run:** backend `{setup.backend}`, model `{setup.model or 'default'}`, {source}, "
            f"sample of {counted(len(instances), 'instance')}{drawn} ({counted(positives, 'gold positive')}"
            f"{_balance_text(setup)}), "
            f"{counted(len(seeds), 'seed')} {list(seeds)}, "
            f"{_decoding_text(setup.decoding)}. "
            f"Figures labelled *paper* are the paper's, reported for Qwen3.5-27B or the named model on the full data.")


def _decoding_text(decoding: Any) -> str:
    if decoding.greedy:
        return "greedy decoding"
    return (f"sampling at temperature {decoding.temperature:g}, top_p {decoding.top_p:g}, top_k {decoding.top_k}, "
            f"min_p {decoding.min_p:g}")


def _balance_text(setup: RunConfig) -> str:
    if setup.sample_min_positives <= 1 or setup.limit == 0:
        return ""
    return (f", at least {setup.sample_min_positives} by choice, so that a sample this small has positives to "
            "score; its share of positives is then higher than the split's")
