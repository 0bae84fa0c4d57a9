"""The book's runs as a plan: each chapter declares the runs it reads once, as a function of its parameters.

A chapter's notebook gets its records through :func:`run_chapter` (which computes whatever is missing), and
:func:`plan_book` lists the runs of the chapters ``cpdagthink book`` would execute with the same parameters:
both come from the chapter's declaration in :data:`CHAPTERS`, so a run is never declared twice. A
:class:`PlannedRun` names its single-run :class:`RunConfig`, the rows it reads, its run folder, whether that
folder is complete, and its group: the runs one job computes with one backend and model at one seed, so the
model is loaded once (``cpdagthink plan --group KEY --execute``, what a workflow job calls). A plan that may
price what it can (``reproduce --dry-run``) sets aside the runs whose rows cannot be read here (a split not on
this machine) as :class:`Unplanned`, each with the reason, which names the file to place and where.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from ..causal.instance import Instance
from ..errors import CpdagthinkError
from ..run.config import RunConfig, RunSet
from ..run.data import DataError
from ..run.parameters import coerce_list
from ..run.records import RunRecord
from ..run.together import Planned
from ..run.spec import rows_sha256
from ..run.runfolder import is_complete
from . import experiments as ex
from .readings import REFERENCE, TARGET, ignored_by_backend

Key = tuple[str, int]  # how a chapter's tables name a run: (condition, probe or label; seed)


@dataclass(frozen=True)
class Declared:
    """One run a chapter reads: the part of the chapter it belongs to (``runs``, ``ood``, ``stress:alarm7``...),
    its key within that part, and its run (``setup.for_run(condition, seed, probe)``)."""

    part: str
    key: Key
    config: RunConfig


def _list(values: Mapping[str, Any], name: str) -> list[Any]:
    return coerce_list(values.get(name), name) or []


def _grid(part: str, setup: RunSet, conditions: Sequence[str], seeds: Sequence[int]) -> list[Declared]:
    """Every (condition, seed) run of ``setup``, seeds outer: the order the chapters' tables follow."""
    return [Declared(part, (c, s), setup.for_run(c, s)) for s in seeds for c in conditions]


def _probed(part: str, setup: RunSet, probes: Sequence[str], seeds: Sequence[int]) -> list[Declared]:
    """Structured Thinking unprobed (key ``unprobed``) and under each probe, per seed."""
    return [Declared(part, (probe or "unprobed", s), setup.for_run(TARGET, s, probe))
            for s in seeds for probe in (None, *probes)]


def main_results_runs(setup: RunSet, values: Mapping[str, Any]) -> list[Declared]:
    """Chapter 01: every condition at every seed and, unless the setup is the reference agent already, the
    reference agent's rows on the same sample (key ``reference agent``)."""
    runs = _grid("runs", setup, _list(values, "conditions"), setup.seeds)
    if values.get("include_reference") and setup.backend != ex.REFERENCE_AGENT:
        reference = ex.reference_of(setup)
        runs += [Declared("runs", (REFERENCE, s), reference.for_run(TARGET, s)) for s in setup.seeds]
    return runs


def complexity_runs(setup: RunSet, values: Mapping[str, Any]) -> list[Declared]:
    """Chapter 02: the grid on the setup's sample, on the OOD split's (part ``ood``) when ``ood_split`` names
    one, and on every row of each generated stress set (part ``stress:<family>``)."""
    from ..run.generate import stress_csv

    conditions = _list(values, "conditions")
    runs = _grid("runs", setup, conditions, setup.seeds)
    if values.get("ood_split"):
        runs += _grid("ood", ex.ood_setup(setup, values["ood_split"]), conditions, setup.seeds)
    for family in _list(values, "stress_families"):
        data = stress_csv(family, values.get("stress_graphs"), values.get("stress_per_graph"),
                          values.get("stress_seed", 0))
        runs += _grid(f"stress:{family}", ex.updated(setup, data=str(data), limit=0), conditions, setup.seeds)
    return runs


def ablation_runs(setup: RunSet, values: Mapping[str, Any]) -> list[Declared]:
    """Chapter 03: the conditions this model can serve (:func:`experiments.refusals`), the same for each extra
    model on the same backend (part ``scale:<model>``), and Structured Thinking with the tool forced by name
    (part ``forced``) when ``compare_tool_choice``."""
    conditions = _list(values, "conditions")
    refused = ex.refusals(setup, conditions)
    ran = [c for c in conditions if c not in refused]
    runs = _grid("runs", setup, ran, setup.seeds)
    for model in _list(values, "models"):
        runs += _grid(f"scale:{model}", ex.updated(setup, model=model), ran, setup.seeds)
    if values.get("compare_tool_choice"):
        forced = ex.updated(setup, decoding={"tool_choice": "forced"})
        runs += [Declared("forced", ("structured (forced)", s), forced.for_run(TARGET, s)) for s in setup.seeds]
    return runs


