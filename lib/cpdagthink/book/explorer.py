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
from pathlib import Path
from typing import Any, Mapping

import pandas as pd

from ..method.schema import CausalAnalysis
from .failure_views import CORRECT, drawn_edges, graph_flags

FILTERS = ["condition", "kind", "template", "num_variables"]  # the select boxes, in order
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
    if case["flow"] != "tool":
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


STYLE = """
.cpx{font-family:system-ui,sans-serif;font-size:14px;line-height:1.4}
.cpx-bar{display:flex;flex-wrap:wrap;gap:.4em 1em;align-items:center;margin:.5em 0}
.cpx-bar select,.cpx-bar input{margin-left:.3em}
.cpx-search{min-width:16em}
.cpx-count{color:#333}
.cpx-card{border:1px solid #ccc;border-radius:6px;padding:.6em .8em;margin:.6em 0}
.cpx-head{font-weight:600;margin-bottom:.3em}
.cpx-head a{font-weight:400;margin-left:.5em}
.cpx-tag{display:inline-block;background:#eef;border-radius:4px;padding:0 .4em;margin-right:.3em;font-weight:400}
.cpx-flags{color:#a04000}
.cpx-graphs{display:flex;flex-wrap:wrap;gap:1em;break-inside:avoid}
.cpx-graphs figure{margin:0;text-align:center}
.cpx-graphs figcaption{font-size:12px;color:#555;margin:0;padding:0}
.cpx-graphs svg{display:block}
.cpx-premise{max-height:7.5em;overflow:auto;background:#f7f7f7;padding:.3em .5em;border-radius:4px}
.cpx pre.cpx-text{white-space:pre-wrap;overflow-wrap:anywhere;max-height:14em;overflow:auto;background:#f7f7f7;
  padding:.4em;font-size:12px;margin:.2em 0}
.cpx-legend,.cpx-note{font-size:12px;color:#555}
.cpx-print{display:none}
@media print{.cpx-live{display:none}.cpx-print{display:block}.cpx-premise,.cpx pre.cpx-text{max-height:none}
  /* the book's print style keeps a cell's output on one page: this one is longer, a kept one leaves a gap */
  div.cell_output:has(.cpx){break-inside:auto !important}}
"""

