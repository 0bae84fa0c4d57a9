"""The failure explorer: its SVGs and escaping in Python, its filter in a real headless Chromium."""

from __future__ import annotations

import json
import re

import pytest

from analyses import make
from cpdagthink import explorer
from cpdagthink.failure_views import gallery_rows
from failure_cases import CHAIN, COLLIDER, INSTANCES, TAIL, instance, record, reference, reversed_graph

# A constructed case whose id and hypothesis carry markup and quotes, to catch missing escapes.
TRICKY = instance([("A", "C"), ("B", "C")], "A directly causes C.", "ABC", 'q"</script><b>x&amp;')


@pytest.fixture(scope="module")
def gallery():
    """Seven errors in two conditions: four tool-run kinds and two one-turn kinds, on 3 and 4 variables."""
    runs = {
        "structured": [record(COLLIDER, "NO", parsed=reversed_graph(COLLIDER)), record(CHAIN, "YES", parsed=reference(CHAIN)),
                       record(TAIL, "NO", parsed=reference(TAIL)), record(TRICKY, "NO", parsed=None)],
        "baseline_enhanced": [record(COLLIDER, "NO"), record(CHAIN, "YES"), record(TAIL, "NO")],
    }
    return gallery_rows(runs, [*INSTANCES, TRICKY])


def test_svg_draws_arrows_lines_and_the_differences():
    shown = make("ABC", directed=[("A", "B")], undirected=[("B", "C")])
    ref = make("ABC", directed=[("A", "B"), ("C", "B")])
    svg = explorer.graph_svg(shown, ref, ["A", "B", "C"], "shown")
    assert svg.count("<circle") == 3 and svg.count("<polygon") == 1  # one arrowhead: A -> B
    assert svg.count("<line") == 2  # A -> B's shaft and the undirected B - C
    assert svg.count(explorer.DIFFERS) == 1  # B - C is not in the reference (C -> B is)
    svg = explorer.graph_svg(ref, shown, ["A", "B", "C"], "reference")
    assert svg.count("<polygon") == 2 and svg.count(f'fill="{explorer.DIFFERS}"') == 1  # C -> B differs
    assert "no graph" in explorer.graph_svg(None, ref, ["A", "B", "C"], "none")
    # Nothing to compare with: no edge is marked as a difference.
    assert explorer.DIFFERS not in explorer.graph_svg(ref, None, ["A", "B", "C"], "reference")


def test_cases_carry_the_gallery_and_escape_their_text(gallery):
    cases = [explorer.case_data(row) for row in gallery.to_dict("records")]
    assert [c["kind"] for c in cases[:4]] == ["wrong_graph", "mec_ambiguity", "mec_ambiguity", "no_graph"]
    first = cases[0]
    assert (first["answer"], first["oracle"], first["graph_verdict"], first["num_variables"]) == ("NO", 1, 0, "3")
    assert first["left_title"] == "emitted in turn 1, shown in turn 2" and first["answer_text"].endswith("Answer: NO")
    assert cases[3]["left_title"] == "no usable object" and cases[3]["graph_verdict"] is None
    assert cases[4]["left_title"] == "no object: this condition emits none"
    html = explorer.page(gallery)
    data = re.search(r'<script type="application/json" class="cpx-data">(.*?)</script>', html, re.S).group(1)
    assert "<" not in data and "&" not in data  # so no "</script>" or entity can end or change the block
    assert json.loads(data)[3]["id"] == TRICKY.id
    assert "<b>x" not in html  # the id is only inside the JSON, escaped there


def test_two_fragments_do_not_share_ids(gallery):
    ids = [re.search(r'<div class="cpx" id="(cpx-[0-9a-f]+)"', explorer.fragment(gallery.head(1))).group(1)
           for _ in range(2)]
    assert ids[0] != ids[1]


# ----------------------------------------------------------------------------------------- in a browser

STATE = """(() => {
  const root = document.querySelectorAll('.cpx')[%d];
  return {
    count: root.querySelector('.cpx-count').textContent,
    cases: [...root.querySelectorAll('.cpx-card')].map(c => c.getAttribute('data-case')),
    heads: [...root.querySelectorAll('.cpx-head')].map(h => h.textContent),
    more: getComputedStyle(root.querySelector('.cpx-more')).display !== 'none',
    options: [...root.querySelectorAll('select')].map(s => [s.name, [...s.options].map(o => o.value)]),
  };
})()"""


def choose(browser, name: str, value: str, explorer_index: int = 0) -> None:
    browser.evaluate(f"""(() => {{
      const select = document.querySelectorAll('.cpx')[{explorer_index}].querySelector('select[name={name}]');
      select.value = {json.dumps(value)};
      select.dispatchEvent(new Event('change'));
    }})()""")


