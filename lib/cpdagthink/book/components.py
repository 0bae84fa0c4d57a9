"""Chapter 07's runs: the design of the method's components (:mod:`cpdagthink.method.design`) as runs of one
setup, what they cost before any runs, and their records when a build already holds them.

The chapter's parameters: ``design`` (``full``: every combination of the typed arm's four binary factors, 16
cells; ``half``: the resolution-IV half fraction, 8 cells), ``factors`` (a subset of the four, the others at
the paper's level; None: all four), ``include_prose`` (the lightly structured and free prose arms),
``include_repair`` (the repair round, ``structured_repair``) and ``run_design``. A design is many runs (18 cells
at the default), more than the default book's time target allows, so the chapter runs them only with
``run_design`` true; otherwise it is made from their records when every one is complete, and else shows the
design, its cost and the command that runs it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from ..backends import backend_class
from ..causal.instance import Instance
from ..method.design import Point, design_points, point_named, refusal
from ..run.config import RunConfig, RunSet
from ..run.parameters import coerce_list
from ..run.records import RunRecord
from ..run.runfolder import completeness
from . import experiments as ex
from .chapters import reproduce_command

REPAIR = "structured_repair"
Key = tuple[str, int]


def cells_of(values: Mapping[str, Any]) -> list[Point]:
    """The chapter's cells from its parameters (module docstring), the paper's point first."""
    factors = coerce_list(values.get("factors"), "factors") or None
    return design_points(factors, str(values.get("design") or "full"), bool(values.get("include_prose", True)))


def refused_cells(setup: RunSet, cells: Sequence[Point]) -> dict[str, str]:
    """The cells this backend cannot apply, each with the reason: what the backend answers for itself
    (:func:`design.refusal` on ``Backend.applies_regex`` and ``Backend.tools``: no regex where it is not applied)
    and what the setup refuses of any condition (:func:`experiments.refusals`, e.g. a model that cannot serve
    it). A refused cell is left out and named, never run as another."""
    family = backend_class(setup.backend)
    regex, tools = family.applies_regex(setup.backend_options), family.tools
    refused = {p.name: why for p in cells if (why := refusal(p, regex, tools))}
    others = [p.name for p in cells if p.name not in refused]
    return refused | ex.refusals(setup, others)


def design_runs(setup: RunSet, values: Mapping[str, Any], planned: bool | None = None) -> list[tuple[Key, RunConfig]]:
    """Every run the design declares, as ``((condition, seed), config)``: each cell this backend applies, and the
    repair round with ``include_repair``, at every seed. None unless ``run_design`` (or ``planned`` is true:
    the runs a build would read if they were there)."""
    if not (values.get("run_design") if planned is None else planned):
        return []
    cells = cells_of(values)
    refused = refused_cells(setup, cells)
    names = [p.name for p in cells if p.name not in refused]
    if values.get("include_repair", True) and REPAIR not in ex.refusals(setup, [REPAIR]):
        names.append(REPAIR)
    return [((name, seed), setup.for_run(name, seed)) for seed in setup.seeds for name in names]


@dataclass(frozen=True)
class Cost:
    """What running the design costs, before it runs: runs, instance-runs, model calls at most (two per instance,
    one more where the repair round sends findings) and the token budget those calls may spend."""

    runs: int
    instances: int
    calls: int
    tokens: int


def design_cost(setup: RunSet, values: Mapping[str, Any], instances: int) -> Cost:
    """The cost of :func:`design_runs` on ``instances`` rows (counts only: nothing is built or read)."""
    runs = design_runs(setup, values, planned=True)
    d = setup.decoding
    calls = sum((3 if name == REPAIR else 2) * instances for (name, _), _ in runs)
    tokens = sum(((2 if name == REPAIR else 1) * d.max_tokens_turn1 + d.max_tokens_answer) * instances
                 for (name, _), _ in runs)
    return Cost(len(runs), len(runs) * instances, calls, tokens)


def held(setup: RunSet, values: Mapping[str, Any], instances: Sequence[Instance]) -> dict[Key, list[RunRecord]]:
    """The design's records when every one of its runs is complete in this build's run folders (read only: no
    backend, no model); empty otherwise."""
    found = {}
    for key, config in design_runs(setup, values, planned=True):
        held_run = completeness(config.folder(list(instances)), config, instances)
        if not held_run.complete:
            return {}
        found[key] = held_run.records
    return found


def cell_runs(runs: Mapping[Key, Sequence[RunRecord]], seed: int) -> dict[Point, Sequence[RunRecord]]:
    """The design cells' records at ``seed``, by point (the repair round, outside the design, left out)."""
    return {point: records for (name, s), records in runs.items()
            if s == seed and (point := point_named(name)) is not None}


def run_command(values: Mapping[str, Any]) -> str:
    """The command that runs the design with these parameters: the chapter's reproduce command
    (:func:`chapters.reproduce_command`, every parameter that differs from the notebook's defaults) with
    ``run_design`` true."""
    return reproduce_command("07_components", {**values, "run_design": True})
