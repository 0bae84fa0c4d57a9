"""Views of a run's errors for the gallery notebook: one table row per case (:func:`gallery_rows`), an
emitted graph drawn next to the reference one (:func:`draw_pair`, :func:`show_case`), and a live browser for
Jupyter (:func:`widget_browser`). The rendered book's kernel-free explorer is :mod:`cpdagthink.book.explorer`;
the classification itself is :mod:`cpdagthink.analysis.failures`.

Premises, hypotheses and model output are hostile text: every view here shows them as text (HTML-escaped),
never as Markdown or markup.
"""

from __future__ import annotations

import html
import json
from typing import Any, Iterable, Mapping

import pandas as pd

from ..analysis.audit import reference_analysis
from ..analysis.failures import Diagnosis, Records, diagnose, instances_by_id, named_records
from ..causal.instance import Instance
from ..method.decoding import Decoding
from ..method.schema import TOOL_NAME, CausalAnalysis
from ..run.inspection import Inspected, recorded_requests
from ..run.records import RunRecord

CORRECT = "correct"  # the ``kind`` of a correct case (``include_correct``), shown for contrast


def _reference_json(instance: Instance) -> str | None:
    reference = reference_analysis(instance)
    return None if reference is None else reference.model_dump_json()


GALLERY_COLUMNS = [
    "id", "condition", "flow", "template", "num_variables", "kind", "premise", "hypothesis", "answer", "gold", "oracle",
    "graph_verdict", "members", "members_holding", "unparsed", "rejected", "cut_off", "turn1_text",
    "turn1_arguments", "emitted_error", "reasoning", "answer_text", "intervention_note",
    "emitted_analysis", "shown_analysis", "reference_analysis", "turn1_messages", "turn2_messages", "as_recorded",
]


def _as_recorded(requests: list[Inspected]) -> bool | None:
    """Whether every rebuilt turn is the request recorded: False when one is not, None when one cannot be
    checked (or none was rebuilt), else True."""
    found = [r.as_recorded for r in requests]
    return False if False in found else None if None in found or not found else True


def _messages(inspected) -> str:
    """A request's messages exactly as ``cpdagthink prompt`` prints them (its JSON's ``messages``)."""
    return json.dumps(inspected.request.to_json()["messages"], indent=2, ensure_ascii=False)


def _turn_columns(record: RunRecord, requests: list[Inspected]) -> dict[str, Any]:
    """The columns of a gallery row read from ``record``'s turns and the ``requests`` rebuilt from it."""
    first = record.turns[0] if record.turns else None
    last = record.turns[-1] if record.turns else None
    calls = [c.arguments for c in first.tool_calls if c.name == TOOL_NAME] if first else []
    return {
        "turn1_text": first.text if first and len(record.turns) > 1 else None,
        "turn1_arguments": calls[0] if calls else None,
        "reasoning": last.reasoning if last else None,
        "answer_text": last.text if last else None,
        "turn1_messages": _messages(requests[0]) if requests else None,
        "turn2_messages": _messages(requests[1]) if len(requests) > 1 else None,
        "as_recorded": _as_recorded(requests),
    }


def _gallery_row(name: str, record: RunRecord, diagnosis: Diagnosis, instance: Instance,
                 decodings: Mapping[str, Decoding] | None) -> dict[str, Any]:
    """One row of :func:`gallery_rows`: run ``name``'s ``record`` of ``instance``, as ``diagnosis`` classified it."""
    emitted = record.emitted
    requests = recorded_requests(record, instance, decodings[name]) if decodings and record.turns else []
    return {
        "id": record.id,
        "condition": name,
        "flow": "tool" if record.tool_flow else "prose" if len(record.turns) > 1 else "one_turn",
        "template": instance.template,
        "num_variables": instance.num_variables,
        "kind": CORRECT if diagnosis.kind is None else diagnosis.kind.value,
        "premise": instance.premise,
        "hypothesis": instance.hypothesis,
        "answer": record.answer,
        "gold": record.gold_label,
        "oracle": diagnosis.corrected_label,
        "graph_verdict": diagnosis.graph_verdict,
        "members": diagnosis.members,
        "members_holding": diagnosis.members_holding,
        "unparsed": record.unparsed,
        "rejected": record.rejected,
        "cut_off": record.cut_off,
        "emitted_error": record.emitted_error,
        "intervention_note": record.intervention.note if record.intervention else None,
        "emitted_analysis": None if emitted is None else emitted.model_dump_json(),
        "shown_analysis": None if diagnosis.shown is None else json.dumps(diagnosis.shown),
        "reference_analysis": _reference_json(instance),
        **_turn_columns(record, requests),
    }


