"""Chapter 04, the turn-2 probes: the F1 drop under each probe of the recorded turn-1 graph and why a drop
is not a finding.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import pandas as pd

from ...analysis import tables
from ...analysis.metrics import counted
from ...analysis.markup import Markdown, code
from ...causal.instance import Instance
from ...run.records import RunRecord
from .. import presentation
from .glue import Headline, REFERENCE, Reading, paper_numbers, sample_phrases, scale_phrase, sentence, signed
from .verdicts import answer_causes, paired_headline


def probe_grid(runs: Mapping[tuple[str, int], Sequence[RunRecord]], probes: Sequence[str], seeds: Sequence[int],
               agent: str) -> tuple[pd.DataFrame, dict[str, Sequence[RunRecord]], pd.DataFrame]:
    """Every probe on Structured Thinking's recorded turn 1, per seed (``runs`` keyed ``(probe, seed)``, the
    unprobed run as ``unprobed``): :func:`probes.probe_table` rows with the agent's name and seed, the probed
    records of the first seed (for an example), and each probe's drop as a paired comparison
    (``unprobed vs <probe>``: the gain is unprobed minus probed, the drop)."""
    from ...analysis.probes import probe_table

    frames = []
    for seed in seeds:
        probed = {name: runs[(name, seed)] for name in probes}
        frames.append(probe_table(runs[("unprobed", seed)], probed).assign(agent=agent, seed=seed))
    example = {name: runs[(name, seeds[0])] for name in probes}
    paired = tables.paired_frame(runs, "unprobed", probes, n_resamples=2000)
    return pd.concat(frames).reset_index(), example, paired


KEY_PROBE = "scramble_full"  # the probe of chapter 04's key figure (:func:`probe_headline`)


def probe_headline(paired: pd.DataFrame, runs: Mapping[tuple[str, int], Sequence[RunRecord]],
                   seed: int) -> Headline:
    """Chapter 04's key figure: the drop under the full scramble (unprobed minus probed) at ``seed`` (the
    first), with the causes its answers rest on (``runs``: :func:`probe_grid`'s, keyed ``(probe, seed)``)."""
    missing = ("the model produced no turn-1 object on any row, so there was no graph to probe"
               if tables.produced_no_object(runs[("unprobed", seed)]) else "")
    return paired_headline(paired, f"unprobed vs {KEY_PROBE}", "the drop under the full scramble",
                           "probe_full_drop", missing, runs)


def probe_causes(runs: Mapping[tuple[str, int], Sequence[RunRecord]], probes: Sequence[str], seed: int,
                 on_first_screen: str = "") -> str:
    """What the probes' drops at ``seed`` are, from the records (empty when each is an ordinary interval): not
    findings where the answers carry no information (:func:`answer_causes`: the unprobed run's own, or a probe's
    beside it, e.g. every probed answer cut off), and a finding where a probe changed no scored answer: its drop
    is 0 with an interval of [0, 0], so on this model the answers do not depend on what the probe changed. The
    probe ``on_first_screen`` (the page's key figure) is left to the page's verdict, which says it once."""
    base = runs[("unprobed", seed)]
    causes, degenerate = answer_causes({"unprobed": base}, "")
    if degenerate and (on_first_screen, seed) in runs:
        return (f"Not a finding at seed {seed} for any probe: the unprobed answers carry no information, for the "
                "reasons the verdict above gives.")
    if degenerate:
        return sentence(f"Not a finding at seed {seed}: " + "; ".join(causes))
    bad, same = [], []
    for probe in (p for p in probes if (p, seed) in runs and p != on_first_screen):
        causes, degenerate = answer_causes({"unprobed": base, probe: runs[(probe, seed)]}, "its drop")
        if degenerate:
            bad.append(f"{presentation.label(probe)} ({'; '.join(causes)})")
        elif [r.says_yes for r in runs[(probe, seed)]] == [r.says_yes for r in base]:
            same.append(presentation.label(probe))
    parts = [sentence(f"Not a finding at seed {seed}: " + "; ".join(bad))] if bad else []
    if same:
        parts.append(sentence(
            f"A finding at seed {seed}: under {', '.join(same)} no scored answer changed on any of the "
            f"{counted(len(base), 'row')}, so {'its drop is' if len(same) == 1 else 'their drops are'} 0 with an "
            "interval of [0, 0]: on this model the answers do not depend on the graph shown in turn 2"))
    return " ".join(parts)


def probe_summary(table: pd.DataFrame) -> pd.DataFrame:
    """Per agent and probe, means over seeds of the F1 drop (gold and oracle labels, pp) and the shares of
    answers flipped and of turns the probe really changed, in % like the drops beside them."""
    columns = ["n", "drop_gold_pp", "drop_oracle_pp", "flipped_share", "intervened_share"]
    means = table.groupby(["agent", "probe"], sort=False)[columns].mean().astype({"n": int})
    shares = ["flipped_share", "intervened_share"]
    return means.assign(**{c: 100 * means[c] for c in shares}).rename(columns={c: f"{c}_pct" for c in shares})


def probe_example(probed: Mapping[str, Sequence[RunRecord]]) -> Markdown:
    """What the first probe changed on its first instance (the note kept in the record, never shown to the
    model)."""
    name, records = next(iter(probed.items()))
    record = records[0]
    note = record.intervention.note if record.intervention else "nothing"
    return Markdown("Example of what a probe changed (", presentation.label(name), f", {record.id}): {note}")


def probes_reading(table: pd.DataFrame, agent: str, probes: Sequence[str], instances: Sequence[Instance],
                   seeds: Sequence[int], runs: Mapping[tuple[str, int], Sequence[RunRecord]] | None = None,
                   backend: str = "") -> Reading:
    """Chapter 04: the F1 drop under each probe (unprobed minus probed, as everywhere in the book) for the
    model, with why they are not findings where the model's ``runs`` (:func:`probe_grid`'s) say so, and the
    share of flipped answers for the model and for the reference agent; ``backend``, what answered, chooses the
    reading of the run's scale (:func:`scale_phrase`)."""
    mean = table.groupby(["agent", "probe"])["drop_gold_pp"].mean()
    flips = table.groupby("agent")["flipped_share"].mean()
    numbers = {f"drop_{p}": float(mean.get((agent, p), math.nan)) for p in probes}
    numbers |= {"flips_model": 100 * float(flips.get(agent, math.nan)),
                "flips_reference": 100 * float(flips.get(REFERENCE, math.nan))}
    numbers |= paper_numbers(["probe_full_drop", "probe_premise_drop", "probe_partial_drop_low",
                              "probe_partial_drop_high"])
    drops = Markdown("; ").join(Markdown(presentation.label(p), f" {signed(numbers[f'drop_{p}'])} pp") for p in probes)
    swap = ("" if "swap_valid_cpdag" in probes else
            Markdown(" The validity-preserving swaps were not run (add them to ", code("probes"), ")."))
    flips_reference = ("" if math.isnan(numbers["flips_reference"]) else
                       f", against {numbers['flips_reference']:.0f}% for the reference agent, which by construction "
                       "follows the graph it is shown")
    return Reading(numbers, sample_phrases(instances, seeds) | {
        "probe_drops": Markdown(drops, ".", swap, *([" ", probe_causes(runs, probes, seeds[0], KEY_PROBE)] if runs else [])),
        "flips": f"On average {numbers['flips_model']:.0f}% of this model's answers flip under a probe{flips_reference}.",
        "scale_note": scale_phrase(instances, backend)})