def probe_runs(setup: RunSet, values: Mapping[str, Any]) -> list[Declared]:
    """Chapter 04: Structured Thinking unprobed and under every probe, per seed, for the model and (part
    ``reference``, unless the setup is the reference agent already) for the reference agent."""
    probes = _list(values, "probes")
    runs = _probed("runs", setup, probes, setup.seeds)
    if values.get("include_reference") and setup.backend != ex.REFERENCE_AGENT:
        runs += _probed("reference", ex.reference_of(setup), probes, setup.seeds)
    return runs


def audited_runs(setup: RunSet, values: Mapping[str, Any]) -> list[Declared]:
    """Chapter 05: the audited conditions at every seed, and the shortcut's conditions at the first seed
    (part ``shortcut``)."""
    return (_grid("runs", setup, _list(values, "conditions"), setup.seeds)
            + _grid("shortcut", setup, _list(values, "shortcut_conditions"), setup.seeds[:1]))


def gallery_runs(setup: RunSet, values: Mapping[str, Any]) -> list[Declared]:
    """Chapter 06: the gallery's conditions at the first seed."""
    return _grid("runs", setup, _list(values, "conditions"), setup.seeds[:1])


def component_runs(setup: RunSet, values: Mapping[str, Any]) -> list[Declared]:
    """Chapter 07: the design's cells and the repair round, only with ``run_design`` (:mod:`components`)."""
    from .components import design_runs

    return [Declared("runs", key, config) for key, config in design_runs(setup, values)]


CHAPTERS: dict[str, Callable[[RunSet, Mapping[str, Any]], list[Declared]]] = {
    "01_main_results": main_results_runs, "02_complexity": complexity_runs, "03_ablations": ablation_runs,
    "04_probes": probe_runs, "05_audit": audited_runs, "06_failure_gallery": gallery_runs,
    "07_components": component_runs,
}


def declared(chapter: str, values: Mapping[str, Any]) -> list[Declared]:
    """The runs ``chapter`` reads with these parameter values: its notebook's ``globals()``, or its parameters
    cell's defaults with the overrides it declares (:func:`book.chapter_values`)."""
    if chapter not in CHAPTERS:
        raise ValueError(f"no chapter {chapter!r}; the chapters are: {', '.join(CHAPTERS)}")
    return CHAPTERS[chapter](ex.setup_from_parameters(values), values)


class Samples:
    """Each sample drawn once, however many runs read it (a sample is named by the fields that draw it)."""

    def __init__(self) -> None:
        self._drawn: dict[str, list[Instance] | DataError] = {}

    def of(self, config: RunConfig) -> list[Instance]:
        """The sample's rows; a sample whose data cannot be read raises its :class:`DataError`, once tried (the
        hub is not asked again for every run of one missing split)."""
        key = config.sample.model_dump_json()
        if key not in self._drawn:
            try:
                self._drawn[key] = config.sample.instances()
            except DataError as error:
                self._drawn[key] = error
        drawn = self._drawn[key]
        if isinstance(drawn, DataError):
            raise drawn
        return drawn


def run_chapter(chapter: str, namespace: Mapping[str, Any], progress: bool = True
                ) -> dict[str, dict[Key, list[RunRecord]]]:
    """What a chapter's notebook calls: every run it declares, computed where its folder is not complete and
    read where it is (:func:`experiments.run`; render-only refuses to compute), and their records by part and
    key, in the order declared."""
    samples, parts = Samples(), {}
    runs = declared(chapter, namespace)
    made = ex.run_many([Planned(run.config, samples.of(run.config)) for run in runs], progress=progress)
    for run, records in zip(runs, made):
        parts.setdefault(run.part, {})[run.key] = records
    return parts


class Rows(BaseModel):
    """The rows a run reads: the sample its config draws from ``source`` (by its limit, sample seed, variables
    and positives), how many, and the digest of their ids and contents (the run's ``metadata.json``
    ``instances_sha256``), so a run is never computed on rows other than those planned."""

    source: str
    count: int
    sha256: str

    @classmethod
    def of(cls, config: RunConfig, instances: Sequence[Instance]) -> "Rows":
        return cls(source=config.source, count=len(instances), sha256=rows_sha256(instances))


