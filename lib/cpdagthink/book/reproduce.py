"""``cpdagthink reproduce``: the recipes (:mod:`.recipes`) planned with the book's own machinery and computed by
its execution, and the one book that shows the paper's design.

A recipe's setting is one chapter execution; its parameters are the paper's (whole split, the ``paper`` budget
set, its model and engine, its seeds), then the setting's own, then what the user gives (flags and ``-p``, which
win: ``--backend vllm --model M`` reproduces every result on model M; ``--backend reference`` plans them on the
symbolic agent). :func:`plan_recipes` lists their runs with :func:`.plan.plan_chapters`, so a run that two
results need is planned, and computed, once; :func:`book_design` folds the settings on the paper's primary model
and split into one book, each chapter with its own seeds and parameters (``01:seeds``), three seeds for the main
comparison and one elsewhere.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..method.budgets import budget_set
from ..run.data import DataError
from .chapters import NOTEBOOKS, SCOPE, chapter_values
from .cost import Pricing, cost_lines, plan_cost
from .plan import PlannedRun, Unplanned, plan_chapters
from .recipes import BUDGETS, OOD, QWEN35_27B, Recipe, Setting

ENGINE = ("backend", "model", "backend_options")


def setting_overrides(setting: Setting, overrides: Mapping[str, Any]) -> dict[str, Any]:
    """What one setting's chapter is given: the paper's whole split and budgets, the setting's engine, seeds and
    parameters, then ``overrides`` (the user's). A backend other than the setting's takes the setting's model,
    options and extra models away (they belong to the paper's engine): only the user's apply. ``ood_split`` in
    ``overrides`` also replaces the split of a setting run on Paraphrase-OOD (e.g. a generated stand-in)."""
    backend = overrides.get("backend", setting.backend)
    own = backend == setting.backend
    options = {**(setting.backend_options if own else {}), **(overrides.get("backend_options") or {})}
    model = overrides.get("model", setting.model if own else None)
    return {"limit": 0, **budget_set(BUDGETS).as_parameters(), **_own_parameters(setting, overrides),
            **{k: v for k, v in overrides.items() if k not in ENGINE},
            "backend": backend, "backend_options": options, **({"model": model} if model else {})}


def _own_parameters(setting: Setting, overrides: Mapping[str, Any]) -> dict[str, Any]:
    """The setting's seeds and parameters as ``overrides`` leave them: another engine than the setting's serves
    none of the paper's models, so the extra models of a scale comparison go; ``ood_split`` moves a setting
    run on Paraphrase-OOD to that split."""
    own = overrides.get("backend", setting.backend) == setting.backend
    parameters = {"seeds": list(setting.seeds),
                  **{k: v for k, v in setting.parameters.items() if own or k != "models"}}
    if parameters.get("split") == OOD and overrides.get("ood_split"):
        parameters["split"] = overrides["ood_split"]
    return parameters


def settings(recipes: Sequence[Recipe], only: Sequence[str] | None = None) -> list[Setting]:
    """The settings of ``recipes``, each once (two results that read one setting share it), in order;
    ``only``: those of the chapters whose names start with one of these prefixes."""
    found: list[Setting] = []
    for recipe in recipes:
        found += [s for s in recipe.settings if s not in found
                  and (not only or any(s.chapter.startswith(p) for p in only))]
    return found


def executions(recipes: Sequence[Recipe], overrides: Mapping[str, Any],
               only: Sequence[str] | None = None) -> list[tuple[str, dict[str, Any]]]:
    """``(chapter, parameter values)`` of each chapter execution the recipes need."""
    return [(s.chapter, chapter_values(NOTEBOOKS / f"{s.chapter}.ipynb", setting_overrides(s, overrides)))
            for s in settings(recipes, only)]


def plan_recipes(recipes: Sequence[Recipe], overrides: Mapping[str, Any], only: Sequence[str] | None = None,
                 unplanned: list[Unplanned] | None = None) -> list[PlannedRun]:
    """Every run the recipes read, each once (:func:`.plan.plan_chapters`; with ``unplanned``, those whose rows
    cannot be read here are set aside there instead of raising)."""
    return plan_chapters(executions(recipes, overrides, only), unplanned)


def unplanned_lines(recipes: Sequence[Recipe], only: Sequence[str] | None, unplanned: Sequence[Unplanned]) -> list[str]:
    """One line per reason a run could not be planned: how many runs, of which recipes, and the reason (for a
    split not on this machine: the file to place and where)."""
    chosen = settings(recipes, only)
    found: dict[str, tuple[list[str], set[str]]] = {}
    for left in unplanned:
        keys, runs = found.setdefault(left.reason, ([], set()))
        keys += [r.key for r in recipes if chosen[left.execution] in r.settings and r.key not in keys]
        runs.add(left.config.model_dump_json())
    return [f"not planned: {len(runs)} run(s) of {', '.join(keys)}, left out of the total: {reason}"
            for reason, (keys, runs) in found.items()]


def _merged(name: str, a: Any, b: Any) -> Any:
    """Two settings' values of one parameter in one chapter execution: lists joined (in order, each item
    once), equal values kept; anything else cannot be one execution."""
    if isinstance(a, list) and isinstance(b, list):
        return a + [item for item in b if item not in a]
    if a != b:
        raise ValueError(f"two settings of one chapter give {name} {a!r} and {b!r}: not one book")
    return a


def book_design(recipes: Sequence[Recipe], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """The overrides of one ``cpdagthink book`` that shows the recipes' settings on the paper's primary model
    and the ID split (the others, other models and splits, are runs the recipes compute, shown by a book of
    their own): what every chapter shares once, and each chapter's own seeds and parameters scoped to it
    (``01:seeds``), the settings of one chapter merged (:func:`_merged`)."""
    chapters: dict[str, dict[str, Any]] = {}
    for setting in settings(recipes):
        if setting.model != QWEN35_27B or "split" in setting.parameters:
            continue
        given = _own_parameters(setting, overrides)
        held = chapters.setdefault(setting.chapter, {})
        for name, value in given.items():
            held[name] = _merged(name, held[name], value) if name in held else value
    if "seeds" in chapters.get("01_main_results", {}):
        chapters["01_main_results"]["seeds"] = sorted(chapters["01_main_results"]["seeds"])
    shared = setting_overrides(Setting("01_main_results", QWEN35_27B), overrides)
    shared.pop("seeds")
    scoped = {f"{chapter.split('_')[0]}{SCOPE}{name}": value for chapter, given in chapters.items()
              for name, value in given.items() if overrides.get(name) is None}
    return {**shared, "seeds": list(overrides.get("seeds") or [0]), **scoped}


def plan_lines(runs: Sequence[PlannedRun]) -> list[str]:
    """One line per run (whether it is complete, what it is, its rows and folder), then the count."""
    lines = [f"{'complete  ' if r.complete else 'to compute'}  {r.config.condition}"
             f"{' / ' + r.config.probe if r.config.probe else ''}  {r.config.label}  seed {r.config.seed}  "
             f"{r.instances.count} rows of {r.instances.source}  {r.folder}" for r in runs]
    todo = sum(not r.complete for r in runs)
    return [*lines, f"{len(runs)} runs, {todo} to compute"]


def reproduce(keys: Sequence[str], overrides: Mapping[str, Any], parameters: Mapping[str, Any] | None = None,
              only: Sequence[str] | None = None, *, dry_run: bool = False, book: bool = False,
              pricing: Pricing | None = None) -> int:
    """Plan the recipes ``keys`` (``PAPER``: all), print the plan, and unless ``dry_run`` compute every run not
    complete (:func:`.plan.execute`, group by group) and, with ``book``, build the one book of
    :func:`book_design`; a dry run prints what the plan still costs (:mod:`.cost`) instead, and what could not
    be planned (:func:`_dry_run`). 0 when every run is complete at the end (or planned only), 1 when some is
    not (or could not be planned)."""
    from .build import build, selected
    from .plan import execute
    from .recipes import selected as chosen

    recipes = chosen(list(keys))
    _, given = selected(dict(overrides), None, dict(parameters or {}))  # every name checked, -p merged
    if dry_run:
        return _dry_run(recipes, given, only, pricing or Pricing())
    runs = plan_recipes(recipes, given, only)
    print("\n".join(plan_lines(runs)), flush=True)
    execute(runs)
    left = [r.folder for r in plan_recipes(recipes, given, only) if not r.complete]
    if left:
        print(f"cpdagthink reproduce: {len(left)} run(s) still incomplete, first {left[0]}")
        return 1
    if book:
        design = book_design(recipes, given)
        print(f"book: {build(design, only=design_chapters(design))}")
    return 0


def _dry_run(recipes: Sequence[Recipe], given: Mapping[str, Any], only: Sequence[str] | None,
             pricing: Pricing) -> int:
    """What the recipes' runs still cost, and a line for each reason some could not be planned (their rows are
    not on this machine): 1 then, or where nothing could be planned (the first reason raised), else 0."""
    unplanned: list[Unplanned] = []
    runs = plan_recipes(recipes, given, only, unplanned)
    if unplanned and not runs:
        raise DataError(unplanned[0].reason)
    print("\n".join([*cost_lines(plan_cost(runs, pricing)), *unplanned_lines(recipes, only, unplanned)]))
    return 1 if unplanned else 0


def design_chapters(design: Mapping[str, Any]) -> list[str] | None:
    """The chapter prefixes a design gives parameters of their own (each its seeds); None: every chapter."""
    from .chapters import select_notebooks

    named = sorted({name.split(SCOPE)[0] for name in design if SCOPE in name})
    return None if len(named) == len(select_notebooks()) else named


def _word(name: str, value: Any) -> str:
    """``NAME=VALUE`` as ``-p`` and the grid read it back (text as it is, anything else as JSON)."""
    return f"{name}={value if isinstance(value, str) else json.dumps(value, separators=(',', ':'))}"


@dataclass(frozen=True)
class _Design:
    """A design's parts as both command lines spell them."""

    only: list[str] | None
    engine: dict[str, str]  # backend, model
    options: list[str]  # backend options as KEY=VALUE words
    budgets: dict[str, Any]  # max_tokens_* as given
    seeds: list[int]
    words: list[str]  # every other parameter as NAME=VALUE, chapter-scoped ones last

    @classmethod
    def of(cls, design: Mapping[str, Any]) -> "_Design":
        budgets = {k: design.get(k) for k in budget_set(BUDGETS).as_parameters()}
        rest = [_word(k, v) for k, v in design.items() if k not in (*ENGINE, "seeds", *budgets) and SCOPE not in k]
        return cls(design_chapters(design), {k: design[k] for k in ("backend", "model") if design.get(k)},
                   [_word(k, v) for k, v in design.get("backend_options", {}).items()], budgets,
                   list(design["seeds"]), rest + [_word(k, v) for k, v in design.items() if SCOPE in k])

    @property
    def named(self) -> bool:
        return self.budgets == budget_set(BUDGETS).as_parameters()

    def book(self) -> list[str]:
        budgets = (["--budgets", BUDGETS] if self.named else
                   [f"--max-tokens-turn1={self.budgets['max_tokens_turn1']}",
                    f"--max-tokens-answer={self.budgets['max_tokens_answer']}"])
        return ["cpdagthink", "book", *(["--only", *self.only] if self.only else []),
                *[w for k, v in self.engine.items() for w in (f"--{k}", v)], *[w for o in self.options for w in ("-o", o)],
                *budgets, "--seeds", *map(str, self.seeds), *[w for p in self.words for w in ("-p", p)]]

    def grid(self, profile: str) -> list[str]:
        budgets = ([f"BUDGETS={BUDGETS}"] if self.named else
                   [f"TURN1_TOKENS={self.budgets['max_tokens_turn1']}",
                    f"ANSWER_TOKENS={self.budgets['max_tokens_answer']}"])
        return ["make", "grid", f"PROFILE={profile}", *([f"ONLY={' '.join(self.only)}"] if self.only else []),
                *[f"{k.upper()}={v}" for k, v in self.engine.items()],
                *([f"BACKEND_OPTIONS={' '.join(self.options)}"] if self.options else []), *budgets,
                f"SEEDS={' '.join(map(str, self.seeds))}", f"PARAMETERS={' '.join(self.words)}"]


def design_commands(design: Mapping[str, Any], profile: str = "slurm") -> tuple[str, str]:
    """The one book of :func:`book_design` as a ``cpdagthink book`` command and as a ``make grid`` line (each
    value one shell word), so that either builds the very same runs and pages."""
    parts = _Design.of(design)
    return shlex.join(parts.book()), shlex.join(parts.grid(profile))


def one_book_commands(keys: Sequence[str], overrides: Mapping[str, Any],
                      parameters: Mapping[str, Any] | None = None) -> tuple[str, str]:
    """:func:`design_commands` of the recipes ``keys`` with the user's flags and ``-p`` (checked as ``book``
    checks them)."""
    from .build import selected
    from .recipes import selected as chosen

    _, given = selected(dict(overrides), None, dict(parameters or {}))
    return design_commands(book_design(chosen(list(keys)), given))
