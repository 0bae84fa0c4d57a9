"""The recipe of every result the paper reports and this project reproduces: which chapter, with which
parameters, seeds, budgets and model, computes it.

The table is data (:data:`RECIPES`), read by ``cpdagthink reproduce`` (:mod:`.reproduce`): ``--list`` prints it,
``reproduce TABLE1`` plans and computes exactly the runs its settings' chapters declare (:mod:`.plan`), a run
two results need computed once. Which recipe reproduces each quoted figure is the ``recipe`` column of
``data/paper_reported.csv`` (the book's paper-figures appendix), so a figure and its recipe are named in one
place, and ``tests/test_recipes.py`` fails on a figure with no recipe.

Every setting runs the whole split (``limit=0``) under the named budget set ``paper``
(:mod:`cpdagthink.method.budgets`), with the model's recommended sampling, and the paper's design of seeds:
three (0, 1, 2) for the main comparison (§4.2, Appendix B), one (0, the primary run) for every other result,
as §8 states ("several evaluations remain single-seed"). What the paper leaves unstated is said in each
recipe's ``unstated``, with the value used.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from ..method.budgets import budget_set

QWEN35_27B = "Qwen/Qwen3.5-27B"
QWEN36_27B = "Qwen/Qwen3.6-27B"
QWEN35_9B = "Qwen/Qwen3.5-9B"
GPT54_MINI = "gpt-5.4-mini"
OOD = "perturbation_by_paraphrasing"  # the hub split of Paraphrase-OOD (§4.1, n=2246)
BUDGETS = "paper"
PRIMARY_SEEDS = (0,)
MAIN_SEEDS = (0, 1, 2)
STRESS = ["random7", "alarm7", "asia8"]

# The engine each model ran on (App. J): open weights on 2-GPU tensor-parallel vLLM at
# gpu_memory_utilization 0.88 (the vllm backend's defaults), with a context that holds the paper budgets;
# the API at max_concurrency 5.
_VLLM = ("vllm", {"max_model_len": 32768})
_API = ("openai", {"reasoning_effort": "medium", "max_concurrency": 5})
_UNSTATED_BUDGETS = f"token budgets: the paper states none; the set {BUDGETS!r} is used"
_UNSTATED_EFFORT = "GPT-5.4-mini's reasoning effort: the paper states none; medium is used"


@dataclass(frozen=True)
class Setting:
    """One execution of a chapter that a result reads: the chapter, the paper's model and engine, the seeds,
    and the chapter parameters that differ from its notebook's defaults."""

    chapter: str
    model: str
    seeds: tuple[int, ...] = PRIMARY_SEEDS
    parameters: Mapping[str, Any] = field(default_factory=dict)

    @property
    def backend(self) -> str:
        """The engine the paper ran this model on: the API for GPT models, vLLM for open weights."""
        return self._engine[0]

    @property
    def backend_options(self) -> dict[str, Any]:
        return dict(self._engine[1])

    @property
    def _engine(self) -> tuple[str, Mapping[str, Any]]:
        return _API if self.model.startswith("gpt-") else _VLLM


@dataclass(frozen=True)
class Recipe:
    """A reported result (a table, figure or section of the paper) and the settings that reproduce it."""

    key: str
    result: str
    settings: tuple[Setting, ...]
    unstated: tuple[str, ...] = (_UNSTATED_BUDGETS,)


def _main(model: str = QWEN35_27B, seeds: tuple[int, ...] = PRIMARY_SEEDS, **parameters: Any) -> Setting:
    """Chapter 01 on the full ID split."""
    return Setting("01_main_results", model, seeds, parameters)


_PRIMARY = _main(conditions=["baseline_enhanced", "structured", "twoturn_prose_pc"], include_reference=False)
_BINS = Setting("02_complexity", QWEN35_27B, parameters={"ood_split": OOD})
_ABLATIONS = Setting("03_ablations", QWEN35_27B, parameters={"models": [QWEN35_9B]})
_STRESS = Setting("02_complexity", QWEN35_27B, parameters={"stress_families": STRESS})

