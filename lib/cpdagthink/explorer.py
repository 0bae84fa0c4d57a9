"""The failure explorer: the gallery's errors as an interactive HTML view that needs no kernel.

:func:`fragment` turns :func:`failure_views.gallery_rows` into one self-contained ``<div>``: the cases as JSON,
each case's graphs as inline SVG drawn here (the object turn 2 saw next to the oracle's reference CPDAG, on
one circular layout, edges that differ in red, as :func:`failure_views.draw_pair` draws them), and a small
vanilla-JS filter (condition, failure kind, template, variable count) with a count of the matching cases.
Nothing is fetched from the network. The same fragment goes into notebook 06's output (so into the built
book) and, wrapped by :func:`page`, into a standalone file.
"""

from __future__ import annotations

import html
import json
import math
import uuid
from pathlib import Path
from typing import Any, Mapping

import pandas as pd

from .failure_views import drawn_edges
from .schema import CausalAnalysis

FILTERS = ["condition", "kind", "template", "num_variables"]  # the select boxes, in order
PAGE_SIZE = 10  # cards shown at once; "show more" adds as many
MAX_TEXT = 2000  # characters of the turn-2 text kept per case (the page stays small on a full run)

SIZE, RADIUS, NODE = 240, 82, 17  # SVG canvas side, layout circle radius, node radius (px)
SHARED, DIFFERS = "#222", "#d62728"


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
    dash = ' stroke-dasharray="3 4"' if kind == "skeleton" else ""
    if kind != "directed":
        return f'<line x1="{ax:.0f}" y1="{ay:.0f}" x2="{bx:.0f}" y2="{by:.0f}" stroke="{colour}" stroke-width="2"{dash}/>'
    head, half = 11.0, 5.0
    cx, cy = bx - ux * head, by - uy * head
    corners = f"{bx:.0f},{by:.0f} {cx - uy * half:.0f},{cy + ux * half:.0f} {cx + uy * half:.0f},{cy - ux * half:.0f}"
    return (f'<line x1="{ax:.0f}" y1="{ay:.0f}" x2="{cx:.0f}" y2="{cy:.0f}" stroke="{colour}" stroke-width="2"/>'
            f'<polygon points="{corners}" fill="{colour}"/>')


def graph_svg(analysis: CausalAnalysis | None, other: CausalAnalysis | None, variables: list[str], title: str) -> str:
    """``analysis`` drawn as an SVG on a circle of ``variables`` (in that order): directed edges as arrows,
    undirected edges as plain lines, pairs only in the skeleton field dotted; edges absent from ``other``
    (same pair, kind and direction) in red, unless ``other`` is None (nothing to compare with). ``None`` as
    ``analysis`` draws an empty canvas that says so."""
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
            parts.append(_edge_svg(kind, at[a], at[b], SHARED if (kind, a, b) in theirs else DIFFERS))
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


def case_data(row: Mapping[str, Any]) -> dict[str, Any]:
    """One gallery row as the explorer's JSON case, with its two SVGs."""
    shown, reference = _parse(row["shown_analysis"]), _parse(row["reference_analysis"])
    graphs = [g for g in (shown, reference) if g is not None]
    variables = list(dict.fromkeys(v for g in graphs for v in g.variables))
    variables += sorted({v for g in graphs for e in drawn_edges(g) for v in e[1:]} - set(variables))
    if shown is None:
        left = "no object: this condition emits none" if row["kind"].startswith("one_turn") else "no usable object"
    elif shown != _parse(row["emitted_analysis"]):  # compared as objects: the two JSON texts differ in layout
        left = "shown in turn 2 (replaced by a probe)"
    else:
        left = "emitted in turn 1, shown in turn 2"
    case = {column: _plain(row[column]) for column in (
        "id", "condition", "kind", "template", "num_variables", "premise", "hypothesis", "answer", "gold",
        "oracle", "graph_verdict", "members", "members_holding", "intervention_note")}
    text = _plain(row["answer_text"]) or ""
    case.update(
        num_variables=str(case["num_variables"]),
        answer_text=text[:MAX_TEXT] + (" [...]" if len(text) > MAX_TEXT else ""),
        left_title=left,
        left_svg=graph_svg(shown, reference, variables, left),
        right_svg=graph_svg(reference, shown, variables, "reference CPDAG"),
    )
    return case


