"""Chapter 03, the ablations: each one-factor removal's drop against Structured Thinking, the scale
interaction and the tool choice.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from ...analysis import tables
from ...analysis.markup import Markdown
from ...causal.instance import Instance
from ...run.records import RunRecord
from ..presentation import label
from .glue import Headline, Reading, TARGET, paper_numbers, sample_phrases, scale_phrase, sentence, signed
from .verdicts import answer_causes, paired_headline


ABLATIONS = {"minimal_instruction": "replacing the PC prompt with a minimal instruction",
             "no_constrained_decoding": "removing the regex constraint", "no_thinking": "switching thinking off"}


def ablation_table(scores: pd.DataFrame, runs: Mapping[tuple[str, int], Sequence[RunRecord]]) -> pd.DataFrame:
    """F1 per condition (mean over seeds) and its drop: Structured Thinking minus the condition (pp; positive:
    the removal hurt). A condition whose drop would not be a finding gets none, and its note says why: a tool
    condition that produced no turn-1 object on any row, or answers that make its F1 degenerate on some seed
    (:func:`answer_causes`), its own or Structured Thinking's."""
    f1 = tables.seed_frame(scores, "gold").set_index("condition")["F1 mean"]
    empty = {c for (c, _), records in runs.items() if tables.produced_no_object(records)}
    ignored = not_applied(runs)
    degenerate: dict[str, str] = {}
    for (condition, seed), records in runs.items():
        if condition != TARGET and (TARGET, seed) in runs:
            causes, bad = answer_causes({TARGET: runs[(TARGET, seed)], condition: records}, "the drop")
            if bad:
                degenerate.setdefault(condition, f"seed {seed}: " + "; ".join(causes))
    note = pd.Series([ignored[c] if c in ignored else NO_OBJECT if c in empty else
                      "no Structured Thinking object on any row" if TARGET in empty and c != TARGET else
                      degenerate.get(c, "") for c in f1.index], index=f1.index)
    drop = (f1.get(TARGET, math.nan) - f1).mask(note != "")
    return pd.DataFrame({"F1": f1, "drop vs Structured Thinking (pp)": drop, "note": note})


NO_OBJECT = "no turn-1 object on any row"
NOT_APPLIED = "not applied on this backend"
# What each ablation's switch needs from a backend that ignores it (said beside NOT_APPLIED).
_APPLIED_BY = {"no_constrained_decoding": "turn 1 is unconstrained in both conditions; a vLLM server applies the "
                                          "constraint with regex_mode=vllm",
               "no_thinking": "this model has no thinking mode to switch off"}


def not_applied(runs: Mapping[tuple[str, int], Sequence[RunRecord]]) -> dict[str, str]:
    """The conditions whose switch the backend did not apply on some seed, each with the note the page prints:
    turn 1 sent the same request as Structured Thinking's on every row (:func:`tables.same_first_requests`), or,
    for the constraint's removal, the backend noted that Structured Thinking's constraint was not enforced
    (:func:`tables.constraint_not_enforced`). Such an ablation cannot differ from Structured Thinking, so its
    drop is no finding."""
    found = {}
    for (condition, seed), records in runs.items():
        if condition == TARGET or (TARGET, seed) not in runs:
            continue
        target = runs[(TARGET, seed)]
        unenforced = condition == "no_constrained_decoding" and tables.constraint_not_enforced(target)
        if unenforced:
            found.setdefault(condition, f"{NOT_APPLIED}: the backend noted on every row that Structured Thinking's "
                                        f"constraint was not enforced ({_APPLIED_BY[condition]})")
        elif tables.same_first_requests(target, records):
            why = _APPLIED_BY.get(condition, "its switch changed nothing the backend was sent")
            found.setdefault(condition, f"{NOT_APPLIED}: turn 1 sent Structured Thinking's own request on every row "
                                        f"({why})")
    return found


KEY_ABLATION = "no_constrained_decoding"  # the condition of chapter 03's key figure (:func:`ablation_headline`)


def ignored_by_backend(condition: str, backend: str, options: Mapping[str, Any]) -> str:
    """Why ``backend`` with these ``options`` does not apply ``condition``'s one switch, known before anything
    runs from what the backend answers for itself (``Backend.applies_regex``): removing the regex constraint
    where no regex is applied sends Structured Thinking's own turn 1. Empty when it applies it (or cannot say
    before the run: a model without thinking mode is known once it is loaded, and :func:`not_applied` reads it
    from the records)."""
    from ...backends import BACKENDS, backend_class

    if condition == KEY_ABLATION and backend in BACKENDS and not backend_class(backend).applies_regex(options):
        return f"{NOT_APPLIED}: {_APPLIED_BY[condition]}"
    return ""


