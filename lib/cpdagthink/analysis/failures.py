"""Automatic error localisation with the oracle (paper §7.1 and appendix I): did an error come from the graph
state, from the turn-2 readout, or from handling the ambiguity of the Markov equivalence class (MEC)?

The paper hand-labels 32 errors into these families as a diagnostic; :func:`classify` assigns one kind to
every error of a run, using the record the runner wrote and the instance it came from, :func:`failure_counts`
tabulates the kinds, and :func:`paper_sample` draws the paper's view: a seeded sample of 32 errors. Views of
the errors (the gallery table, the drawings) are in :mod:`cpdagthink.book.failure_views`.

An answer is an error when the prediction as scored (:attr:`RunRecord.says_yes`) differs from the label, as
the scores count it (chapter 01); a missing answer is always a failure of its own kind, even on a row whose
label is NO (where the scores, reading it as NO, count it right): a row that states no answer shows no reasoning
that was right. Whether a missing answer was refused, cut off or unparsed is the record's own verdict
(:attr:`RunRecord.rejected`, the turns' ``finish_reason``, :attr:`RunRecord.unparsed`), never re-derived here.

Errors are defined against the **corrected** label (``record.oracle_label``, the oracle's verdict), not the
published one: 18 published test labels are wrong (a generator bug, see ``notes/corr2cause-semantics.md``),
and every test below (the graph's verdict, the class members) follows the corrected semantics. Measured
against the published label, a model that answered those 18 rows correctly would be charged with an error
that no graph state, readout or ambiguity could explain.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace as _with
from enum import Enum
from typing import Iterable, Mapping

import pandas as pd

from ..causal.dag import holds
from ..causal.instance import Instance
from ..causal.oracle import PremiseAnalysis, UnfaithfulFactsError, analyse_premise, readable_label
from ..causal.premise import PremiseError, Query, parse_hypothesis
from ..method.schema import CausalAnalysis
from ..run.records import RunRecord


class FailureKind(str, Enum):
    """Where an error sits. Tool runs get the first five kinds, one-turn and prose runs the last two."""

    UNPARSED_ANSWER = "unparsed_answer"  # the model answered, but not with a readable YES or NO
    REJECTED = "rejected_request"  # the service refused a call: no answer, and not the model's fault
    TURN1_CUT_OFF = "turn1_cut_off"  # tool run: turn 1 stopped at its token budget, and no answer came
    CUT_OFF = "cut_off_answer"  # the answer's turn stopped at its token budget before an answer
    NO_GRAPH = "no_graph"  # tool run: no usable object reached turn 2
    WRONG_GRAPH = "wrong_graph"  # the object itself gives the model's wrong answer: the graph state erred
    MEC_AMBIGUITY = "mec_ambiguity"  # the object gives the right answer, the error is an ambiguity case
    WRONG_READOUT = "wrong_readout"  # the object gives the right answer, the model read it wrongly
    ONE_TURN_MEC_AMBIGUITY = "one_turn_mec_ambiguity"  # no object; the error is an ambiguity case
    ONE_TURN_OTHER = "one_turn_other"  # no object; any other error


KIND_ORDER = list(FailureKind)


@dataclass(frozen=True)
class Diagnosis:
    """The evidence behind one classification (``kind`` None: correct, or not classifiable)."""

    kind: FailureKind | None
    corrected_label: int | None
    prediction: int | None
    tool_run: bool
    graph_verdict: int | None  # CausalAnalysis.answer on the object shown in turn 2 (tool runs with an object)
    graph_detail: str | None
    members: int | None  # size of the reference class
    members_holding: int | None  # members in which the hypothesis holds
    touches_undirected: bool | None  # an undirected reference edge is incident to X or Y
    shown: dict | None  # the object shown in turn 2, as JSON


def _json(analysis: CausalAnalysis | None) -> dict | None:
    return None if analysis is None else analysis.model_dump(mode="json")


def _reference(instance: Instance) -> tuple[PremiseAnalysis, Query] | None:
    try:
        analysis = analyse_premise(instance.premise)
        return analysis, parse_hypothesis(instance.hypothesis, analysis.facts.variables)
    except (UnfaithfulFactsError, PremiseError):
        return None


def _ambiguity(diagnosis: Diagnosis, instance: Instance) -> tuple[Diagnosis, bool]:
    """``diagnosis`` with the reference class's counts filled in, and whether its error is an ambiguity case
    (:func:`diagnose`); a premise the oracle cannot analyse is no ambiguity case and leaves the counts empty."""
    reference = _reference(instance)
    if reference is None:
        return diagnosis, False
    classes, query = reference
    holding = sum(holds(m, query) for m in classes.members)
    touches = any(query.x in p or query.y in p for p in classes.cpdag.undirected)
    diagnosis = _with(diagnosis, members=len(classes.members), members_holding=holding, touches_undirected=touches)
    if diagnosis.prediction == 1:
        return diagnosis, 0 < holding < len(classes.members)
    return diagnosis, len(classes.members) > 1 and touches


def diagnose(record: RunRecord, instance: Instance) -> Diagnosis:
    """Classify one record; precedence, first match wins:

    1. not classifiable (``kind=None``): the instance was not posed (``record.problem``), or it has no
       corrected label (a premise no DAG satisfies, or a premise or hypothesis the oracle cannot read):
       nothing to localise against.
    2. no answer, whatever the label (never counted correct): ``REJECTED`` when the service refused a call
       (:attr:`RunRecord.rejected`), ``TURN1_CUT_OFF`` when a tool run's turn 1 stopped at its token budget,
       ``CUT_OFF`` when the answer's turn did, else ``UNPARSED_ANSWER`` (:attr:`RunRecord.unparsed`).
    3. correct (``kind=None``): the prediction as scored (:attr:`RunRecord.says_yes`) equals the corrected
       label.
    4. tool runs (``record.tool_flow``), on the object shown in turn 2 (``record.shown``):
       a. ``NO_GRAPH``: no object (none emitted, or one that did not validate as a ``CausalAnalysis``);
       b. ``WRONG_GRAPH``: :meth:`CausalAnalysis.answer` on the object gives the model's (wrong) answer. A
          graph no DAG extends reads as NO, like the reference agent reads it;
       c. ``MEC_AMBIGUITY``: the object gives the right answer and the error is an ambiguity case (below);
       d. ``WRONG_READOUT``: the object gives the right answer, otherwise.
    5. runs without an object (one-turn, prose): ``ONE_TURN_MEC_AMBIGUITY`` for an ambiguity case, else
       ``ONE_TURN_OTHER``.

    An *ambiguity case*, judged on the reference class of the premise: a false YES where the hypothesis
    holds in at least one but not all members (a plausible DAG supports it, another falsifies it); or a
    false NO on a class with more than one member where an undirected reference edge is incident to X or Y
    of the hypothesis (the model was put off by undetermined orientations that do not change the answer;
    a heuristic, since "the hypothesis involves undirected edges" has no sharper definition).
    """
    prediction = record.prediction
    tool = record.tool_flow
    graph = record.shown if tool else None  # already a validated CausalAnalysis, or None
    oracle = record.oracle_label
    if oracle is None and record.problem is None:
        oracle = readable_label(instance.text).label
    blank = Diagnosis(None, oracle, prediction, tool, None, None, None, None, None, _json(graph))
    if oracle is None:
        return blank
    if record.answer is None:
        return _with(blank, kind=_missing_kind(record))
    if int(record.says_yes) == oracle:
        return blank
    blank, ambiguous = _ambiguity(blank, instance)
    if not tool:
        return _with(blank, kind=FailureKind.ONE_TURN_MEC_AMBIGUITY if ambiguous else FailureKind.ONE_TURN_OTHER)
    if graph is None:
        return _with(blank, kind=FailureKind.NO_GRAPH)
    verdict = graph.answer(instance.hypothesis)
    blank = _with(blank, graph_verdict=int(verdict.holds), graph_detail=verdict.detail)
    if int(verdict.holds) != oracle:
        return _with(blank, kind=FailureKind.WRONG_GRAPH)
    return _with(blank, kind=FailureKind.MEC_AMBIGUITY if ambiguous else FailureKind.WRONG_READOUT)


def _missing_kind(record: RunRecord) -> FailureKind:
    """Why a record has no answer: refused, turn 1 cut off (a tool run), the answer's turn cut off, or unparsed."""
    if record.rejected:
        return FailureKind.REJECTED
    if record.tool_flow and record.turns and record.turns[0].cut_off:
        return FailureKind.TURN1_CUT_OFF
    if record.turns and record.turns[-1].cut_off:
        return FailureKind.CUT_OFF
    return FailureKind.UNPARSED_ANSWER