def _script_json(value: Any) -> str:
    """JSON safe inside a <script> element: no ``</script>``, no HTML comment or entity can form."""
    text = json.dumps(value, ensure_ascii=False)
    return text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")


STYLE = """
.cpx{font-family:system-ui,sans-serif;font-size:14px;line-height:1.4}
.cpx-bar{display:flex;flex-wrap:wrap;gap:.6em 1.2em;align-items:center;margin:.4em 0 .8em}
.cpx-bar label{display:flex;gap:.3em;align-items:center}
.cpx-bar select{font-size:13px;padding:1px 4px}
.cpx-count{font-weight:600}
.cpx-card{border:1px solid #ccc;border-radius:6px;padding:.6em .8em;margin:.6em 0}
.cpx-head{font-weight:600;margin-bottom:.3em}
.cpx-tag{display:inline-block;background:#eef;border-radius:4px;padding:0 .4em;margin-right:.3em;font-weight:400}
.cpx-graphs{display:flex;flex-wrap:wrap;gap:1em}
.cpx-graphs figure{margin:0;text-align:center}
.cpx-graphs figcaption{font-size:12px;color:#555;margin:0;padding:0}
.cpx-graphs svg{display:block}
.cpx-premise{max-height:7.5em;overflow:auto;background:#f7f7f7;padding:.3em .5em;border-radius:4px}
.cpx pre.cpx-text{white-space:pre-wrap;max-height:14em;overflow:auto;background:#f7f7f7;padding:.4em;font-size:12px}
.cpx-legend{font-size:12px;color:#555}
@media print{.cpx-card{break-inside:avoid}.cpx-premise,.cpx pre.cpx-text{max-height:none}.cpx-more{display:none}}
"""