def ablation_phrase(drops: pd.DataFrame, refused: Mapping[str, str], on_first_screen: str = "") -> str:
    """Each one-factor removal's drop in words, or why there is none; for ``on_first_screen``, the condition of
    the page's key figure, the why is the verdict's, which the page says once, on its first screen."""
    parts = []
    for condition, what in ABLATIONS.items():
        if condition in refused or condition not in drops.index:
            parts.append(f"{what} was not run")
        elif drops.loc[condition, "note"] and condition == on_first_screen:
            parts.append(f"{what} gives no drop to report, for the reason the verdict above gives")
        elif drops.loc[condition, "note"]:
            parts.append(f"{what} gives no drop to report ({drops.loc[condition, 'note']})")
        else:
            parts.append(f"{what} drops F1 by {signed(drops.loc[condition, 'drop vs Structured Thinking (pp)'])} pp")
    return sentence("; ".join(parts))


def scale_table(scores: pd.DataFrame, model: str | None,
                runs_by_model: Mapping[str, Mapping[tuple[str, int], Sequence[RunRecord]]]) -> pd.DataFrame:
    """F1 (gold, mean over seeds) per condition and model: the setup's ``model`` (``scores``) and each other
    model's runs on the same backend and sample (the scale interaction of App. D)."""
    frames = [scores.assign(model=model or "default")]
    frames += [tables.scores_frame(runs).assign(model=other) for other, runs in runs_by_model.items()]
    every = pd.concat(frames)
    return every[every["labels"] == "gold"].pivot_table(index="condition", columns="model", values="F1", sort=False)


def tool_choice_table(runs: Mapping[tuple[str, int], Sequence[RunRecord]],
                      forced: Mapping[tuple[str, int], Sequence[RunRecord]], seeds: Sequence[int]) -> pd.DataFrame:
    """Structured Thinking with ``tool_choice="auto"`` (plus the prompt instruction, ``runs``) against the tool
    forced by name (App. A.1; ``forced``, keyed ``structured (forced)``): F1 mean and sd over seeds."""
    both = {("structured (auto)", s): runs[(TARGET, s)] for s in seeds} | dict(forced)
    return tables.seed_frame(tables.scores_frame(both))


def ablations(drops: pd.DataFrame, thinking_supported: bool, instances: Sequence[Instance],
              seeds: Sequence[int], refused: Mapping[str, str] | None = None, backend: str = "") -> Reading:
    """Chapter 03: each one-factor removal's drop in F1 against Structured Thinking (Structured Thinking minus
    the ablation); ``refused`` names the conditions this model cannot serve (:func:`experiments.refusals`);
    ``backend``, what answered, chooses the reading of the run's scale (:func:`scale_phrase`)."""
    refused = refused or {}
    numbers = paper_numbers(["ablation_minimal_f1", "ablation_no_thinking_drop", "ablation_no_constrained_drop",
                             "ablation_9b_no_thinking_structured_gain", "ablation_9b_no_thinking_baseline_gain",
                             "ablation_9b_constrained_gain"])
    note = ("" if thinking_supported else "This model has no thinking mode, so the no-thinking row sends the same "
            "prompts as Structured Thinking: its difference is zero by construction, not a finding.")
    if refused:
        note = Markdown(" ").join(Markdown(sentence(f"{label(c)} was not run: {why}")) for c, why in refused.items())
    return Reading(numbers, sample_phrases(instances, seeds) | {"thinking_note": note,
                                                                "ablation_drops": ablation_phrase(drops, refused,
                                                                                                  KEY_ABLATION),
                                                                "scale_note": scale_phrase(instances, backend)})


def ablation_headline(paired: pd.DataFrame, drops: pd.DataFrame,
                      runs: Mapping[tuple[str, int], Sequence[RunRecord]] | None = None) -> Headline:
    """Chapter 03's key figure: the drop without constrained decoding (Structured Thinking minus it), with
    the first seed's paired CI and the causes its answers rest on (read from ``runs``)."""
    condition = KEY_ABLATION
    figure = "the drop without constrained decoding"
    note = drops.loc[condition, "note"] if condition in drops.index else ""
    missing = (f"{figure} has nothing to compare: the condition produced {NO_OBJECT}" if note == NO_OBJECT else
               f"removing the regex constraint is {note}" if note.startswith(NOT_APPLIED) else "")
    return paired_headline(paired, f"{TARGET} vs {condition}", figure, "ablation_no_constrained_drop", missing, runs)