def gallery_rows(records: Records, instances: Iterable[Instance] | Mapping[str, Instance], *,
                 decodings: Mapping[str, Decoding] | None = None, include_correct: bool = False) -> pd.DataFrame:
    """One row per error; with ``include_correct`` also one per correct answer (kind ``"correct"``) on the
    rows some run got wrong, for contrast (every correct case would make a full split's page too large).
    ``flow`` is ``tool``, ``prose`` or ``one_turn``.

    ``emitted_analysis`` is turn 1's parsed object, ``shown_analysis`` the object turn 2 saw (they differ
    under a probe), ``reference_analysis`` the oracle's CPDAG, all three as JSON text (None when absent);
    ``turn1_arguments`` the tool call's arguments as emitted, ``turn1_text`` turn 1's visible text (the prose
    intermediate of the prose control), ``reasoning`` the final turn's thinking trace. With ``decodings``
    (run name to the run's :class:`Decoding`), ``turn1_messages``/``turn2_messages`` hold the messages each
    turn sent as ``cpdagthink prompt`` prints them, rebuilt from the record, and ``as_recorded`` whether their
    digests equal the recorded ones (None where that cannot be checked, :func:`recorded_requests`)."""
    found = instances_by_id(instances)
    rows = []
    diagnosed = [(name, record, diagnose(record, found[record.id])) for name, record in named_records(records)]
    erred = {record.id for _, record, d in diagnosed if d.kind is not None}
    for name, record, diagnosis in diagnosed:
        instance = found[record.id]
        if diagnosis.kind is None and not (include_correct and record.id in erred):
            continue
        rows.append(_gallery_row(name, record, diagnosis, instance, decodings))
    return pd.DataFrame(rows, columns=GALLERY_COLUMNS)


def graph_flags(analysis: CausalAnalysis | None) -> list[str]:
    """What an emitted object lists that no CPDAG can hold, in words: self-loops, and pairs listed with two
    orientations (directed and undirected, or directed both ways). :func:`drawn_edges` draws such a pair once,
    as a conflict, instead of two edges on top of each other."""
    if analysis is None:
        return []
    flags = [f"self-loop {a} {mark} {a} in {field}" for field, mark in
             (("skeleton", "-"), ("directed_edges", "->"), ("undirected_edges", "-"))
             for a, b in getattr(analysis, field) if a == b]
    for a, b in sorted(_conflicts(analysis), key=sorted):
        x, y = sorted((a, b))
        listed = [f"{t} -> {h}" for t, h in analysis.directed_edges if {t, h} == {x, y} and t != h]
        if any({p, q} == {x, y} for p, q in analysis.undirected_edges):
            listed.append(f"{x} - {y}")
        flags.append(f"{x}, {y} listed as " + " and as ".join(dict.fromkeys(listed)))
    return flags


def _conflicts(analysis: CausalAnalysis) -> set[frozenset[str]]:
    directed = {(a, b) for a, b in analysis.directed_edges if a != b}
    undirected = {frozenset((a, b)) for a, b in analysis.undirected_edges if a != b}
    return {frozenset(e) for e in directed if frozenset(e) in undirected or (e[1], e[0]) in directed}


# ---------------------------------------------------------------------------------------------- drawing


EdgeKey = tuple[str, str, str]  # (kind, a, b): "directed" is tail, head; other kinds sort their pair


def drawn_edges(analysis: CausalAnalysis | None, order: Mapping[str, int] | None = None) -> set[EdgeKey]:
    """The edges :func:`draw_pair` draws for an object: directed arcs, undirected pairs, ``"conflict"`` pairs
    (listed with two orientations: see :func:`graph_flags`), and pairs listed only in the skeleton field;
    unordered pairs written in ``order`` (alphabetical by default). Self-loops are not drawn (they are flagged)."""
    if analysis is None:
        return set()
    rank = (lambda v: (order.get(v, len(order)), v)) if order else (lambda v: (0, v))

    def sorted_pair(pair: Iterable[str]) -> tuple[str, str]:
        x, y = sorted(pair, key=rank)
        return x, y

    conflicts = _conflicts(analysis)
    edges: set[EdgeKey] = {("conflict", *sorted_pair(p)) for p in conflicts}
    edges |= {("directed", a, b) for a, b in analysis.directed_edges if a != b and frozenset((a, b)) not in conflicts}
    edges |= {("undirected", *sorted_pair((a, b))) for a, b in analysis.undirected_edges
              if a != b and frozenset((a, b)) not in conflicts}
    oriented = {frozenset(e[1:]) for e in edges}
    edges |= {("skeleton", *sorted_pair((a, b))) for a, b in analysis.skeleton
              if a != b and frozenset((a, b)) not in oriented}
    return edges