class PlannedRun(BaseModel):
    """One run of the plan: the chapters that read it, its single-run config, its rows and run folder, whether
    that folder is complete, its group (the job that computes it), and why its backend does not apply its
    condition where it does not (:func:`readings.ignored_by_backend`)."""

    chapters: list[str]
    config: RunConfig
    instances: Rows
    folder: str
    complete: bool
    group: str
    # why the backend does not apply the condition's switch (the run is planned, and its page says the same)
    not_applied: str = ""


def group_of(config: RunConfig) -> str:
    """The job that computes a run (:attr:`RunSpec.group <cpdagthink.run.spec.RunSpec.group>`): one backend and
    model with its computed options at one seed, whatever the endpoints that serve it."""
    return config.spec.group


def plan_book(overrides: dict[str, Any], only: list[str] | None = None,
              parameters: dict[str, Any] | None = None) -> list[PlannedRun]:
    """Every run the chapters ``cpdagthink book`` would execute with these arguments read (the same override
    semantics: a chapter takes the parameters it declares, its parameters cell gives the rest). A run that
    several chapters read appears once, with each of them in ``chapters``."""
    from .build import chapter_values, selected

    notebooks, overrides = selected(overrides, only, parameters)
    return plan_chapters((n.stem, chapter_values(n, overrides)) for n in notebooks)


@dataclass(frozen=True)
class Unplanned:
    """A declared run whose rows cannot be read here: the chapter execution that declares it (its index in
    the executions planned), its config, and why (:class:`~cpdagthink.run.data.DataError`'s message)."""

    execution: int
    config: RunConfig
    reason: str


def plan_chapters(executions: Iterable[tuple[str, Mapping[str, Any]]],
                  unplanned: list[Unplanned] | None = None) -> list[PlannedRun]:
    """Every run these chapter executions read, ``(chapter, its parameter values)`` each (a chapter may come
    more than once, e.g. on two models); a run that several read appears once, with each chapter in
    ``chapters``, in the order first declared. A run whose rows cannot be read raises, unless ``unplanned``
    is given: then it is left out of the plan and added there."""
    samples, found = Samples(), {}
    for index, (chapter, values) in enumerate(executions):
        for run in declared(chapter, values):
            try:
                instances = samples.of(run.config)
            except DataError as error:
                if unplanned is None:
                    raise
                unplanned.append(Unplanned(index, run.config, str(error)))
                continue
            folder = str(run.config.folder(instances))
            if folder in found:
                chapters = found[folder].chapters
                chapters += [] if chapter in chapters else [chapter]
                continue
            found[folder] = PlannedRun(chapters=[chapter], config=run.config,
                                       instances=Rows.of(run.config, instances), folder=folder,
                                       complete=is_complete(folder, run.config, instances), group=group_of(run.config),
                                       not_applied=ignored_by_backend(run.config.condition, run.config.backend,
                                                                      run.config.backend_options))
    return list(found.values())


def groups(runs: Sequence[PlannedRun]) -> dict[str, list[PlannedRun]]:
    """The runs by group, in plan order."""
    found: dict[str, list[PlannedRun]] = {}
    for run in runs:
        found.setdefault(run.group, []).append(run)
    return found


def execute(runs: Sequence[PlannedRun], progress: bool = True) -> None:
    """Compute every run that is not complete: runs of one backend share it, built once
    (:func:`experiments.backend_of`), and are computed together (:func:`experiments.compute`: at once, on one
    pool of its slots, where it streams requests; group by group otherwise); a complete run is left as it is.
    Runs whose rows no longer match the plan are refused (plan again)."""
    samples, asked = Samples(), []
    for members in groups(runs).values():
        for run in members:
            c, instances = run.config, samples.of(run.config)
            if Rows.of(c, instances) != run.instances:
                raise CpdagthinkError(f"the rows of {run.folder} are not those planned ({run.instances.source} "
                                      "changed since): run `cpdagthink plan` again")
            asked.append(Planned(c, instances))
    ex.compute(asked, progress=progress)


def execute_streamed(overrides: dict[str, Any], only: list[str] | None = None,
                     parameters: dict[str, Any] | None = None, progress: bool = True) -> list[PlannedRun]:
    """Compute, before any chapter executes, every incomplete run of the chapters ``cpdagthink book`` would execute
    (:func:`plan_book`'s arguments) whose backend streams requests (an API): all at once, on one pool of each
    backend's slots, so that no slot idles at a chapter's end; the chapters then read complete folders. Runs of
    a backend that computes whole batches (a local model, the reference agent) are left to their chapters, as
    before. The runs computed."""
    from ..backends import backend_class

    runs = [r for r in plan_book(overrides, only, parameters)
            if not r.complete and backend_class(r.config.backend).streams_requests]
    if runs:
        execute(runs, progress)
    return runs
