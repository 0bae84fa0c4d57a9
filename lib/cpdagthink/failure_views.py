"""Views of a run's errors for the gallery notebook: one table row per error (:func:`gallery_rows`), an
emitted graph drawn next to the reference one (:func:`draw_pair`, :func:`show_case`), and a live browser for
Jupyter (:func:`widget_browser`). The rendered book's kernel-free explorer is :mod:`cpdagthink.explorer`;
the classification itself is :mod:`cpdagthink.failures`.
"""

from __future__ import annotations

import json
from typing import Iterable, Mapping

import pandas as pd

from .data import Instance
from .failures import Records, diagnose, instances_by_id, named_records
from .oracle import UnfaithfulFactsError, analyse_premise
from .premise import PremiseError
from .schema import CausalAnalysis


def _reference_json(instance: Instance) -> str | None:
    try:
        return CausalAnalysis.from_cpdag(analyse_premise(instance.premise).cpdag).model_dump_json()
    except (UnfaithfulFactsError, PremiseError):
        return None


GALLERY_COLUMNS = [
    "id", "condition", "template", "num_variables", "kind", "premise", "hypothesis", "answer", "gold", "oracle",
    "graph_verdict", "members", "members_holding", "reasoning", "answer_text", "intervention_note",
    "emitted_analysis", "shown_analysis", "reference_analysis",
]


def gallery_rows(records: Records, instances: Iterable[Instance] | Mapping[str, Instance]) -> pd.DataFrame:
    """One row per error, for a gallery notebook. ``emitted_analysis`` is turn 1's parsed object,
    ``shown_analysis`` the object turn 2 saw (they differ under a probe), ``reference_analysis`` the oracle's
    CPDAG; all three as JSON text (None when absent). ``reasoning`` is the final turn's thinking trace."""
    found = instances_by_id(instances)
    rows = []
    for name, record in named_records(records):
        instance = found[record.id]
        diagnosis = diagnose(record, instance)
        if diagnosis.kind is None:
            continue
        last = record.turns[-1] if record.turns else None
        emitted = record.emitted
        rows.append({
            "id": record.id,
            "condition": name,
            "template": instance.template,
            "num_variables": instance.num_variables,
            "kind": diagnosis.kind.value,
            "premise": instance.premise,
            "hypothesis": instance.hypothesis,
            "answer": record.answer,
            "gold": record.gold_label,
            "oracle": diagnosis.corrected_label,
            "graph_verdict": diagnosis.graph_verdict,
            "members": diagnosis.members,
            "members_holding": diagnosis.members_holding,
            "reasoning": last.reasoning if last else None,
            "answer_text": last.text if last else None,
            "intervention_note": record.intervention.note if record.intervention else None,
            "emitted_analysis": None if emitted is None else emitted.model_dump_json(),
            "shown_analysis": None if diagnosis.shown is None else json.dumps(diagnosis.shown),
            "reference_analysis": _reference_json(instance),
        })
    return pd.DataFrame(rows, columns=GALLERY_COLUMNS)


# ---------------------------------------------------------------------------------------------- drawing


EdgeKey = tuple[str, str, str]  # ("directed", tail, head) | ("undirected", a, b) | ("skeleton", a, b), a < b


def drawn_edges(analysis: CausalAnalysis | None, order: Mapping[str, int] | None = None) -> set[EdgeKey]:
    """The edges :func:`draw_pair` draws for an object: directed arcs, undirected pairs, and pairs listed only
    in the skeleton field; undirected pairs written in ``order`` (alphabetical by default)."""
    if analysis is None:
        return set()
    rank = (lambda v: (order.get(v, len(order)), v)) if order else (lambda v: (0, v))

    def sorted_pair(a: str, b: str) -> tuple[str, str]:
        x, y = sorted((a, b), key=rank)
        return x, y

    edges: set[EdgeKey] = {("directed", a, b) for a, b in analysis.directed_edges if a != b}
    edges |= {("undirected", *sorted_pair(a, b)) for a, b in analysis.undirected_edges if a != b}
    oriented = {frozenset(e[1:]) for e in edges}
    edges |= {("skeleton", *sorted_pair(a, b)) for a, b in analysis.skeleton if a != b and frozenset((a, b)) not in oriented}
    return edges


def draw_pair(emitted: CausalAnalysis | None, reference: CausalAnalysis | None, ax_left, ax_right, *,
              highlight: str = "tab:red", titles: tuple[str, str] = ("emitted", "reference")):
    """Draw ``emitted`` on ``ax_left`` and ``reference`` on ``ax_right`` with one shared circular layout.

    Directed edges are arrows, undirected edges plain lines, pairs listed only in the skeleton field dotted
    lines. An edge drawn in one graph but not the other (same pair and same kind and direction) is drawn in
    ``highlight``; shared edges in black. Each edge is one ``FancyArrowPatch`` on its axes. Returns the
    figure of ``ax_left``. Uses whatever matplotlib backend is active (no pyplot needed).
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
        if not variables:
            continue
        nx.draw_networkx_nodes(canvas, pos, ax=ax, node_color="white", edgecolors="black", node_size=500)
        nx.draw_networkx_labels(canvas, pos, ax=ax)
        for kind, a, b in sorted(mine):
            nx.draw_networkx_edges(
                canvas, pos, ax=ax, edgelist=[(a, b)], arrows=True, node_size=500,
                arrowstyle="-|>" if kind == "directed" else "-", arrowsize=15,
                style="dotted" if kind == "skeleton" else "solid",
                edge_color="black" if (kind, a, b) in other else highlight, width=1.5,
            )
        ax.margins(0.15)
    return ax_left.figure


def _analysis(text: object) -> CausalAnalysis | None:
    return None if text is None or pd.isna(text) else CausalAnalysis.model_validate_json(str(text))


def show_case(case: Mapping, max_chars: int = 1500) -> None:
    """Display one gallery row in a notebook: the object turn 2 saw beside the reference CPDAG, the
    hypothesis, the answer against gold and oracle, the premise and the start of the turn-2 output."""
    import matplotlib.pyplot as plt
    from IPython.display import Markdown, display

    fig, (left, right) = plt.subplots(1, 2, figsize=(8, 3.2))
    draw_pair(_analysis(case["shown_analysis"]), _analysis(case["reference_analysis"]), left, right)
    left.set_title(f"shown in turn 2 ({case['condition']})")
    right.set_title("reference CPDAG")
    fig.suptitle(f"{case['id']}: {case['kind']}")
    plt.show()
    display(Markdown(f"**Hypothesis:** {case['hypothesis']}  \n**Answer:** {case['answer']} "
                     f"(gold {case['gold']}, oracle {case['oracle']})  \n**Premise:** {case['premise']}"))
    display(Markdown("**Model output (turn 2):**\n\n```text\n" + str(case["answer_text"])[:max_chars] + "\n```"))


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
