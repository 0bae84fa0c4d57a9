"""What the notebooks call: a run setup from their parameters and cached runs (tables: :mod:`cpdagthink.analysis.tables`).

Notebooks stay thin: they build one :class:`RunSet` from their ``parameters`` cell, ask for its runs by
condition and seed (a run folder that holds its run whole is read as it is, with no backend built; new
parameters run what is missing, reusing the call cache), and turn records into tables with
:mod:`cpdagthink.analysis.tables`. With ``CPDAGTHINK_RENDER_ONLY=1`` (``cpdagthink book --render-only``) nothing is
computed: a run that is not complete is an error.
"""

from __future__ import annotations

import functools
import json
from typing import Any, Iterable, Mapping, Sequence

from ..analysis.markup import Markdown, code, emphasis, paragraphs, strong
from ..analysis.metrics import counted
from ..backends import Backend, answers_without_model, make_backend
from ..causal.instance import Instance
from ..errors import CpdagthinkError
from ..method.conditions import Intervention
from ..run.config import RunConfig, RunParameters, RunSet
from ..run.records import RunRecord
from ..run.runfolder import METADATA, Completeness, completeness, read_json
from ..run.runner import RunResult
from ..run.together import Planned, run_configs
from .chapters import ENV_RENDER_ONLY, RenderOnlyError, render_only


def setup_from_parameters(namespace: Mapping[str, Any]) -> RunSet:
    """A notebook's one-line setup: the names of its parameters cell (``globals()``) that are run parameters,
    validated into a :class:`RunSet` (a bad value fails here, naming the parameter)."""
    known = {k: namespace[k] for k in RunParameters.model_fields if k in namespace}
    return RunParameters(**known).to_config()


REFERENCE_AGENT = "reference"  # the backend of a chapter's reference agent's rows (the upper bound)


def reference_of(setup: RunSet) -> RunSet:
    """The same sample and seeds answered by the symbolic reference agent (the upper-bound row)."""
    return RunSet.model_validate({**setup.model_dump(), "backend": REFERENCE_AGENT, "model": None,
                                     "backend_options": {}})


def updated(setup: RunSet, **changes: Any) -> RunSet:
    """``setup`` with some fields changed, validated again (e.g. another model, split or tool choice)."""
    decoding = changes.pop("decoding", {})
    data = setup.model_dump()
    data["decoding"] = {**data["decoding"], **decoding}
    return RunSet.model_validate({**data, **changes})


def ood_setup(setup: RunSet, ood_split: str) -> RunSet:
    """The same sample size and settings on an OOD split: a CSV path or a split name (hub or ``generated:``)."""
    if str(ood_split).endswith(".csv"):
        return updated(setup, data=str(ood_split))
    return updated(setup, split=ood_split, data=None)


@functools.lru_cache(maxsize=4)
def _backend(name: str, arguments: str) -> Backend:
    return make_backend(name, **json.loads(arguments))


def refusals(setup: RunSet, conditions: Iterable[str]) -> dict[str, str]:
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


def backend_of(setup: RunSet | RunConfig) -> Backend:
    """The backend of a setup or of one of its runs, built once per process (loading a model is the expensive
    part); never when rendering only."""
    if render_only():
        raise RenderOnlyError(f"{ENV_RENDER_ONLY} is set: no backend is built here ({setup.label})")
    return _backend(setup.backend, json.dumps(setup.backend_arguments(), sort_keys=True))


class RunIncompleteError(CpdagthinkError):
    """A run ended with instances not answered (a request failed every attempt): its folder is kept, and
    computing it again asks exactly those."""


def run(config: RunConfig, instances: Sequence[Instance] | None = None, intervention: Intervention | None = None,
        progress: bool = True) -> list[RunRecord]:
    """Records of one run (``setup.for_run(condition, seed, probe)``) on its sample, in sample order
    (:func:`run_many`)."""
    instances = list(instances if instances is not None else config.instances())
    return run_many([Planned(config, instances, intervention=intervention)], progress)[0]


def run_many(runs: Sequence[Planned], progress: bool = True) -> list[list[RunRecord]]:
    """Records of each run on its rows, in row order (:func:`compute`: a complete run folder is read as it is, the
    others computed)."""
    return [outcome.records if isinstance(outcome, Completeness) else _answered(outcome)
            for outcome in _computed(runs, progress, keep=True)]