def classify(record: RunRecord, instance: Instance) -> FailureKind | None:
    """The :class:`FailureKind` of one record, None when it is correct against the corrected label
    (``oracle_label``; why corrected: module docstring). Precedence: :func:`diagnose`."""
    return diagnose(record, instance).kind


# --------------------------------------------------------------------------------------------- tables


Records = Iterable[RunRecord] | Mapping[str, Iterable[RunRecord]]


def named_records(records: Records) -> Iterable[tuple[str, RunRecord]]:
    """(run name, record) pairs: a mapping names its runs (e.g. by probe), a plain list uses the condition."""
    if isinstance(records, Mapping):
        for name, run in records.items():
            for record in run:
                yield name, record
    else:
        for record in records:
            yield record.condition, record


def instances_by_id(instances: Iterable[Instance] | Mapping[str, Instance]) -> Mapping[str, Instance]:
    """The instances keyed by id (a mapping is taken as it is)."""
    return instances if isinstance(instances, Mapping) else {i.id: i for i in instances}


COUNT_COLUMNS = ["n", "correct", "errors", "no label", "unparsed", "rejected", "cut off"]


def failure_counts(records: Records, instances: Iterable[Instance] | Mapping[str, Instance]) -> pd.DataFrame:
    """Rows: runs (the record's condition, or the names of a ``{name: records}`` mapping); columns:
    :data:`COUNT_COLUMNS` (``unparsed``, ``rejected`` and ``cut off`` count every record so marked, as chapter
    01's count table does, whether or not scoring its missing answer as NO made it an error) and one count
    per :class:`FailureKind` (its value), in enum order; the kinds add up to ``errors``. ``no label`` counts
    the records with no corrected label (:func:`diagnose`, rule 1), which are neither correct nor errors."""
    found = instances_by_id(instances)
    table: dict[str, dict[str, int]] = {}
    for name, record in named_records(records):
        row = table.setdefault(name, dict.fromkeys([*COUNT_COLUMNS, *(k.value for k in KIND_ORDER)], 0))
        diagnosis = diagnose(record, found[record.id])
        kind = diagnosis.kind
        row["n"] += 1
        row["unparsed"] += record.unparsed
        row["rejected"] += record.rejected
        row["cut off"] += record.cut_off
        if diagnosis.corrected_label is None:
            row["no label"] += 1
        elif kind is None:
            row["correct"] += 1
        else:
            row["errors"] += 1
            row[kind.value] += 1
    columns = [*COUNT_COLUMNS, *(k.value for k in KIND_ORDER)]
    frame = pd.DataFrame.from_dict(table, orient="index", columns=columns).astype(int)
    frame.index.name = "condition"
    return frame


PAPER_SAMPLE_SIZE = 32  # appendix I: the hand-labelled gallery


def paper_sample(records: Records, instances: Iterable[Instance] | Mapping[str, Instance],
                 size: int = PAPER_SAMPLE_SIZE, seed: int = 0) -> pd.DataFrame:
    """The paper's view of the errors (appendix I): ``size`` errors drawn uniformly with ``seed`` (all of
    them when there are fewer), with the same kinds as :func:`failure_counts`. Columns ``condition``, ``id``,
    ``kind``; rows in kind order, then as the records came."""
    found = instances_by_id(instances)
    errors = [(name, record.id, kind) for name, record in named_records(records)
              if (kind := classify(record, found[record.id])) is not None]
    drawn = sorted(random.Random(seed).sample(range(len(errors)), min(size, len(errors))),
                   key=lambda i: (KIND_ORDER.index(errors[i][2]), i))
    return pd.DataFrame([(errors[i][0], errors[i][1], errors[i][2].value) for i in drawn],
                        columns=["condition", "id", "kind"])