SCRIPT = """
(function () {
  var root = document.getElementById(ROOT_ID);
  var data = JSON.parse(root.querySelector('script.cpx-data').textContent);
  var cases = data.cases, texts = data.texts;  // a case's messages are indices into texts
  var filters = FILTERS, keys = ['case', 'q', 'correct', 'sample'].concat(FILTERS);
  var pageSize = PAGE_SIZE, shown = pageSize, only = null;  // only: the key of one linked case
  var live = root.querySelector('.cpx-live'), list = live.querySelector('.cpx-list');
  var more = live.querySelector('.cpx-more'), bar = live.querySelector('.cpx-bar');
  var search = live.querySelector('.cpx-search'), correct = live.querySelector('.cpx-correct');
  var sample = live.querySelector('.cpx-sample'), count = live.querySelector('.cpx-count');
  var viewLink = live.querySelector('.cpx-link'), all = live.querySelector('.cpx-all');
  var selects = {};
  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  filters.forEach(function (name) {
    var values = [];
    cases.forEach(function (c) { if (values.indexOf(c[name]) < 0) values.push(c[name]); });
    values.sort(function (a, b) { return isNaN(a) || isNaN(b) ? String(a).localeCompare(String(b)) : a - b; });
    var label = el('label', null, name.replace('_', ' ') + ':'), select = el('select');
    select.name = name;
    select.appendChild(el('option', null, '(all)')).value = '';
    values.forEach(function (v) { select.appendChild(el('option', null, v)).value = v; });
    select.addEventListener('change', changed);
    label.appendChild(select);
    bar.insertBefore(label, correct.parentNode);
    selects[name] = select;
  });
  if (!cases.some(function (c) { return c.sampled; })) sample.parentNode.style.display = 'none';
  if (!cases.some(function (c) { return c.kind === 'correct'; })) correct.parentNode.style.display = 'none';
  function state() {
    var p = new URLSearchParams();
    if (only !== null) { p.set('case', only); return p; }
    if (search.value) p.set('q', search.value);
    filters.forEach(function (n) { if (selects[n].value) p.set(n, selects[n].value); });
    if (correct.checked) p.set('correct', '1');
    if (sample.checked) p.set('sample', '1');
    return p;
  }
  function href(p) { return location.href.split('#')[0] + '#' + p.toString(); }
  function changed() {
    only = null; shown = pageSize; render();
    history.replaceState(null, '', '#' + state().toString());
  }
  function apply(hash) {  // the state a link names; a hash that is not ours (a section anchor) is left alone
    var p = new URLSearchParams(hash.replace(/^#/, ''));
    if (!keys.some(function (k) { return p.has(k); })) return false;
    only = p.get('case');
    search.value = p.get('q') || '';
    filters.forEach(function (n) { selects[n].value = p.get(n) || ''; });
    correct.checked = p.get('correct') === '1';
    sample.checked = p.get('sample') === '1';
    shown = pageSize;
    render();
    return true;
  }
  function block(box, title, text, open) {
    var details = box.appendChild(el('details'));
    details.open = !!open;
    details.appendChild(el('summary', null, title));
    details.appendChild(el('pre', 'cpx-text', text === null || text === '' ? '(empty)' : text));
    return details;
  }
  function card(c) {
    var box = el('div', 'cpx-card');
    box.setAttribute('data-case', c.key);
    var head = box.appendChild(el('div', 'cpx-head', c.id + ' '));
    [c.condition, c.kind, c.template, c.num_variables + ' variables'].concat(c.sampled ? ['App. I sample'] : [])
      .forEach(function (t) { head.appendChild(el('span', 'cpx-tag', t)); });
    var link = head.appendChild(el('a', 'cpx-case-link', 'link to this case'));
    link.href = href(new URLSearchParams({case: c.key}));
    box.appendChild(el('div', null, 'Hypothesis: ' + c.hypothesis));
    box.appendChild(el('div', null, c.verdict));
    if (c.intervention_note) box.appendChild(el('div', null, 'Probe: ' + c.intervention_note));
    var premise = box.appendChild(el('div', 'cpx-premise'));
    premise.appendChild(el('b', null, 'Premise: '));
    premise.appendChild(document.createTextNode(c.premise));
    if (c.flags.length) box.appendChild(el('div', 'cpx-flags', 'Flagged in the object: ' + c.flags.join('; ')));
    var graphs = box.appendChild(el('div', 'cpx-graphs'));
    c.graphs.forEach(function (g) {
      var fig = graphs.appendChild(el('figure'));
      fig.innerHTML = g[1];  // SVG drawn and escaped at build time
      fig.appendChild(el('figcaption', null, g[0]));
    });
    if (c.flow === 'tool') {
      var emitted = block(box, 'Turn 1: the object as emitted (tool-call arguments)',
                          c.turn1_arguments === null ? '(no tool call)' : c.turn1_arguments, true);
      emitted.classList.add('cpx-emitted');
      if (c.emitted_error) emitted.appendChild(el('div', 'cpx-note', 'Not usable: ' + c.emitted_error));
    }
    if (c.flow === 'prose') block(box, 'Turn 1: the prose intermediate', c.turn1_text, true);
    block(box, c.flow === 'one_turn' ? 'The answer (model output, one turn)' : 'Turn 2: the answer (model output)',
          c.answer_text, true);
    var sent = box.appendChild(el('details', 'cpx-messages'));
    sent.appendChild(el('summary', null, 'Messages sent, as cpdagthink prompt prints them'));
    if (c.messages[0] === null) sent.appendChild(el('div', 'cpx-note', 'not rebuilt for this page'));
    c.messages.forEach(function (m, i) {
      if (m === null) return;
      sent.appendChild(el('div', 'cpx-note', 'turn ' + (i + 1)));
      var printed = '[\\n' + m.map(function (t) { return texts[t]; }).join(',\\n') + '\\n]';
      sent.appendChild(el('pre', 'cpx-text', printed));
    });
    if (c.as_recorded === false) sent.appendChild(el('div', 'cpx-note',
      'Rebuilt from the record, but not the request it recorded (made under other settings).'));
    return box;
  }
  function text(c) {
    return [c.premise, c.hypothesis, c.answer_text || '', c.turn1_text || ''].join('\\n').toLowerCase();
  }
  function render() {
    var q = search.value.toLowerCase(), kind = selects.kind.value;
    var matching = cases.filter(function (c) {
      if (only !== null) return c.key === only;
      if (c.kind === 'correct' && !correct.checked && kind !== 'correct') return false;
      if (sample.checked && !c.sampled) return false;
      if (q && text(c).indexOf(q) < 0) return false;
      return filters.every(function (name) { var v = selects[name].value; return !v || String(c[name]) === v; });
    });
    count.textContent = (only === null ? matching.length + ' of ' + cases.length + ' cases' : matching.length ?
      'one linked case' : 'the linked case is not in this run (show every case to see the others)') +
      (matching.length > shown ? ' (first ' + shown + ' shown)' : '');
    viewLink.href = href(state());
    all.style.display = only !== null ? '' : 'none';
    list.textContent = '';
    matching.slice(0, shown).forEach(function (c) { list.appendChild(card(c)); });
    more.style.display = matching.length > shown ? '' : 'none';
    more.textContent = 'show ' + Math.min(pageSize, matching.length - shown) + ' more';
  }
  search.addEventListener('input', changed);
  correct.addEventListener('change', changed);
  sample.addEventListener('change', changed);
  all.addEventListener('click', changed);
  more.addEventListener('click', function () { shown += pageSize; render(); });
  window.addEventListener('hashchange', function () { apply(location.hash); });
  if (!apply(location.hash)) render();
})();
"""

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
                   (case["condition"], case["kind"], case["template"], f"{case['num_variables']} variables"))
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
    script = (SCRIPT.replace("ROOT_ID", json.dumps(root_id)).replace("FILTERS", json.dumps(FILTERS))
              .replace("PAGE_SIZE", str(PAGE_SIZE)))
    printed = "".join(_static_card(c) for c in errors[:print_cases])
    total = (f"The first {min(print_cases, len(errors))} of {len(errors)} errors; the online book's explorer "
             "searches and filters all of them and shows the messages each turn sent." if errors else
             "No errors in this run; the online book's explorer lists the correct cases.")
    return (f'<div class="cpx" id="{root_id}"><style>{STYLE}</style>'
            f'<script type="application/json" class="cpx-data">{_script_json({"cases": cases, "texts": list(texts)})}'
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