def compute(runs: Sequence[Planned], progress: bool = True) -> None:
    """Compute each of ``runs`` that its folder does not hold whole (:func:`runfolder.completeness`), holding no
    records (a grid's runs made at once hold tens of thousands): those of one backend together
    (:func:`~cpdagthink.run.together.run_configs`: at once on a backend that streams requests), unless rendering
    only (:func:`render_only`): then :class:`RenderOnlyError` names the first folder and how to compute it. A run
    left with instances unanswered raises :class:`RunIncompleteError` once every run ended."""
    for outcome in _computed(runs, progress, keep=False):
        if isinstance(outcome, RunResult) and outcome.summary.not_answered:
            raise RunIncompleteError(f"{outcome.out_dir}: {outcome.summary.message}")


def _computed(runs: Sequence[Planned], progress: bool, keep: bool) -> list[Completeness | RunResult]:
    """Each run's folder as found when whole (its records read only where ``keep``), else the result of computing
    it (:func:`compute`)."""
    held = [completeness(r.config.folder(r.instances), r.config, r.instances, records=keep) for r in runs]
    by_backend: dict[Backend, list[int]] = {}
    for k, (planned, found) in enumerate(zip(runs, held)):
        if found.complete:
            continue
        if render_only():
            raise RenderOnlyError(
                f"{planned.config.folder(planned.instances)} does not hold this run yet ({found.missing}) and "
                f"{ENV_RENDER_ONLY} is set: compute it first (`make grid`, or `cpdagthink plan` with the chapter's "
                "parameters and `--group KEY --execute`), or execute the chapter without --render-only")
        by_backend.setdefault(backend_of(planned.config), []).append(k)
    outcomes: list[Completeness | RunResult] = list(held)
    for backend, ks in by_backend.items():
        asked = [Planned(runs[k].config, runs[k].instances, runs[k].config.folder(runs[k].instances),
                         runs[k].intervention) for k in ks]
        for k, result in zip(ks, run_configs(asked, backend, progress=progress)):
            outcomes[k] = result
    return outcomes


def _answered(result: RunResult) -> list[RunRecord]:
    """A run's records, or :class:`RunIncompleteError` when it left instances unanswered."""
    if result.summary.not_answered:
        raise RunIncompleteError(f"{result.out_dir}: {result.summary.message}")
    return result.records


def run_grid(setup: RunSet, conditions: Iterable[str], seeds: Iterable[int],
             instances: Sequence[Instance] | None = None) -> dict[tuple[str, int], list[RunRecord]]:
    """Every (condition, seed) run, keyed by that pair."""
    instances = list(instances if instances is not None else setup.instances())
    keys = [(c, s) for s in seeds for c in conditions]
    return dict(zip(keys, run_many([Planned(setup.for_run(c, s), instances) for c, s in keys])))


def model_name(setup: RunSet) -> str:
    """The model a setup runs, by its resolved name (never ``default``): the local registry's title for a
    short name, the file name of a ``.gguf`` path, the symbolic agent for the reference backend: as the
    backend's family titles it (:meth:`cpdagthink.backends.base.Backend.model_title`)."""
    from ..backends import backend_class

    return backend_class(setup.backend).model_title(setup.model)


def configuration(setup: RunSet, instances: Sequence[Instance], seeds: Sequence[int],
                  conditions: Sequence[str] = (), probes: Sequence[str] = ()) -> dict[str, Any]:
    """What a chapter ran, as plain values (the book's intro compares chapters by them)."""
    positives = sum(i.label for i in instances)
    d = setup.decoding
    return {"backend": setup.backend, "model": model_name(setup), "data": setup.data or f"{setup.split} split",
            "instances": len(instances), "positives": positives, "negatives": len(instances) - positives,
            "sample": (f"limit {setup.limit}, seed {setup.sample_seed}, variables "
                       f"{', '.join(map(str, setup.sample_variables or ())) or 'any'}, at least "
                       f"{setup.sample_min_positives} positives" if setup.limit else "whole split"),
            "seeds": list(seeds), "budgets": f"{d.max_tokens_turn1} + {d.max_tokens_answer}",
            "decoding": _decoding_text(d), "tool choice": d.tool_choice,
            "conditions": list(conditions), "probes": list(probes)}