def draw_pair(emitted: CausalAnalysis | None, reference: CausalAnalysis | None, ax_left, ax_right, *,
              highlight: str = "tab:red", titles: tuple[str, str] = ("emitted", "reference")):
    """Draw ``emitted`` on ``ax_left`` and ``reference`` on ``ax_right`` with one shared circular layout.

    Directed edges are arrows, undirected edges plain lines, pairs listed only in the skeleton field dotted
    lines, pairs listed with two orientations dashed. An edge drawn in one graph but not the other (same pair
    and same kind and direction) is drawn in ``highlight``; shared edges in black. Each edge is one
    ``FancyArrowPatch`` on its axes. Returns the figure of ``ax_left``. Uses whatever matplotlib backend is
    active (no pyplot needed).
    """
    import networkx as nx

    graphs = [emitted, reference]
    variables = list(dict.fromkeys(v for g in graphs if g is not None for v in g.variables))
    order = {v: i for i, v in enumerate(variables)}
    edges = [drawn_edges(g, order) for g in graphs]
    variables += sorted({v for es in edges for e in es for v in e[1:]} - set(variables))
    pos = nx.circular_layout(variables) if variables else {}
    canvas = nx.DiGraph()
    canvas.add_nodes_from(variables)
    for ax, mine, other, graph, title in zip((ax_left, ax_right), edges, edges[::-1], graphs, titles):
        ax.set_axis_off()
        ax.set_title(title if graph is not None else f"{title}: none")
        if variables:
            _draw_edges(ax, canvas, pos, mine, other, highlight)
    return ax_left.figure


def _draw_edges(ax, canvas, pos: Mapping, mine: set[EdgeKey], other: set[EdgeKey], highlight: str) -> None:
    """Draw ``canvas``'s nodes at ``pos`` and the edges ``mine`` (:func:`drawn_edges`) on ``ax``: those also in
    ``other`` black, the rest in ``highlight``."""
    import networkx as nx

    nx.draw_networkx_nodes(canvas, pos, ax=ax, node_color="white", edgecolors="black", node_size=500)
    nx.draw_networkx_labels(canvas, pos, ax=ax)
    for kind, a, b in sorted(mine):
        nx.draw_networkx_edges(
            canvas, pos, ax=ax, edgelist=[(a, b)], arrows=True, node_size=500,
            arrowstyle="-|>" if kind == "directed" else "-", arrowsize=15,
            style={"skeleton": "dotted", "conflict": "dashed"}.get(kind, "solid"),
            edge_color="black" if (kind, a, b) in other else highlight, width=1.5,
        )
    ax.margins(0.15)


def _analysis(text: object) -> CausalAnalysis | None:
    return None if text is None or pd.isna(text) else CausalAnalysis.model_validate_json(str(text))


def case_html(case: Mapping, max_chars: int = 1500) -> str:
    """One gallery row's text as HTML: every premise-, hypothesis- or model-derived string escaped."""
    text = "" if case["answer_text"] is None or pd.isna(case["answer_text"]) else str(case["answer_text"])
    answer = case["answer"] if isinstance(case["answer"], str) else "none"
    lines = [("Hypothesis", case["hypothesis"]),
             ("Answer", f"{answer} (gold {case['gold']}, oracle {case['oracle']})"), ("Premise", case["premise"])]
    return ("".join(f"<div><b>{label}:</b> {html.escape(str(value))}</div>" for label, value in lines)
            + "<div><b>Model output (turn 2):</b></div>"
            + f'<pre style="white-space:pre-wrap">{html.escape(text[:max_chars])}</pre>')


def show_case(case: Mapping, max_chars: int = 1500) -> None:
    """Display one gallery row in a notebook: the object turn 2 saw beside the reference CPDAG, then
    :func:`case_html` (hypothesis, answer against gold and oracle, premise, start of the turn-2 output)."""
    import matplotlib.pyplot as plt
    from IPython.display import HTML, display

    fig, (left, right) = plt.subplots(1, 2, figsize=(8, 3.2))
    draw_pair(_analysis(case["shown_analysis"]), _analysis(case["reference_analysis"]), left, right)
    left.set_title(f"shown in turn 2 ({case['condition']})")
    right.set_title("reference CPDAG")
    fig.suptitle(f"{case['id']}: {case['kind']}")
    plt.show()
    display(HTML(case_html(case, max_chars)))


FILTERS = ("condition", "template", "num_variables", "kind")


def widget_browser(gallery: pd.DataFrame):
    """A live browser over the gallery for Jupyter (ipywidgets): one dropdown per :data:`FILTERS` column
    and a slider over the matching cases, each shown with :func:`show_case`."""
    import ipywidgets as widgets

    pick = lambda col: widgets.Dropdown(options=["(all)"] + sorted(map(str, gallery[col].unique())), description=col)
    filters = {column: pick(column) for column in FILTERS}
    index = widgets.IntSlider(min=0, max=max(len(gallery) - 1, 0), description="case")
    out = widgets.Output()

    def refresh(*_: object) -> None:
        chosen = gallery
        for column, widget in filters.items():
            if widget.value != "(all)":
                chosen = chosen[chosen[column].astype(str) == widget.value]
        index.max = max(len(chosen) - 1, 0)
        with out:
            out.clear_output()
            if len(chosen):
                show_case(chosen.iloc[min(index.value, len(chosen) - 1)])
            else:
                print("no case matches")

    for widget in [*filters.values(), index]:
        widget.observe(refresh, "value")
    refresh()
    return widgets.VBox([widgets.HBox(list(filters.values())), index, out])