RECIPES: tuple[Recipe, ...] = (
    Recipe("TABLE1", "Table 1 (§4.2): F1(YES) of Structured Thinking against BaselineEnhanced on four settings, "
           "the prose control and the single-turn diagnostic", (
               _PRIMARY,
               _main(QWEN36_27B, conditions=["baseline_enhanced", "structured", "singleturn_structured"],
                     include_reference=False),
               _BINS,
               _main(GPT54_MINI, conditions=["baseline_enhanced", "structured"], include_reference=False),
           ), (_UNSTATED_BUDGETS, _UNSTATED_EFFORT,
               "the Paraphrase-OOD row: computed as chapter 02's OOD grid (the same runs as Figure 2's)")),
    Recipe("APPENDIX_A", "Table 5 (Appendix A): errors of the primary seed (false negatives and positives)",
           (_PRIMARY,)),
    Recipe("APPENDIX_B", "Appendix B and §4.2: three full-ID seeds of the main comparison (mean and sd)",
           (_main(seeds=MAIN_SEEDS, conditions=["baseline_enhanced", "structured", "twoturn_prose_pc"],
                  include_reference=False),),
           (_UNSTATED_BUDGETS, "the seeds: the paper names none; 0 (the primary run), 1 and 2 are used")),
    Recipe("FIGURE2", "Figure 2 (§4.3): the gain by number of variables on ID and Paraphrase-OOD", (_BINS,)),
    Recipe("SEC4_3", "§4.3: larger-graph pilots (Random n=7, ALARM-derived n=7, ASIA-derived n=8) on Qwen3.5-27B",
           (_STRESS,), (_UNSTATED_BUDGETS, "the generated graphs: the paper states their number only for ASIA "
                        "(N=40); 10 graphs of 20 hypotheses are drawn for the others, seed 0")),
    Recipe("APPENDIX_C", "Table 7 (Appendix C): the larger-graph stress tests at 27B and 9B",
           (_STRESS, Setting("02_complexity", QWEN35_9B, parameters={"stress_families": STRESS})),
           (_UNSTATED_BUDGETS, "the generated graphs: as §4.3's")),
    Recipe("SEC5", "§5: one-factor ablations (minimal instruction, no thinking, no constrained decoding) at 27B "
           "and 9B", (_ABLATIONS,)),
    Recipe("APPENDIX_D", "Table 8 (Appendix D): thinking and constrained decoding at 9B against 27B",
           (_ABLATIONS,)),
    Recipe("TABLE3", "Table 3 (§6): the turn-2 graph probes on Qwen3.5-27B ID",
           (Setting("04_probes", QWEN35_27B, parameters={"include_reference": False}),)),
    Recipe("SEC7_1", "§7.1: the audit of the emitted CPDAG fields on ID and Paraphrase-OOD",
           (Setting("05_audit", QWEN35_27B),
            Setting("05_audit", QWEN35_27B, parameters={"split": OOD, "conditions": ["structured"],
                                                         "shortcut_conditions": []})),
           (_UNSTATED_BUDGETS, "the OOD audit: the Structured Thinking run of Figure 2's OOD grid")),
    Recipe("SEC7_3", "§7.3: the cost of the method against the one-turn baseline (tokens, wall time)",
           (_PRIMARY,)),
    Recipe("APPENDIX_A1", "Appendix A.1: GPT-5.4-mini's tool choice (auto with the instruction, forced by name)",
           (Setting("03_ablations", GPT54_MINI, parameters={"conditions": ["structured", "baseline_enhanced"],
                                                            "compare_tool_choice": True}),),
           (_UNSTATED_BUDGETS, _UNSTATED_EFFORT)),
    Recipe("APPENDIX_I", "Appendix I: the failure gallery (the paper's 32 cases are hand-labelled; this one lists "
           "the errors of the primary run)", (Setting("06_failure_gallery", QWEN35_27B),)),
)
BY_KEY = {r.key: r for r in RECIPES}


def recipe(key: str) -> Recipe:
    """The recipe ``key`` (case-insensitive); an unknown one is refused with the keys."""
    found = BY_KEY.get(key.upper())
    if found is None:
        raise ValueError(f"no recipe {key!r}; the recipes are: {', '.join(BY_KEY)} (or PAPER for all)")
    return found


def selected(keys: list[str]) -> list[Recipe]:
    """The recipes named (``PAPER``: all of them), each once, in the table's order."""
    if any(k.upper() == "PAPER" for k in keys):
        return list(RECIPES)
    named = {recipe(k).key for k in keys}
    return [r for r in RECIPES if r.key in named]


def _parameters(setting: Setting) -> str:
    shown = [f"{k}={v if isinstance(v, str) else json.dumps(v)}" for k, v in setting.parameters.items()]
    return ", ".join(shown) or "the chapter's defaults"


def recipe_listing(recipes: Sequence[Recipe] | None = None) -> str:
    """The recipes as ``reproduce --list`` prints them: each recipe's key and result, then one line per setting
    (chapter, model and engine, seeds, budgets, parameters), then what the paper leaves unstated."""
    budgets = budget_set(BUDGETS)
    lines = [f"Every setting: the whole split, budgets {BUDGETS!r} ({budgets.turn1} turn 1, {budgets.answer} "
             "answer), the model's recommended sampling; --backend/--model/-o/-p replace any of it."]
    for r in recipes or RECIPES:
        lines += ["", f"{r.key}: {r.result}"]
        lines += [f"  {s.chapter}  {s.model} ({s.backend})  seeds {' '.join(map(str, s.seeds))}  {_parameters(s)}"
                  for s in r.settings]
        lines += [f"  unstated: {u}" for u in r.unstated]
    return "\n".join(lines)
