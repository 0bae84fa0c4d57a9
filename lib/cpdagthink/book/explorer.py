"""The failure explorer: the gallery's cases as an interactive HTML view that needs no kernel.

:func:`fragment` turns :func:`failure_views.gallery_rows` into one self-contained ``<div>``: the cases as JSON,
each case's graphs as inline SVG drawn here (the object turn 1 emitted, the object turn 2 saw when a probe
replaced it, and the oracle's reference CPDAG, on one circular layout, edges that differ from the reference in
red, as :func:`failure_views.draw_pair` draws them), and a small vanilla-JS view: a text search over premise,
hypothesis and answer, filters (condition, failure kind, template, variable count, the appendix-I sample),
correct cases on request, and the state in the URL's hash, so a filter or a single case can be linked and
cited (``#case=structured:ID``, ``#q=...&kind=...``). Each case shows turn 1's object as emitted (JSON and
drawn, flagged where no CPDAG could hold it), the prose intermediate of the prose control, the messages of
both turns as ``cpdagthink prompt`` prints them, and the turn-2 output.
Its style and script are files of the package (``static/explorer.css``, ``static/explorer.js``).

Every string from a premise, a CSV or a model reaches the page as text: as JSON inside a data ``<script>``
that no ``</script>``, ``<!--`` or line separator can end or change, put into the page with ``textContent``;
the SVGs are built here with every label escaped. Printed (the book's PDF), the live view is replaced by a
static one built here: the first cases as plain cards, with no search box or select to go dead on paper.
Nothing is fetched from the network. The same fragment goes into notebook 06's output (so into the built
book) and, wrapped by :func:`page`, into a standalone file.
"""

from __future__ import annotations

import html
import json
import math
import uuid
from importlib.resources import files
from pathlib import Path
from typing import Any, Mapping

import pandas as pd

from ..method.schema import CausalAnalysis
from .failure_views import CORRECT, drawn_edges, graph_flags
from .presentation import label

FILTERS = ["condition", "kind", "template", "num_variables"]  # the select boxes, in order
FILTER_NAMES = {"condition": "condition", "kind": "failure kind", "template": "template", "num_variables": "variables"}
PAGE_SIZE = 10  # cards shown at once; "show more" adds as many
MAX_TEXT = 2000  # characters of each model text kept per case (the page stays small on a full run)
PRINT_CASES = 6  # cases of the static, printed version

SIZE, RADIUS, NODE = 240, 82, 17  # SVG canvas side, layout circle radius, node radius (px)
SHARED, DIFFERS, CONFLICT = "#222", "#d62728", "#ff7f0e"


def _point(index: int, count: int) -> tuple[float, float]:
    """Node ``index`` of ``count`` on the layout circle, the first one at the top, clockwise."""
    angle = -math.pi / 2 + 2 * math.pi * index / max(count, 1)
    return SIZE / 2 + RADIUS * math.cos(angle), SIZE / 2 + RADIUS * math.sin(angle)


def _edge_svg(kind: str, start: tuple[float, float], end: tuple[float, float], colour: str) -> str:
    (x1, y1), (x2, y2) = start, end
    length = math.hypot(x2 - x1, y2 - y1) or 1.0
    ux, uy = (x2 - x1) / length, (y2 - y1) / length
    # Lines stop at the node circles; an arrow's line stops at its head's base.
    ax, ay = x1 + ux * NODE, y1 + uy * NODE
    bx, by = x2 - ux * NODE, y2 - uy * NODE
    dash = {"skeleton": ' stroke-dasharray="3 4"', "conflict": ' stroke-dasharray="8 4"'}.get(kind, "")
    if kind != "directed":
        return f'<line x1="{ax:.0f}" y1="{ay:.0f}" x2="{bx:.0f}" y2="{by:.0f}" stroke="{colour}" stroke-width="2"{dash}/>'
    head, half = 11.0, 5.0
    cx, cy = bx - ux * head, by - uy * head
    corners = f"{bx:.0f},{by:.0f} {cx - uy * half:.0f},{cy + ux * half:.0f} {cx + uy * half:.0f},{cy - ux * half:.0f}"
    return (f'<line x1="{ax:.0f}" y1="{ay:.0f}" x2="{cx:.0f}" y2="{cy:.0f}" stroke="{colour}" stroke-width="2"/>'
            f'<polygon points="{corners}" fill="{colour}"/>')