def banner(setup: RunSet, instances: Sequence[Instance], seeds: Sequence[int], *,
           conditions: Sequence[str] = (), probes: Sequence[str] = (), verdict: str | None = None,
           command: str | None = None) -> Markdown:
    """What a page says first: the verdict (whether this build can test the paper's claim, before any
    number), then which model, data, sample (positives and negatives), seeds, budgets and decoding, which
    conditions and probes ran, and the command that reproduces the page."""
    from .presentation import label

    positives = sum(i.label for i in instances)
    source = setup.data or f"Corr2Cause {setup.split} split"
    drawn = _drawn_text(setup)
    d = setup.decoding
    # What answered decides what the banner names: the reference agent computes its answers, so it has no
    # token budget and no decoding to report; a whole split is not a sample.
    rows = (f"the whole split, {counted(len(instances), 'instance')}" if setup.limit == 0 else
            f"sample of {counted(len(instances), 'instance')}{drawn}")
    decoding = ("no token budgets or decoding (the reference agent computes its answers)" if answers_without_model(setup.backend)
                else f"token budgets {d.max_tokens_turn1} for turn 1 and {d.max_tokens_answer} for the answer "
                     f"({d.one_turn_budget} for one-turn conditions), {_decoding_text(d)}")
    run = Markdown(
        strong("This run:"), f" model {model_name(setup)} (backend ", code(setup.backend), f"), {source}, "
        f"{rows} ({counted(positives, 'gold positive')} and "
        f"{counted(len(instances) - positives, 'negative')}{_balance_text(setup)}), "
        f"{counted(len(seeds), 'seed')} ({', '.join(map(str, seeds))}), {decoding}.",
        f" Conditions: {', '.join(label(c) for c in conditions)}." if conditions else "",
        f" Probes: {', '.join(label(p) for p in probes)}." if probes else "",
        " Figures labelled ", emphasis("paper"), " are the paper's, reported for Qwen3.5-27B or the named model on "
        "the full data.")
    return paragraphs(Markdown(strong("Verdict."), f" {verdict}") if verdict else "", run,
                      Markdown("Reproduce this page: ", code(command)) if command else "")


def _drawn_text(setup: RunSet) -> str:
    """Which rows the sample was drawn from (empty for the whole split or any count)."""
    counts = sorted(set(setup.sample_variables or ()))
    if setup.limit == 0 or not counts:
        return ""
    if len(counts) == 1:
        return f" drawn from rows with {counts[0]} variables"
    return f" drawn from rows with {', '.join(map(str, counts[:-1]))} and {counts[-1]} variables, an equal share each"


def _decoding_text(decoding: Any) -> str:
    if decoding.greedy:
        return "greedy decoding"
    return (f"sampling at temperature {decoding.temperature:g}, top_p {decoding.top_p:g}, top_k {decoding.top_k}, "
            f"min_p {decoding.min_p:g}")


def _balance_text(setup: RunSet) -> str:
    if setup.sample_min_positives <= 1 or setup.limit == 0:
        return ""
    return (f", at least {setup.sample_min_positives} by choice, so that a sample this small has positives to "
            "score; its share of positives is then higher than the split's")


def run_metadata(setup: RunSet, condition: str, seed: int, instances: Sequence[Instance]) -> dict[str, Any]:
    """The ``metadata.json`` of one run of this setup (empty when that run has not been made); read only, so a
    read-only copy of the run folders renders."""
    return read_json(setup.for_run(condition, seed).folder(list(instances)) / METADATA) or {}


def thinking_supported(setup: RunSet, condition: str, seed: int, instances: Sequence[Instance]) -> bool:
    """Whether the setup's model has a thinking mode, as the run of ``condition`` at ``seed`` recorded it (no
    backend is built to ask)."""
    found = run_metadata(setup, condition, seed, instances).get("thinking_supported")
    if found is None:
        raise CpdagthinkError(f"the run of {condition} at seed {seed} has not recorded whether {setup.label} has a "
                              "thinking mode: run it first (ex.run)")
    return found
