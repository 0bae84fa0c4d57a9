"""The failure explorer: its SVGs and escaping in Python, its filter in a real headless Chromium."""

from __future__ import annotations

import json
import re
import shutil

import pytest

from analyses import make
from cpdagthink.analysis.failures import paper_sample
from cpdagthink.book import explorer
from cpdagthink.book.failure_views import case_html, gallery_rows
from cpdagthink.method.decoding import Decoding
from failure_cases import (CHAIN, COLLIDER, HOSTILE, INSTANCES, TAIL, hostile_runs, hostile_server, instance,
                           mixed_runs, record, reference, reversed_graph)

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


def test_the_style_and_script_are_package_files_the_wheel_ships():
    """The explorer reads its own CSS and JavaScript from the package, and pyproject.toml declares every file of
    that folder as package data (a wheel without them would build pages with no style and no script)."""
    import fnmatch
    import tomllib
    from importlib.resources import files

    from cpdagthink.paths import PROJECT_ROOT

    static = files("cpdagthink.book").joinpath("static")
    assert explorer.STYLE == static.joinpath("explorer.css").read_text(encoding="utf-8")
    assert explorer.SCRIPT == static.joinpath("explorer.js").read_text(encoding="utf-8")
    declared = tomllib.loads((PROJECT_ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    patterns = declared["tool"]["setuptools"]["package-data"]["cpdagthink.book.static"]
    shipped = sorted(f.name for f in static.iterdir())
    assert shipped == ["explorer.css", "explorer.js"]
    assert all(any(fnmatch.fnmatch(name, p) for p in patterns) for name in shipped)


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
    assert [g[0] for g in first["graphs"]] == ["turn 1: emitted, shown in turn 2", "reference CPDAG (oracle)"]
    assert first["answer_text"].endswith("Answer: NO") and first["key"] == "structured:collider"
    assert not first["premise"].lower().startswith("premise:")  # the card adds the label once
    assert first["verdict"] == ("model answered NO; oracle (corrected label) YES; published label YES; the shown "
                                "graph implies NO; hypothesis holds in 1 of 1 DAGs of the class")
    assert cases[3]["graphs"][0][0] == "turn 1: no usable object" and cases[3]["graph_verdict"] is None
    assert cases[4]["graphs"][0][0] == "no object: this condition emits none"
    html = explorer.page(gallery)
    data = re.search(r'<script type="application/json" class="cpx-data">(.*?)</script>', html, re.S).group(1)
    assert "<" not in data and "&" not in data  # so no "</script>", "<!--" or entity can end or change the block
    assert json.loads(data)["cases"][3]["id"] == TRICKY.id
    assert "<b>x" not in html  # the id is only inside the JSON (and the printed card), escaped there


def test_script_json_escapes_what_ends_or_changes_a_script_block():
    text = explorer._script_json(["</script><!--\u2028\u2029&"])
    assert not set(text) & set("<>&\u2028\u2029") and json.loads(text) == ["</script><!--\u2028\u2029&"]


def test_a_probed_object_is_drawn_beside_the_emitted_one():
    probed = record(COLLIDER, "NO", parsed=reference(COLLIDER), shown=reversed_graph(COLLIDER))
    case = explorer.case_data(gallery_rows([probed], INSTANCES).iloc[0])
    assert [g[0] for g in case["graphs"]] == ["turn 1: emitted", "turn 2: shown (replaced by a probe)",
                                             "reference CPDAG (oracle)"]


def test_two_fragments_do_not_share_ids(gallery):
    ids = [re.search(r'<div class="cpx" id="(cpx-[0-9a-f]+)"', explorer.fragment(gallery.head(1))).group(1)
           for _ in range(2)]
    assert ids[0] != ids[1]


# ----------------------------------------------------------------------------------------- in a browser

STATE = """(() => {
  const root = document.querySelectorAll('.cpx')[%d];
  return {
    count: root.querySelector('.cpx-count').textContent,
    cases: [...root.querySelectorAll('.cpx-live .cpx-card')].map(c => c.getAttribute('data-case')),
    heads: [...root.querySelectorAll('.cpx-live .cpx-head')].map(h => h.textContent),
    more: getComputedStyle(root.querySelector('.cpx-more')).display !== 'none',
    options: [...root.querySelectorAll('select')].map(s => [s.name, [...s.options].map(o => o.value)]),
    shown: [...root.querySelectorAll('select')].map(s => [s.parentNode.firstChild.textContent,
                                                          [...s.options].map(o => o.textContent)]),
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
    # a reader sees display names; the values (and so the links) keep the keys
    assert dict(state["shown"]) == {
        "condition:": ["(all)", "BaselineEnhanced", "Structured Thinking"],
        "failure kind:": ["(all)", "class ambiguity", "no graph reached turn 2", "one-turn: class ambiguity",
                          "one-turn: other", "wrong graph state"],
        "template:": ["(all)", "parent"], "variables:": ["(all)", "3", "4"]}
    assert not any(key in head for head in state["heads"] for key in ("baseline_enhanced", "mec_ambiguity"))

    choose(browser, "kind", "mec_ambiguity")
    state = browser.evaluate(STATE % 0)
    assert state["count"] == "2 of 7 cases" and state["cases"] == ["structured:chain", "structured:tail"]
    choose(browser, "num_variables", "4")
    assert browser.evaluate(STATE % 0)["cases"] == ["structured:tail"]
    choose(browser, "condition", "baseline_enhanced")
    assert browser.evaluate(STATE % 0)["count"] == "0 of 7 cases"
    choose(browser, "kind", "")
    assert browser.evaluate(STATE % 0)["cases"] == ["baseline_enhanced:tail"]

    # The tail case: the emitted graph (D - A -> B <- C) next to the reference, both drawn with real size.
    choose(browser, "condition", "structured")
    graphs = browser.evaluate("""[...document.querySelectorAll('.cpx-live .cpx-card svg')].map(svg => {
      const box = svg.getBoundingClientRect();
      return {width: box.width, height: box.height, nodes: svg.querySelectorAll('circle').length,
              arrows: svg.querySelectorAll('polygon').length, title: svg.querySelector('title').textContent};
    })""")
    assert [g["title"] for g in graphs] == ["turn 1: emitted, shown in turn 2", "reference CPDAG"]
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
    from cpdagthink.book import experiments as ex
    from cpdagthink.method.interventions import PROBES

    monkeypatch.setenv("CORR2CAUSE_CSV", str(test_csv))
    setup = ex.setup_from_parameters({"backend": "reference", "limit": 12, "sample_variables": [5],
                                      "out_root": str(tmp_path / "runs"), "cache_dir": str(tmp_path / "cache")})
    instances = setup.instances()
    runs = {name: ex.run(setup.for_run("structured", 0, name), instances, intervention=PROBES[name], progress=False)
            for name in ("scramble_full", "scramble_skeleton")}
    rows = gallery_rows(runs, instances)
    assert len(rows) >= 2 and set(rows["kind"]) == {"wrong_graph"}  # the agent reads whatever graph it is shown
    browser.open(explorer.write_page(rows, tmp_path / "explorer.html"))
    assert browser.evaluate(STATE % 0)["count"] == f"{len(rows)} of {len(rows)} cases"
    choose(browser, "condition", "scramble_full")
    state = browser.evaluate(STATE % 0)
    full = rows[rows["condition"] == "scramble_full"]
    assert state["cases"] == [f"scramble_full:{i}" for i in full["id"]]
    captions = browser.evaluate("[...document.querySelectorAll('.cpx-live figcaption')].map(f => f.textContent)")
    assert captions[:3] == ["turn 1: emitted", "turn 2: shown (replaced by a probe)", "reference CPDAG (oracle)"]
    sizes = browser.evaluate("[...document.querySelectorAll('.cpx-live svg')].map(s => s.getBBox().width)")
    assert len(sizes) == 3 * len(full) and min(sizes) > 100


# ------------------------------------------------------------------------- hostile output, links, the turns


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    """The runner's records of three conditions with a model that writes live markup into every text and
    answers every row wrongly, on the constructed rows and one whose id carries markup; their gallery."""
    decoding = Decoding(max_tokens_turn1=64, max_tokens_answer=32)
    instances = [*INSTANCES, TRICKY]
    runs = hostile_runs(tmp_path_factory.mktemp("hostile"), instances, decoding)
    rows = gallery_rows(runs, instances, decodings=dict.fromkeys(runs, decoding), include_correct=True)
    return runs, rows, instances


# The payloads set window.pwned when they run (an image's onerror fires after load: wait a little).
PWNED = "new Promise(r => setTimeout(() => r(window.pwned === undefined ? null : String(window.pwned)), 300))"


def test_hostile_model_output_runs_nowhere_and_shows_as_text(hostile, browser, tmp_path):
    """The explorer (live and printed) and the notebook's case view, on one page: no payload runs, and the
    model's text is on the page letter for letter."""
    runs, rows, _ = hostile
    assert len(rows) == 12 and (rows["kind"] != "correct").all()
    views = explorer.fragment(rows, print_cases=12) + "".join(case_html(r) for r in rows.to_dict("records"))
    path = tmp_path / "hostile.html"
    path.write_text(f"<!DOCTYPE html><html><head><meta charset='utf-8'></head><body>{views}</body></html>",
                    encoding="utf-8")
    browser.open(path)
    assert browser.evaluate(PWNED) is None
    assert browser.evaluate("document.querySelectorAll('iframe, img, .cpx-card script').length") == 0
    cards = browser.evaluate("[...document.querySelectorAll('.cpx-live .cpx-card')].map(c => c.textContent)")
    assert len(cards) == explorer.PAGE_SIZE and all(HOSTILE in card for card in cards)
    assert TRICKY.id in browser.evaluate("document.querySelector('.cpx-live').textContent")
    assert browser.evaluate("document.body.innerText").count('<script>window.pwned = "script"</script>') >= 22
    # Printed (the PDF): the live view gives way to the static cards, as inert.
    browser.send("Emulation.setEmulatedMedia", {"media": "print"})
    try:
        printed = browser.evaluate("""[getComputedStyle(document.querySelector('.cpx-live')).display,
            [...document.querySelectorAll('.cpx-print .cpx-card')].map(c => c.innerText)]""")
    finally:
        browser.send("Emulation.setEmulatedMedia", {"media": ""})
    assert printed[0] == "none" and len(printed[1]) == 12
    assert all('<iframe src="javascript:parent.pwned=\'iframe\'"></iframe>' in card for card in printed[1])
    assert browser.evaluate(PWNED) is None


STATE_OF = """(() => {
  const root = document.querySelector('.cpx');
  return {count: root.querySelector('.cpx-count').textContent,
          cases: [...root.querySelectorAll('.cpx-live .cpx-card')].map(c => c.getAttribute('data-case')),
          search: root.querySelector('.cpx-search').value, link: root.querySelector('.cpx-link').href,
          selects: Object.fromEntries([...root.querySelectorAll('select')].map(s => [s.name, s.value]))};
})()"""


def reopen(browser, url: str) -> dict:
    browser.open("about:blank")  # a new load, not a jump within the page
    browser.open(url)
    return browser.evaluate(STATE_OF)


def test_search_case_and_filter_links_and_the_turns_of_a_case(hostile, browser, tmp_path):
    runs, rows, instances = hostile
    sample = paper_sample(runs, instances, size=5, seed=1)
    url = explorer.write_page(rows, tmp_path / "explorer.html", sampled=sample).resolve().as_uri()
    browser.open(url)
    assert browser.evaluate(STATE_OF)["count"] == "12 of 12 cases (first 10 shown)"

    # Search over premise, hypothesis and answer, then a filter: the state goes into the link.
    browser.evaluate("""(() => { const s = document.querySelector('.cpx-search');
      s.value = 'DIRECTLY causes b'; s.dispatchEvent(new Event('input')); })()""")
    state = browser.evaluate(STATE_OF)
    expected = [f"{c}:{i}" for c in runs for i in ("chain", "tail")]
    assert state["count"] == "6 of 12 cases" and state["cases"] == expected
    choose(browser, "condition", "twoturn_prose_pc")
    state = browser.evaluate(STATE_OF)
    assert state["cases"] == ["twoturn_prose_pc:chain", "twoturn_prose_pc:tail"]
    assert "#" in state["link"] and browser.evaluate("location.hash") == "#" + state["link"].split("#", 1)[1]
    linked = reopen(browser, state["link"])
    assert (linked["cases"], linked["search"], linked["selects"]["condition"]) == (
        state["cases"], "DIRECTLY causes b", "twoturn_prose_pc")
    browser.evaluate("""(() => { const s = document.querySelector('.cpx-search');
      s.value = 'pwned = "script"'; s.dispatchEvent(new Event('input')); })()""")  # the answers' text
    assert len(browser.evaluate(STATE_OF)["cases"]) == 4

    # The appendix-I sample as a filter.
    sampled = reopen(browser, url + "#sample=1")
    assert sorted(sampled["cases"]) == sorted(f"{c}:{i}" for c, i in zip(sample["condition"], sample["id"]))

    # A case link opens that case alone, with its turns.
    browser.open(url)
    link = browser.evaluate("""[...document.querySelectorAll('.cpx-card')].find(c =>
      c.getAttribute('data-case') === 'structured:chain').querySelector('a.cpx-case-link').href""")
    one = reopen(browser, link)
    assert one["cases"] == ["structured:chain"] and one["count"] == "one linked case"
    card = browser.evaluate("""(() => { const c = document.querySelector('.cpx-live .cpx-card');
      return {emitted: c.querySelector('.cpx-emitted pre').textContent,
              messages: [...c.querySelectorAll('.cpx-messages pre')].map(p => p.textContent),
              svgs: c.querySelectorAll('svg').length, text: c.textContent}; })()""")
    row = rows.set_index(["condition", "id"]).loc[("structured", "chain")]
    assert json.loads(card["emitted"]) == reference(CHAIN) and card["svgs"] == 2
    assert card["messages"] == [row["turn1_messages"], row["turn2_messages"]]
    assert "made under other settings" not in card["text"]
    assert '"role": "system"' in card["messages"][0] and '"role": "tool"' in card["messages"][1]
    browser.evaluate("document.querySelector('.cpx-all').click()")
    assert browser.evaluate(STATE_OF)["count"] == "12 of 12 cases (first 10 shown)"

    # The prose control's intermediate is shown.
    prose = reopen(browser, url + "#case=twoturn_prose_pc%3Acollider")
    assert prose["cases"] == ["twoturn_prose_pc:collider"]
    summaries = browser.evaluate("[...document.querySelectorAll('.cpx-live .cpx-card summary')].map(s => s.textContent)")
    assert "Turn 1: the prose intermediate" in summaries and "Turn 2: the answer (model output)" in summaries


def test_correct_cases_for_contrast_and_flags(browser, tmp_path):
    odd = reference(COLLIDER)
    odd.update(directed_edges=[["A", "C"], ["C", "A"], ["B", "B"]])  # A, C both ways; a self-loop
    runs = {**mixed_runs(), "flagged": [record(COLLIDER, "NO", parsed=odd)]}
    rows = gallery_rows(runs, INSTANCES, include_correct=True)
    browser.open(explorer.write_page(rows, tmp_path / "contrast.html"))
    assert browser.evaluate(STATE_OF)["count"] == "5 of 7 cases"
    browser.evaluate("(() => { const b = document.querySelector('.cpx-correct'); b.click(); })()")
    state = browser.evaluate(STATE_OF)
    assert state["count"] == "7 of 7 cases" and "correct=1" in state["link"]
    choose(browser, "kind", "correct")
    assert browser.evaluate(STATE_OF)["cases"] == ["structured:chain", "baseline_enhanced:tail"]
    choose(browser, "kind", "")
    flagged = browser.evaluate("""(() => { const c = [...document.querySelectorAll('.cpx-card')].find(c =>
      c.getAttribute('data-case') === 'flagged:collider');
      return {flags: c.querySelector('.cpx-flags').textContent,
              dashed: c.querySelectorAll('svg line[stroke="#ff7f0e"]').length}; })()""")
    assert flagged["flags"] == "Flagged in the object: self-loop B -> B in directed_edges; A, C listed as A -> C and as C -> A"
    assert flagged["dashed"] == 1  # drawn once, not two arrows on top of each other


@pytest.mark.slow
def test_chapter_06_built_from_a_hostile_server_runs_no_payload(test_csv, browser, tmp_path, monkeypatch):
    """Chapter 06 executed by papermill against an API server whose model writes live markup, built by
    jupyter-book (the site and the single page printed to PDF): in Chromium no payload runs on either page,
    and the model's text shows literally."""
    from cpdagthink.book.build import build
    from cpdagthink.paths import PROJECT_ROOT

    monkeypatch.setenv("CORR2CAUSE_CSV", str(test_csv))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    for name in ("_config.yml", "_static", "data/paper_reported.csv"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (shutil.copytree if (PROJECT_ROOT / name).is_dir() else shutil.copy)(PROJECT_ROOT / name, tmp_path / name)
    (tmp_path / "_toc.yml").write_text("format: jb-book\nroot: book/intro\nchapters:\n  - file: book/06_failure_gallery\n")
    (tmp_path / "book").mkdir()
    (tmp_path / "book" / "intro.md").write_text("# Front page\n")
    with hostile_server() as server:
        build({"backend": "openai", "model": "gpt-5.4-mini", "backend_options": {"base_url": [server.url], "reasoning_effort": "medium"},
               "max_tokens_turn1": 8192, "max_tokens_answer": 4096, "limit": 4, "out_root": str(tmp_path / "runs"),
               "cache_dir": str(tmp_path / "cache")}, only=["06"], root=tmp_path)
    literal = '<script>window.pwned = "script"</script>'
    for page, media in ((tmp_path / "_build" / "html" / "book" / "06_failure_gallery.html", ""),
                        (tmp_path / "_build" / "singlehtml" / "index.html", "print")):
        browser.open(page)
        browser.send("Emulation.setEmulatedMedia", {"media": media})
        try:
            assert browser.evaluate(PWNED) is None, page
            assert browser.evaluate("document.querySelectorAll('iframe, img[src=x]').length") == 0, page
            assert literal in browser.evaluate("document.body.innerText"), page
        finally:
            browser.send("Emulation.setEmulatedMedia", {"media": ""})
    assert (tmp_path / "_build" / "book.pdf").read_bytes()[:5] == b"%PDF-"


def test_a_link_to_a_case_this_run_does_not_hold_says_so(gallery, browser, tmp_path):
    url = explorer.write_page(gallery, tmp_path / "explorer.html").resolve().as_uri()
    missing = reopen(browser, url + "#case=structured%3Anosuch")
    assert missing["cases"] == []
    assert missing["count"] == "the linked case is not in this run (show every case to see the others)"
    browser.evaluate("document.querySelector('.cpx-all').click()")
    assert browser.evaluate(STATE_OF)["count"] == f"{len(gallery)} of {len(gallery)} cases"