def graph_svg(analysis: CausalAnalysis | None, other: CausalAnalysis | None, variables: list[str], title: str) -> str:
    """``analysis`` drawn as an SVG on a circle of ``variables`` (in that order): directed edges as arrows,
    undirected edges as plain lines, pairs only in the skeleton field dotted, pairs listed with two
    orientations dashed orange (:func:`failure_views.graph_flags`); edges absent from ``other`` (same pair,
    kind and direction) in red, unless ``other`` is None (nothing to compare with). ``None`` as ``analysis``
    draws an empty canvas that says so."""
    order = {v: i for i, v in enumerate(variables)}
    mine = drawn_edges(analysis, order)
    theirs = mine if other is None else drawn_edges(other, order)
    # Both graphs of a pair share the layout, so the same vertical crop: the circle's empty bottom goes.
    ys = [_point(i, len(variables))[1] for i in range(len(variables))] or [SIZE / 2]
    top, height = max(min(ys) - NODE - 4, 0), min(max(ys) - min(ys) + 2 * NODE + 8, SIZE)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" class="cpx-graph" width="{SIZE}" height="{height:.0f}" '
             f'viewBox="0 {top:.0f} {SIZE} {height:.0f}" role="img"><title>{html.escape(title)}</title>']
    if analysis is None:
        parts.append(f'<text x="{SIZE / 2}" y="{top + height / 2:.0f}" text-anchor="middle" fill="#777" font-size="14">'
                     f'no graph</text>')
    else:
        at = {v: _point(i, len(variables)) for i, v in enumerate(variables)}
        for kind, a, b in sorted(mine):
            colour = CONFLICT if kind == "conflict" else SHARED if (kind, a, b) in theirs else DIFFERS
            parts.append(_edge_svg(kind, at[a], at[b], colour))
        for v, (x, y) in at.items():
            parts.append(f'<circle cx="{x:.0f}" cy="{y:.0f}" r="{NODE}" fill="#fff" stroke="#222" stroke-width="1.5"/>'
                         f'<text x="{x:.0f}" y="{y + 5:.0f}" text-anchor="middle" font-size="14" '
                         f'font-family="sans-serif">{html.escape(v)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _parse(text: Any) -> CausalAnalysis | None:
    if text is None or (isinstance(text, float) and math.isnan(text)):
        return None
    try:
        return CausalAnalysis.model_validate_json(text)
    except ValueError:  # an object that does not validate is drawn as no graph, as the classifier counts it
        return None


def _plain(value: Any) -> Any:
    """A JSON-ready scalar: NaN/None to None, integral floats (pandas' NaN-holding int columns) to int."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value.item() if hasattr(value, "item") else value


def _clip(value: Any, limit: int = MAX_TEXT) -> str | None:
    text = _plain(value)
    if text is None:
        return None
    return text[:limit] + (f" [... {len(text) - limit} more characters]" if len(text) > limit else "")


def _yes_no(value: Any) -> str:
    return "none" if value is None else "YES" if value in (1, "YES") else "NO"


def verdict_text(case: Mapping[str, Any]) -> str:
    """The one-line verdict of a case: the model's answer against the corrected and published labels, what
    the shown graph implies and in how many DAGs of the class the hypothesis holds."""
    answer = case["answer"] or ("none (the service refused the request)" if case["rejected"] else "nothing parseable")
    text = (f"model answered {answer}{' (cut off at its token budget)' if case['cut_off'] else ''}; "
            f"oracle (corrected label) {_yes_no(case['oracle'])}; published label {_yes_no(case['gold'])}")
    if case["graph_verdict"] is not None:
        text += f"; the shown graph implies {_yes_no(case['graph_verdict'])}"
    if case["members"] is not None:
        text += f"; hypothesis holds in {case['members_holding']} of {case['members']} DAGs of the class"
    return text


def _case_graphs(tool: bool, emitted: CausalAnalysis | None, shown: CausalAnalysis | None, probed: bool,
                 reference: CausalAnalysis | None, variables: list[str]) -> list[tuple[str, str]]:
    """A case's titled SVGs: turn 1's object (``tool``: the condition emits one), the object turn 2 was shown
    when a probe replaced it (``probed``), and the reference CPDAG drawn against the object shown."""
    if not tool:
        first = "no object: this condition emits none"
    elif emitted is None:
        first = "turn 1: no usable object"
    else:
        first = "turn 1: emitted" + ("" if probed else ", shown in turn 2")
    graphs = [(first, graph_svg(emitted, reference, variables, first))]
    if probed:
        graphs.append(("turn 2: shown (replaced by a probe)",
                       graph_svg(shown, reference, variables, "turn 2: shown (replaced by a probe)")))
    graphs.append(("reference CPDAG (oracle)", graph_svg(reference, shown, variables, "reference CPDAG")))
    return graphs


def case_data(row: Mapping[str, Any], sampled: bool = False) -> dict[str, Any]:
    """One gallery row as the explorer's JSON case, with its SVGs; ``sampled``: in the appendix-I sample
    (:func:`failures.paper_sample`)."""
    emitted, shown, reference = (_parse(row[c]) for c in ("emitted_analysis", "shown_analysis", "reference_analysis"))
    probed = shown is not None and shown != emitted  # compared as objects: the JSON texts differ in layout
    drawn = [g for g in (emitted, shown if probed else None, reference) if g is not None]
    variables = list(dict.fromkeys(v for g in drawn for v in g.variables))
    variables += sorted({v for g in drawn for e in drawn_edges(g) for v in e[1:]} - set(variables))
    case = {column: _plain(row[column]) for column in (
        "id", "condition", "kind", "template", "num_variables", "hypothesis", "answer", "gold", "oracle",
        "graph_verdict", "members", "members_holding", "intervention_note", "unparsed", "rejected", "cut_off",
        "flow", "emitted_error", "as_recorded")}
    graphs = _case_graphs(case["flow"] == "tool", emitted, shown, probed, reference, variables)
    premise = str(row["premise"])
    case.update(
        key=f"{case['condition']}:{case['id']}",
        num_variables=str(case["num_variables"]),
        premise=premise[len("premise:"):].lstrip() if premise.lower().startswith("premise:") else premise,
        verdict=verdict_text(case),
        sampled=sampled,
        flags=graph_flags(emitted) + (graph_flags(shown) if probed else []),
        turn1_arguments=_clip(row["turn1_arguments"]),
        turn1_text=_clip(row["turn1_text"]),
        answer_text=_clip(row["answer_text"]),
        messages=[_message_texts(row[c]) for c in ("turn1_messages", "turn2_messages")],
        graphs=graphs,
    )
    return case


def _message_texts(printed: Any) -> list[str] | None:
    """The messages of ``cpdagthink prompt``'s JSON one by one, each as printed inside the list (so that
    ``"[\\n" + ",\\n".join(texts) + "\\n]"`` is the printed list again); each clipped. The page keeps every
    distinct text once: system prompts and earlier turns repeat across cases."""
    text = _plain(printed)
    if text is None:
        return None
    return [_clip(json.dumps([m], indent=2, ensure_ascii=False)[2:-2], 10 * MAX_TEXT) for m in json.loads(text)]


def _script_json(value: Any) -> str:
    """JSON safe inside a <script> element: no ``</script>``, ``<!--``, entity or line separator can form."""
    text = json.dumps(value, ensure_ascii=False)
    for char in "&<>\u2028\u2029":
        text = text.replace(char, f"\\u{ord(char):04x}")
    return text


def _static(name: str) -> str:
    """One of the explorer's own files, shipped in the package's ``static`` folder."""
    return files(__package__).joinpath("static", name).read_text(encoding="utf-8")


STYLE = _static("explorer.css")
# Its names ROOT_ID, FILTERS and PAGE_SIZE are filled in by :func:`fragment`, for each explorer of a page.
SCRIPT = _static("explorer.js")

LEGEND = ("Edges: arrows are directed, plain lines undirected, dotted lines pairs listed only in the skeleton, "
          "dashed orange a pair listed with two orientations (see the flags). Red: an edge the reference CPDAG "
          "does not have (on the reference: an edge the shown object lacks), same pair, kind and direction.")

BAR = ('<div class="cpx-bar"><label>search premise, hypothesis, answer:<input type="search" class="cpx-search">'
       '</label><label><input type="checkbox" class="cpx-correct">show correct cases for contrast</label>'
       '<label><input type="checkbox" class="cpx-sample">App. I sample only</label></div>'
       '<div class="cpx-bar"><span class="cpx-count"></span><a class="cpx-link">link to this view</a>'
       '<button type="button" class="cpx-all">show every case</button></div>')


def _static_card(case: Mapping[str, Any]) -> str:
    """A case for print: the live card's text and graphs, without the controls, escaped here."""
    tags = "".join(f'<span class="cpx-tag">{html.escape(str(t))}</span>' for t in
                   (label(case["condition"]), label(case["kind"]), case["template"], f"{case['num_variables']} variables"))
    flags = (f'<div class="cpx-flags">Flagged in the object: {html.escape("; ".join(case["flags"]))}</div>'
             if case["flags"] else "")
    figures = "".join(f"<figure>{svg}<figcaption>{html.escape(title)}</figcaption></figure>"
                      for title, svg in case["graphs"])
    answer = _clip(case["answer_text"], 800) or "(empty)"
    return (f'<div class="cpx-card"><div class="cpx-head">{html.escape(case["id"])} {tags}</div>'
            f'<div>Hypothesis: {html.escape(case["hypothesis"])}</div><div>{html.escape(case["verdict"])}</div>'
            f'<div class="cpx-premise"><b>Premise: </b>{html.escape(case["premise"])}</div>{flags}'
            f'<div class="cpx-graphs">{figures}</div><div class="cpx-note">Model output (answer turn):</div>'
            f'<pre class="cpx-text">{html.escape(answer)}</pre></div>')