def test_filters_change_the_visible_cases_and_the_graphs_render(gallery, browser, tmp_path):
    browser.open(explorer.write_page(gallery, tmp_path / "explorer.html"))
    state = browser.evaluate(STATE % 0)
    assert state["count"] == "7 of 7 cases" and len(state["cases"]) == 7 and not state["more"]
    assert dict(state["options"]) == {
        "condition": ["", "baseline_enhanced", "structured"],
        "kind": ["", "mec_ambiguity", "no_graph", "one_turn_mec_ambiguity", "one_turn_other", "wrong_graph"],
        "template": ["", "parent"],
        "num_variables": ["", "3", "4"],
    }
    assert TRICKY.id in state["heads"][3]  # markup in an id is shown as text

    choose(browser, "kind", "mec_ambiguity")
    state = browser.evaluate(STATE % 0)
    assert state["count"] == "2 of 7 cases" and state["cases"] == ["chain", "tail"]
    choose(browser, "num_variables", "4")
    assert browser.evaluate(STATE % 0)["cases"] == ["tail"]
    choose(browser, "condition", "baseline_enhanced")
    assert browser.evaluate(STATE % 0)["count"] == "0 of 7 cases"
    choose(browser, "kind", "")
    assert browser.evaluate(STATE % 0)["cases"] == ["tail"]

    # The tail case: the emitted graph (D - A -> B <- C) next to the reference, both drawn with real size.
    choose(browser, "condition", "structured")
    graphs = browser.evaluate("""[...document.querySelectorAll('.cpx-card svg')].map(svg => {
      const box = svg.getBoundingClientRect();
      return {width: box.width, height: box.height, nodes: svg.querySelectorAll('circle').length,
              arrows: svg.querySelectorAll('polygon').length, title: svg.querySelector('title').textContent};
    })""")
    assert [g["title"] for g in graphs] == ["emitted in turn 1, shown in turn 2", "reference CPDAG"]
    assert all(g["width"] > 100 and g["height"] > 100 and g["nodes"] == 4 and g["arrows"] == 2 for g in graphs)


def test_show_more_pages_through_the_matches(gallery, browser, tmp_path, monkeypatch):
    monkeypatch.setattr(explorer, "PAGE_SIZE", 3)
    path = tmp_path / "two.html"
    # Two explorers on one page (as two notebook outputs would be): each filters only itself.
    path.write_text(explorer.page(gallery).replace("</body>", explorer.fragment(gallery) + "</body>"), encoding="utf-8")
    browser.open(path)
    state = browser.evaluate(STATE % 0)
    assert state["count"] == "7 of 7 cases (first 3 shown)" and len(state["cases"]) == 3 and state["more"]
    browser.evaluate("document.querySelectorAll('.cpx')[0].querySelector('.cpx-more').click()")
    assert len(browser.evaluate(STATE % 0)["cases"]) == 6
    browser.evaluate("document.querySelectorAll('.cpx')[0].querySelector('.cpx-more').click()")
    state = browser.evaluate(STATE % 0)
    assert state["count"] == "7 of 7 cases" and len(state["cases"]) == 7 and not state["more"]
    browser.evaluate("document.querySelectorAll('.cpx')[0].querySelector('select[name=kind]').value = 'no_graph'")
    assert len(browser.evaluate(STATE % 0)["cases"]) == 7  # nothing changes before the change event
    choose(browser, "condition", "structured", explorer_index=1)
    assert len(browser.evaluate(STATE % 0)["cases"]) == 7  # the first explorer kept its state
    state = browser.evaluate(STATE % 1)
    assert state["count"] == "4 of 7 cases (first 3 shown)" and len(state["cases"]) == 3 and state["more"]


def test_real_probe_errors_in_the_browser(test_csv, browser, tmp_path, monkeypatch):
    """Real Corr2Cause rows, the reference agent, and a probe that replaces its graph: the errors it causes
    are shown with the replaced graph, and the condition filter separates the probes."""
    from cpdagthink import experiments as ex
    from cpdagthink.interventions import PROBES

    monkeypatch.setenv("CORR2CAUSE_CSV", str(test_csv))
    setup = ex.setup_from_parameters({"backend": "reference", "limit": 12, "sample_variables": [5],
                                      "out_root": str(tmp_path / "runs"), "cache_dir": str(tmp_path / "cache")})
    instances = setup.instances()
    runs = {name: ex.run(setup, "structured", 0, instances, intervention=PROBES[name], probe=name, progress=False)
            for name in ("scramble_full", "scramble_skeleton")}
    rows = gallery_rows(runs, instances)
    assert len(rows) >= 2 and set(rows["kind"]) == {"wrong_graph"}  # the agent reads whatever graph it is shown
    browser.open(explorer.write_page(rows, tmp_path / "explorer.html"))
    assert browser.evaluate(STATE % 0)["count"] == f"{len(rows)} of {len(rows)} cases"
    choose(browser, "condition", "scramble_full")
    state = browser.evaluate(STATE % 0)
    full = rows[rows["condition"] == "scramble_full"]
    assert state["cases"] == full["id"].tolist()
    captions = browser.evaluate("[...document.querySelectorAll('.cpx-card figcaption')].map(f => f.textContent)")
    assert captions[:2] == ["shown in turn 2 (replaced by a probe)", "reference CPDAG (oracle)"]
    sizes = browser.evaluate("[...document.querySelectorAll('.cpx-card svg')].map(s => s.getBBox().width)")
    assert len(sizes) == 2 * len(full) and min(sizes) > 100