SCRIPT = """
(function () {
  var root = document.getElementById(ROOT_ID);
  var cases = JSON.parse(root.querySelector('script.cpx-data').textContent);
  var filters = FILTERS, pageSize = PAGE_SIZE, shown = pageSize;
  var list = root.querySelector('.cpx-list'), more = root.querySelector('.cpx-more');
  var selects = {};
  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function yn(v) { return v === null || v === undefined ? 'none' : (v === 1 || v === 'YES' ? 'YES' : 'NO'); }
  filters.forEach(function (name) {
    var values = [];
    cases.forEach(function (c) { if (values.indexOf(c[name]) < 0) values.push(c[name]); });
    values.sort(function (a, b) { return isNaN(a) || isNaN(b) ? String(a).localeCompare(String(b)) : a - b; });
    var label = el('label', null, name.replace('_', ' ') + ':'), select = el('select');
    select.name = name;
    select.appendChild(el('option', null, '(all)')).value = '';
    values.forEach(function (v) { select.appendChild(el('option', null, v)).value = v; });
    select.addEventListener('change', function () { shown = pageSize; render(); });
    label.appendChild(select);
    root.querySelector('.cpx-bar').insertBefore(label, root.querySelector('.cpx-count'));
    selects[name] = select;
  });
  function card(c) {
    var box = el('div', 'cpx-card');
    box.setAttribute('data-case', c.id);
    var head = box.appendChild(el('div', 'cpx-head', c.id + ' '));
    [c.condition, c.kind, c.template, c.num_variables + ' variables'].forEach(function (t) {
      head.appendChild(el('span', 'cpx-tag', t));
    });
    var verdict = 'model answered ' + (c.answer || 'nothing parseable') + '; oracle (corrected label) ' +
      yn(c.oracle) + '; published label ' + yn(c.gold);
    if (c.graph_verdict !== null) verdict += '; the shown graph implies ' + yn(c.graph_verdict);
    if (c.members !== null) verdict += '; hypothesis holds in ' + c.members_holding + ' of ' + c.members +
      ' DAGs of the class';
    box.appendChild(el('div', null, 'Hypothesis: ' + c.hypothesis));
    box.appendChild(el('div', null, verdict));
    if (c.intervention_note) box.appendChild(el('div', null, 'Probe: ' + c.intervention_note));
    box.appendChild(el('div', 'cpx-premise', /^premise:/i.test(c.premise) ? c.premise : 'Premise: ' + c.premise));
    var graphs = box.appendChild(el('div', 'cpx-graphs'));
    [[c.left_svg, c.left_title], [c.right_svg, 'reference CPDAG (oracle)']].forEach(function (g) {
      var fig = graphs.appendChild(el('figure'));
      fig.innerHTML = g[0];  // SVG drawn and escaped at build time
      fig.appendChild(el('figcaption', null, g[1]));
    });
    var details = box.appendChild(el('details'));
    details.open = true;
    details.appendChild(el('summary', null, 'Turn-2 answer (model output)'));
    details.appendChild(el('pre', 'cpx-text', c.answer_text || '(empty)'));
    return box;
  }
  function render() {
    var matching = cases.filter(function (c) {
      return filters.every(function (name) { var v = selects[name].value; return !v || String(c[name]) === v; });
    });
    root.querySelector('.cpx-count').textContent = matching.length + ' of ' + cases.length + ' cases' +
      (matching.length > shown ? ' (first ' + shown + ' shown)' : '');
    list.textContent = '';
    matching.slice(0, shown).forEach(function (c) { list.appendChild(card(c)); });
    more.style.display = matching.length > shown ? '' : 'none';
    more.textContent = 'show ' + Math.min(pageSize, matching.length - shown) + ' more';
  }
  more.addEventListener('click', function () { shown += pageSize; render(); });
  render();
})();
"""

LEGEND = ("Edges: arrows are directed, plain lines undirected, dotted lines pairs listed only in the skeleton. "
          "Red: an edge the other graph of the pair does not have (same pair, kind and direction).")


def fragment(gallery: pd.DataFrame) -> str:
    """The explorer as one ``<div>`` with its data, style and script inline (ids unique per call, so
    several explorers can share a page). ``gallery``: :func:`failure_views.gallery_rows`."""
    root_id = f"cpx-{uuid.uuid4().hex[:10]}"
    cases = [case_data(row) for row in gallery.to_dict("records")]
    script = (SCRIPT.replace("ROOT_ID", json.dumps(root_id)).replace("FILTERS", json.dumps(FILTERS))
              .replace("PAGE_SIZE", str(PAGE_SIZE)))
    return (f'<div class="cpx" id="{root_id}"><style>{STYLE}</style>'
            f'<script type="application/json" class="cpx-data">{_script_json(cases)}</script>'
            f'<div class="cpx-bar"><span class="cpx-count"></span></div>'
            f'<div class="cpx-legend">{html.escape(LEGEND)}</div>'
            f'<div class="cpx-list"></div><button type="button" class="cpx-more"></button>'
            f"<script>{script}</script></div>")


def page(gallery: pd.DataFrame, title: str = "Failure explorer") -> str:
    """A standalone HTML document holding :func:`fragment`."""
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
            f'<meta name="viewport" content="width=device-width, initial-scale=1"></head>'
            f"<body><h1>{html.escape(title)}</h1>{fragment(gallery)}</body></html>")


def write_page(gallery: pd.DataFrame, path: Path, title: str = "Failure explorer") -> Path:
    """:func:`page` written to ``path`` (UTF-8); the path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(page(gallery, title), encoding="utf-8")
    return path