def fragment(gallery: pd.DataFrame, sampled: pd.DataFrame | None = None, print_cases: int = PRINT_CASES) -> str:
    """The explorer as one ``<div>`` with its data, style and script inline (ids unique per call, so
    several explorers can share a page). ``gallery``: :func:`failure_views.gallery_rows`; ``sampled``: the
    appendix-I sample (:func:`failures.paper_sample`), marked on its cases and offered as a filter;
    ``print_cases``: the errors of the static version, shown in print only."""
    root_id = f"cpx-{uuid.uuid4().hex[:10]}"
    chosen = set() if sampled is None else set(zip(sampled["condition"], sampled["id"]))
    cases = [case_data(row, (row["condition"], row["id"]) in chosen) for row in gallery.to_dict("records")]
    errors = [c for c in cases if c["kind"] != CORRECT]
    texts: dict[str, int] = {}  # each distinct message text once, cases hold indices
    for case in cases:
        case["messages"] = [None if m is None else [texts.setdefault(t, len(texts)) for t in m]
                            for m in case["messages"]]
    # the filters and tags show display names; the values (and so the links) keep the keys
    shown_as = {str(v): label(v) for c in cases for v in (c["condition"], c["kind"])}
    data = {"cases": cases, "texts": list(texts), "labels": shown_as, "filter_names": FILTER_NAMES}
    script = (SCRIPT.replace("ROOT_ID", json.dumps(root_id)).replace("FILTERS", json.dumps(FILTERS))
              .replace("PAGE_SIZE", str(PAGE_SIZE)))
    printed = "".join(_static_card(c) for c in errors[:print_cases])
    total = (f"The first {min(print_cases, len(errors))} of {len(errors)} errors; the online book's explorer "
             "searches and filters all of them and shows the messages each turn sent." if errors else
             "No errors in this run; the online book's explorer lists the correct cases.")
    return (f'<div class="cpx" id="{root_id}"><style>{STYLE}</style>'
            f'<script type="application/json" class="cpx-data">{_script_json(data)}'
            "</script>"
            f'<div class="cpx-live">{BAR}<div class="cpx-legend">{html.escape(LEGEND)}</div>'
            f'<div class="cpx-list"></div><button type="button" class="cpx-more"></button></div>'
            f'<div class="cpx-print"><div class="cpx-note">{html.escape(total)}</div>'
            f'{f"<div class=cpx-legend>{html.escape(LEGEND)}</div>" if errors else ""}{printed}</div>'
            f"<script>{script}</script></div>")


def page(gallery: pd.DataFrame, title: str = "Failure explorer", sampled: pd.DataFrame | None = None) -> str:
    """A standalone HTML document holding :func:`fragment`."""
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
            f'<meta name="viewport" content="width=device-width, initial-scale=1"></head>'
            f"<body><h1>{html.escape(title)}</h1>{fragment(gallery, sampled)}</body></html>")


def write_page(gallery: pd.DataFrame, path: Path, title: str = "Failure explorer",
               sampled: pd.DataFrame | None = None) -> Path:
    """:func:`page` written to ``path`` (UTF-8); the path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(page(gallery, title, sampled), encoding="utf-8")
    return path
