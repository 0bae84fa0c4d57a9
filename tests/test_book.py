"""The main job end to end: every notebook executed by papermill, the Jupyter Book built, real HTML checked.

The reference agent stands in for a model so the build takes seconds; the local-model path of the same
notebooks is what `make book` runs (and `benchmarks/book.py` times).
"""

from __future__ import annotations

import dataclasses
import functools
import os
import re
import shutil
import types
from pathlib import Path

import nbformat
import pytest

from cpdagthink.analysis.tables import paper
from cpdagthink.backends.profiles import profile_for, with_overrides
from cpdagthink.backends.reference import ReferenceBackend
from cpdagthink.backends.vllm_offline import VLLMBackend
from cpdagthink.book.build import build, build_summary, chapter_records, hide_injected_parameters, render
from cpdagthink.book.chapters import NOTEBOOKS, notebook_defaults, notebook_parameters, select_notebooks
from cpdagthink.book.site import CheckoutError, build_html
from cpdagthink.cli import main
from cpdagthink.paths import NEEDS_CHECKOUT, PROJECT_ROOT

CHAPTERS = ["01_main_results", "02_complexity", "03_ablations", "04_probes", "05_audit", "06_failure_gallery",
            "07_components"]


def test_every_notebook_declares_its_parameters():
    for name in CHAPTERS:
        params = notebook_parameters(NOTEBOOKS / f"{name}.ipynb")
        assert {"backend", "model", "split", "data", "limit", "seeds"} <= params, name


def test_a_chapter_prefix_that_matches_nothing_is_refused_with_the_chapters(tmp_path):
    assert [n.stem for n in select_notebooks(["01", "04"])] == ["01_main_results", "04_probes"]
    with pytest.raises(ValueError, match="no chapter starts with 'nosuch'; the chapters are: 01_main_results, "
                                         "02_complexity"):
        build({}, only=["01", "nosuch"], root=tmp_path)
    assert not (tmp_path / "book").exists()  # refused before any work


def test_an_unknown_backend_is_refused_before_any_notebook_runs(tmp_path):
    with pytest.raises(ValueError, match="unknown backend 'nosuch'; choose one of local, openai"):
        build({"backend": "nosuch"}, only=["01"], root=tmp_path)
    assert not (tmp_path / "book").exists()


def test_a_notebook_parameter_no_selected_chapter_takes_is_refused_before_anything_runs(tmp_path):
    with pytest.raises(ValueError, match="no selected chapter takes the parameter 'probes'"):
        build({}, only=["01"], root=tmp_path, parameters={"probes": ["scramble_full"]})
    assert not (tmp_path / "book").exists()


@pytest.mark.parametrize("where", ["flag", "parameter"])
def test_a_key_in_a_query_string_is_refused_before_any_notebook_runs(tmp_path, where):
    url = "http://127.0.0.1:1/v1?api-key=sk-QUERYinBOOK77"
    overrides, parameters = ({"backend": "openai", "model": "m", "backend_options": {"base_url": [url]}}, {}) \
        if where == "flag" else ({"backend": "openai", "model": "m"}, {"backend_options": {"base_url": url}})
    with pytest.raises(ValueError, match=r"query string \(api-key\)") as raised:
        build(overrides, only=["01"], root=tmp_path, parameters=parameters)
    assert "QUERYinBOOK77" not in str(raised.value) and not (tmp_path / "book").exists()


def test_book_dash_p_reads_values_as_json_or_text(capsys):
    assert main(["book", "--only", "01", "-p", "probes=[\"scramble_full\"]"]) == 2
    assert "no selected chapter takes the parameter 'probes'" in capsys.readouterr().err
    assert main(["book", "--only", "04", "-p", "limit=-1"]) == 2  # checked as a run value before any notebook
    assert "limit" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["book", "-p", "no-equals-sign"])


def _executed(path, configuration, headline=None, injected=True):
    """A small executed notebook as papermill leaves it: an injected-parameters cell and a first screen, each
    with the execution count of a cell that ran."""
    nb = nbformat.v4.new_notebook()
    cells = [nbformat.v4.new_code_cell("limit = 0", metadata={"tags": ["injected-parameters"]}, execution_count=1)
             ] if injected else []
    screen = nbformat.v4.new_code_cell("first_screen()", execution_count=2)
    screen.outputs = [nbformat.v4.new_output("display_data", data={"text/markdown": "**This run:**"}, metadata={
        "cpdagthink": {"chapter": path.stem, "command": f"cpdagthink book --only {path.stem[:2]}",
                       "configuration": configuration, "headline": headline or {
                           "figure": "the gain", "paper": 13.35, "value": 1.0, "ci_low": -40.0, "ci_high": 45.0,
                           "verdict": "This build cannot test the paper's claim: wide.", "paper_key": "main_delta",
                           "causes": [], "degenerate": False}}})]
    nb.cells = cells + [screen]
    nbformat.write(nb, path)


CONFIG = {"backend": "reference", "model": "symbolic reference agent", "data": "test split", "instances": 4,
          "positives": 2, "negatives": 2, "sample": "limit 4", "seeds": [0], "budgets": "512 + 128",
          "decoding": "greedy decoding", "tool choice": "auto", "conditions": ["structured"], "probes": []}


def test_render_reads_each_chapters_configuration_and_marks_a_mixed_book(tmp_path):
    book = tmp_path / "book"
    book.mkdir()
    _executed(book / "01_main_results.ipynb", CONFIG)
    _executed(book / "04_probes.ipynb", {**CONFIG, "conditions": [], "probes": ["scramble_full"]})
    records = chapter_records(book)
    assert list(records) == ["01_main_results", "04_probes"]
    one = _html(build_summary(records))
    assert one.startswith("<blockquote>\n<p><strong>Does Structured Thinking beat BaselineEnhanced on this model?"
                          "</strong> No claim about LLMs: chapter 01 ran the symbolic reference agent")
    assert "<p><strong>One configuration for every chapter:</strong> symbolic reference agent" in one
    # text cells are shown literally, commands as code, chapters by their names
    assert ("<td>01 main results</td>\n<td>the gain</td>\n<td>+1 [-40, +45]</td>\n<td>+13.35</td>\n"
            "<td>This build cannot test the paper's claim</td>") in one
    assert "<li>04 probes: <code>cpdagthink book --only 04</code></li>" in one
    several = _html(build_summary({"01_main_results": {**records["01_main_results"], "configuration": {
        **records["01_main_results"]["configuration"], "seeds": [0, 1, 2]}}}))
    assert "seeds 0, 1, 2, no token budgets or decoding (the reference agent computes" in several
    assert "[0" not in several and "greedy" not in several  # prose, not a Python list; the agent has no decoding
    _executed(book / "04_probes.ipynb", {**CONFIG, "instances": 20})
    assert "Each chapter's configuration" not in one  # one configuration: said once, not per chapter
    mixed = _html(build_summary(chapter_records(book)))
    assert "</blockquote>\n<p><strong>This book is mixed:</strong>" in mixed
    assert ("<td>04 probes</td>\n<td>symbolic reference agent</td>\n<td>test split</td>\n"
            "<td>20 (2 positive, 2 negative)</td>") in mixed
    hide_injected_parameters(book / "01_main_results.ipynb")
    cell = nbformat.read(book / "01_main_results.ipynb", as_version=4).cells[0]
    assert "remove-cell" in cell.metadata["tags"]  # papermill's escaped JSON never reaches the page


def test_the_intros_box_says_why_this_builds_numbers_look_as_they_do_from_the_records(tmp_path):
    """The chapters' first screens name their figures' causes; the box counts the degenerate ones and groups each
    cause with the chapters that found it (a cause's text reaches the page as text)."""
    book = tmp_path / "book"
    book.mkdir()
    constant = "Structured Thinking answered NO on every one of its 4 rows"
    headline = {"figure": "the gain", "paper": 13.35, "value": -66.67, "ci_low": -100.0, "ci_high": 0.0,
                "verdict": "This build cannot test the paper's claim: ...", "paper_key": "main_delta", "degenerate": True,
                "causes": [constant, "BaselineEnhanced finished 1 of its 4 answers (3 cut off at the token budget)"]}
    llm = {**CONFIG, "backend": "openai", "model": "m"}
    _executed(book / "01_main_results.ipynb", llm, headline)
    _executed(book / "04_probes.ipynb", llm, headline | {"causes": [constant]})
    _executed(book / "05_audit.ipynb", llm, headline | {"degenerate": False, "causes": [
        "4 of 4 parsed Structured Thinking objects show the violation <b>“edge both directed and undirected”</b>"]})
    box = build_summary(chapter_records(book))
    text = str(box)
    assert text.startswith("Does Structured Thinking beat BaselineEnhanced on this model? Not on this build's evidence. "
                           "This build cannot test the paper's claim: ... Each other chapter, for its own question: "
                           "chapter 04 (the gain, -66.7 pp (95% CI [-100.0, +0.0])): this build cannot test the paper's "
                           "claim; chapter 05")
    assert ("Their records show: Structured Thinking answered NO on every one of its 4 rows (chapter 01, 04); "
            "BaselineEnhanced") in text
    assert "edge both directed and undirected”</b> (chapter 05)." in text
    html = _html(box)
    assert html.startswith("<blockquote>") and "<b>" not in html and "&lt;b&gt;" in html


def test_the_build_summary_shows_hostile_configuration_text_literally(tmp_path):
    """A model name or data path chosen by whoever ran a chapter reaches the intro as text, never as markup."""
    book = tmp_path / "book"
    book.mkdir()
    hostile = '<img src=x onerror="window.pwned=1"> [a](javascript:alert(1))'
    _executed(book / "01_main_results.ipynb", {**CONFIG, "model": hostile, "data": "`` <script>x</script>"})
    text = _html(build_summary(chapter_records(book)))
    assert "<img" not in text and "<script" not in text and "<a " not in text
    assert "&lt;img src=x onerror=&quot;window.pwned=1&quot;&gt; [a](javascript:alert(1))" in text


def _html(markdown) -> str:
    """Markdown rendered by markdown-it, the parser of MyST (so of the book), with raw HTML allowed as there."""
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark", {"html": True}).enable("table").render(markdown.source())


def test_render_without_executed_chapters_says_what_to_run(tmp_path):
    (tmp_path / "_toc.yml").write_text("root: intro\n")  # a checkout whose book was never executed
    with pytest.raises(ValueError, match="no executed chapter in .*: run `cpdagthink book`"):
        render(tmp_path)


def test_render_outside_a_checkout_says_it_needs_one_not_to_run_book(tmp_path):
    """A package install has no _toc.yml: `cpdagthink book` would need the checkout too, so render says so."""
    with pytest.raises(CheckoutError) as error:
        render(tmp_path)
    assert str(error.value) == f"{tmp_path / '_toc.yml'} is missing: {NEEDS_CHECKOUT}"
    assert "run `cpdagthink book`" not in str(error.value)


def test_book_outside_a_checkout_says_it_needs_one_before_any_work(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr("cpdagthink.book.build.NOTEBOOKS", tmp_path / "notebooks")  # as a wheel installs it
    assert main(["book", "--only", "01", "--backend", "reference"]) == 2
    err = capsys.readouterr().err
    assert f"cpdagthink book: error: {tmp_path / 'notebooks'} is missing: {NEEDS_CHECKOUT}\n" == err
    with pytest.raises(CheckoutError, match=re.escape(str(tmp_path / "_toc.yml")) + " is missing"):
        build_html(tmp_path)  # jupyter-book is not started without the table of contents


@pytest.mark.slow
def test_render_builds_the_book_from_executed_notebooks_without_executing_them(tmp_path):
    for name in ("_config.yml", "_static", "data/paper_reported.csv", "book/intro.md", "book/paper_figures.md"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        copy = shutil.copytree if (PROJECT_ROOT / name).is_dir() else shutil.copy
        copy(PROJECT_ROOT / name, tmp_path / name)
    (tmp_path / "_toc.yml").write_text("format: jb-book\nroot: book/intro\nchapters:\n  - file: book/01_main_results\n")
    _executed(tmp_path / "book" / "01_main_results.ipynb", CONFIG)
    index = render(tmp_path)
    intro = re.sub(r"<[^>]+>", "", (tmp_path / "_build" / "html" / "book" / "intro.html").read_text())
    assert index.is_file() and "One configuration for every chapter" in intro and "cpdagthink book --only 01" in intro
    page = (tmp_path / "_build" / "html" / "book" / "01_main_results.html").read_text()
    assert "limit = 0" not in page  # the injected cell is gone, and nothing was executed: no outputs were added
    assert len(nbformat.read(tmp_path / "book" / "01_main_results.ipynb", as_version=4).cells) == 2


def test_notebooks_are_thin_and_tag_their_code():
    """Parameters and setup cells hide their code, analysis cells collapse it, and no notebook holds more
    than about 40 lines of code besides its parameters and imports (the gallery's explorer cells, chapter 06,
    excepted): an import carries no logic, and importing by layer takes a line per layer."""
    for name in CHAPTERS:
        cells = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4).cells
        code = [c for c in cells if c.cell_type == "code"]
        tags = [set(c.metadata.get("tags", [])) for c in code]
        assert {"parameters", "remove-input"} <= tags[0], name
        setup = next(t for c, t in zip(code, tags) if "setup = ex.setup_from_parameters(globals())" in c.source)
        assert "remove-input" in setup, name
        assert all(t & {"remove-input", "remove-cell", "hide-input"} for t in tags), name
        lines = sum(not line.startswith(("import ", "from ")) for c, t in zip(code, tags) if "parameters" not in t
                    for line in c.source.splitlines())
        assert name == "06_failure_gallery" or lines <= 40, (name, lines)
        summary = next(i for i, c in enumerate(cells) if c.cell_type == "markdown" and c.source.startswith("## Summary"))
        assert all("hide-input" not in c.metadata.get("tags", []) for c in cells[:summary]), name


@pytest.mark.slow
def test_book_builds_with_tables_and_figures(test_csv, tmp_path, monkeypatch):
    monkeypatch.setenv("CORR2CAUSE_CSV", str(test_csv))
    for name in ("_config.yml", "_toc.yml", "_static", "data/paper_reported.csv", "book/intro.md",
                 "book/paper_figures.md", "book/using", "benchmarks/README.md", "benchmarks/notes"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        copy = shutil.copytree if (PROJECT_ROOT / name).is_dir() else shutil.copy
        copy(PROJECT_ROOT / name, tmp_path / name)
    # Beyond the CPU defaults: a stress set, an OOD split and the validity-preserving probes, so those paths
    # are built too.
    overrides = {"backend": "reference", "limit": 12, "out_root": str(tmp_path / "runs"),
                 "cache_dir": str(tmp_path / "cache"), "stress_families": ["alarm7"],
                 "ood_split": "generated:paraphrase", "probes": ["scramble_full", "drop_premise", "swap_valid_cpdag"]}
    index = build(overrides, root=tmp_path)
    assert index.is_file()
    pages = tmp_path / "_build" / "html" / "book"
    html = {name: (pages / f"{name}.html").read_text() for name in CHAPTERS}
    for name, page in html.items():
        assert "<table" in page, name
        assert "sample of 12 instances" in page, name
        assert "Traceback" not in page and "nan" not in re.sub(r"<[^>]+>", " ", page).split(), name
        assert not re.search(r">\s*\d+\.0{6}\s*<", page), name  # a seed or a count never prints as 0.000000
        check_results_before_code(name, page)
        check_captions(name, page)
        check_tables_fit(name, page)
    for name in ("01_main_results", "02_complexity", "03_ablations", "04_probes"):
        assert "data:image/png" in html[name] or ".png" in html[name], name
    main = html["01_main_results"]
    assert "86.36" in main and "74.53" in main and "75.92" in main
    assert "Verdict." in main and "Reproduce this page:" in main and "always YES (this sample)" in main
    assert "<strong>18</strong> rows" in html["05_audit"]
    assert "alarm7 Structured Thinking:" in html["02_complexity"]  # the reading's line, not the code that writes it
    assert "On <code" in html["02_complexity"] and "generated:paraphrase" in html["02_complexity"]
    assert re.search(r"swap to another valid CPDAG [+-]\d", html["04_probes"])  # a probe by its display name
    appendix = (pages / "paper_figures.html").read_text()  # a table to read: figures in words, not the CSV's keys
    figures = paper()
    assert all(f">{metric}<" in appendix for metric in figures["metric"]) and ">main_delta<" not in appendix
    assert ">13.35<" in appendix and ">2.4e-06<" in appendix  # the paper's own precision


def check_results_before_code(name: str, page: str) -> None:
    """The banner and the summary come before any code; setup and parameters cells show no code at all."""
    summary = page.index('id="summary"')
    assert page.index("This run:") < summary, name
    first_code = page.find('class="cell_input')
    assert first_code == -1 or summary < first_code, name
    assert "injected-parameters" not in page or "tag_injected-parameters" in page, name
    for cell in re.findall(r'<div class="cell tag_[^"]*remove-input[^"]*".*?</div>', page, flags=re.S):
        assert "cell_input" not in cell, name
    assert "make_setup" not in page and "setup_from_parameters" not in page, name


def check_captions(name: str, page: str) -> None:
    """Every figure is numbered and its caption says whose numbers it shows and on how many instances."""
    figures = re.findall(r"<figure.*?</figure>", page, flags=re.S)
    for figure in figures:
        caption = re.sub(r"<[^>]+>", "", re.search(r"<figcaption>(.*?)</figcaption>", figure, flags=re.S).group(1))
        assert re.search(r"Fig\. \d+", caption), (name, caption)
        assert "this run" in caption.lower() or "paper" in caption.lower(), (name, caption)
        assert re.search(r"\b\d+ (instances|hypothes[ie]s)\b|no stress set ran", caption), (name, caption)


def check_tables_fit(name: str, page: str, most: int = 9) -> None:
    """No table is wider than the page can show without scrolling: at most ``most`` columns, index included."""
    for table in re.findall(r"<table.*?</table>", page, flags=re.S):
        header = re.search(r"<tr.*?</tr>", table, flags=re.S).group(0)
        columns = sum(int(span or 1) for span in re.findall(r"<t[hd](?:[^>]*colspan=\"(\d+)\")?[^>]*>", header))
        assert columns <= most, (name, columns, header[:300])


def _printed_pages(pdf, folder):
    """Each page of ``pdf`` rendered by poppler's ``pdftoppm`` at 20 dpi in grey: ``(width, height, pixels)``."""
    import subprocess

    folder.mkdir()
    subprocess.run(["pdftoppm", "-r", "20", "-gray", str(pdf), str(folder / "page")], check=True)
    pages = []
    for path in sorted(folder.glob("page-*.pgm")):
        magic, size, depth, pixels = path.read_bytes().split(b"\n", 3)  # binary PGM: P5, "w h", 255, the bytes
        assert magic == b"P5" and depth == b"255"
        pages.append((*map(int, size.split()), pixels))
    return pages


def _lowest_mark(width, height, pixels):
    """How far down a page its lowest non-white pixel row lies, as a share of the page's height."""
    rows = [k for k in range(height) if min(pixels[k * width:(k + 1) * width]) < 230]
    return (max(rows) + 1) / height if rows else 0.0


# The tables of a page laid out for print that stick out of a box that clips them, or out of the article.
CLIPPED_TABLES = """[...document.querySelectorAll('table')].filter(table => {
  const right = table.getBoundingClientRect().right;
  for (let box = table.parentElement; box; box = box.parentElement) {
    const clips = getComputedStyle(box).overflowX !== 'visible' || box.classList.contains('bd-article');
    if (clips && right > box.getBoundingClientRect().right + 1) return true;
  }
  return false;
}).map(table => table.innerText.slice(0, 80))"""


@pytest.mark.slow
def test_the_printed_book_has_no_toggles_no_near_blank_pages_and_its_tables_fit(test_csv, tmp_path, monkeypatch):
    """Two chapters of tall outputs and wide tables printed to the PDF: no code toggle's label in its text, each
    chapter starting a page, every page written below its middle (a block pushed whole to the next page leaves the
    rest of a page blank) but one that ends a page of the book or is followed by a figure (an image is never split,
    and its caption, the next page's first text, stays with it), and no table clipped at the page edge."""
    import subprocess

    from cpdagthink.book.browser import Browser
    from cpdagthink.book.site import prepare_print
    from cpdagthink.book.build_record import METADATA_KEY

    if shutil.which("pdftoppm") is None or shutil.which("pdftotext") is None:
        pytest.skip("poppler-utils is absent: run scripts/install-system-packages.sh book")
    monkeypatch.setenv("CORR2CAUSE_CSV", str(test_csv))
    _book_root(tmp_path, ("01_main_results", "03_ablations"))
    shutil.copytree(PROJECT_ROOT / "book" / "using", tmp_path / "book" / "using")  # the intro includes a part of it
    build({"backend": "reference", "out_root": str(tmp_path / "runs"), "cache_dir": str(tmp_path / "cache")},
          only=["01", "03"], root=tmp_path)
    pdf = tmp_path / "_build" / "book.pdf"
    printed = subprocess.run(["pdftotext", str(pdf), "-"], check=True, capture_output=True, text=True).stdout
    assert "Structured Thinking" in printed and "One-factor removals" in printed
    assert "code cell" not in printed
    pages = _printed_pages(pdf, tmp_path / "pages")
    assert len(pages) > 3
    marks = [round(_lowest_mark(*page), 2) for page in pages]
    firsts = [page.strip().splitlines()[0] if page.strip() else "" for page in printed.split("\f")]
    titles = [nbformat.read(tmp_path / "book" / f"{name}.ipynb", as_version=4).cells[0].source.splitlines()[0][2:]
              for name in ("01_main_results", "03_ablations")]
    starts = [n for n, first in enumerate(firsts) if first and any(title.startswith(first) for title in titles)]
    assert len(starts) == 2, firsts  # a title may wrap: its first printed line begins it
    figures = [n for n, first in enumerate(firsts) if first.startswith("Fig. ")]
    assert all(mark > 0.5 for n, mark in enumerate(marks[:-1]) if n + 1 not in starts + figures), (marks, firsts)
    # The intro's build record: each chapter's wall time as its executed notebook recorded it.
    intro = (tmp_path / "_build" / "html" / "book" / "intro.html").read_text()
    for name in ("01_main_results", "03_ablations"):
        wall = nbformat.read(tmp_path / "book" / f"{name}.ipynb", as_version=4).metadata[METADATA_KEY]["wall_seconds"]
        shown = f"{wall:.1f} s" if wall < 120 else f"{int(wall // 60)} min {int(wall % 60)} s"
        record = intro[intro.index('id="build-record"'):]
        row = re.search(rf"<tr[^>]*>\s*<td[^>]*>(<p>)?{name}(</p>)?</td>.*?</tr>", record, flags=re.S)
        assert row and shown in row.group(0), (name, shown, row and row.group(0))
    assert "Build record" in printed
    with Browser(scripts=False) as browser:
        browser.open(tmp_path / "_build" / "singlehtml" / "index.html")
        prepare_print(browser)
        assert browser.evaluate("document.querySelectorAll('table').length") > 5
        assert browser.evaluate(CLIPPED_TABLES) == []


@pytest.mark.slow
def test_a_key_in_the_base_url_appears_in_no_artefact_of_a_book(test_csv, tmp_path, monkeypatch, capsys):
    """`book --base-url http://user:KEY@host/v1`: the key reaches the server's client and nothing else: not the
    run folders, the executed notebooks, the built site and doctrees, the console."""
    from reasoning_api_server import ReasoningAPIServer

    from cpdagthink.cli import main
    from cpdagthink.credentials import ENV_CREDENTIALS

    key = "sk-SECRETinURL4242"
    monkeypatch.setenv("CORR2CAUSE_CSV", str(test_csv))
    monkeypatch.setenv("CPDAGTHINK_OUTPUTS", str(tmp_path / "outputs"))  # the notebooks' runs and cache
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv(ENV_CREDENTIALS, "{}")
    for name in ("_config.yml", "_static", "data/paper_reported.csv", "book/intro.md"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        copy = shutil.copytree if (PROJECT_ROOT / name).is_dir() else shutil.copy
        copy(PROJECT_ROOT / name, tmp_path / name)
    (tmp_path / "_toc.yml").write_text("format: jb-book\nroot: book/intro\nchapters:\n  - file: book/01_main_results\n")
    monkeypatch.setattr("cpdagthink.book.build.build", functools.partial(build, root=tmp_path))
    with ReasoningAPIServer() as server:
        url = server.url.replace("http://", f"http://user:{key}@")
        assert main(["book", "--only", "01", "--backend", "openai", "--model", "gpt-5.4-mini", "--reasoning-effort",
                     "low", "--base-url", url]) == 0
    assert server.requests and server.rejected == 0
    console = capsys.readouterr()
    assert f'"base_url": ["{server.url}"]' in console.out and key not in console.out + console.err
    leaks = [p for p in tmp_path.rglob("*") if p.is_file() and key.encode() in p.read_bytes()]
    assert not leaks
    assert list((tmp_path / "outputs" / "runs").glob("*/config.json")) and list((tmp_path / "_build").rglob("*.doctree"))


def test_make_book_hands_each_value_to_the_command_as_data(make_argv):
    """Values with spaces, parentheses, quotes, `;`, backquotes and `$(shell ...)` reach `cpdagthink book` as the
    very words given (lists split on spaces), and neither the shell nor make runs any of them."""
    values = {"MODEL": "a (b); touch pwned-shell", "TEMPERATURE": "$(shell touch pwned-make)", "SEEDS": "0 1",
              "BACKEND_OPTIONS": "revision=$(HOME)`touch${IFS}pwned-backquote`'x'$HOME "
                                 'base_url=["http://u:k@h/v1","http://h2/v1"] max_model_len=32768'}
    argv, output = make_argv("book", "cpdagthink", values)
    assert argv == ["book", "--model", values["MODEL"], "-o", "revision=$(HOME)`touch${IFS}pwned-backquote`'x'$HOME",
                    "-o", 'base_url=["http://u:k@h/v1","http://h2/v1"]', "-o", "max_model_len=32768",
                    "--seeds", "0", "1", "--temperature", values["TEMPERATURE"]]
    assert "u:k@" not in output  # the recipe is not echoed: a value may hold a key


def test_make_book_backend_options_reach_every_chapter_as_one_parameter(make_argv, monkeypatch):
    """What `make book BACKEND_OPTIONS=...` passes, read by `book`: one `backend_options` for papermill, the
    endpoints without user info."""
    from cpdagthink.cli import book_papermill_parameters
    from cpdagthink.credentials import ENV_CREDENTIALS

    monkeypatch.setenv(ENV_CREDENTIALS, "{}")  # the user info goes there, and is removed after the test

    argv, _ = make_argv("book", "cpdagthink", {"BACKEND": "openai", "MODEL": "gpt-5.4-mini",
                                                "BACKEND_OPTIONS": "max_concurrency=16 base_url=http://u:k@h/v1"})
    given = book_papermill_parameters(argv[1:])
    assert set(given) == set(CHAPTERS)
    assert all(p["backend_options"] == {"max_concurrency": 16, "base_url": "http://h/v1"} for p in given.values())


def test_a_flag_or_option_no_chapter_declares_is_refused_naming_where_it_goes(tmp_path, capsys):
    assert main(["book", "--only", "01", "-p", "base_url=http://127.0.0.1:9/v1"]) == 2
    assert "no selected chapter takes the parameter 'base_url'" in capsys.readouterr().err
    assert main(["book", "--only", "01", "-o", "no_such_option=1"]) == 2
    assert "backend 'local' does not take no_such_option; it takes: model, n_ctx" in capsys.readouterr().err
    with pytest.raises(ValueError, match="no selected chapter takes the parameter 'regex_mode'.*-o KEY=VALUE"):
        build({"backend": "openai", "model": "m", "regex_mode": "vllm"}, only=["01"], root=tmp_path)
    assert not (tmp_path / "book").exists()


# ------------------------------------------------------------------------------------------- render from records
def _book_root(root, chapters=("01_main_results",)):
    """A book root in ``root`` holding the named chapters only."""
    for name in ("_config.yml", "_static", "data/paper_reported.csv", "book/intro.md"):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        copy = shutil.copytree if (PROJECT_ROOT / name).is_dir() else shutil.copy
        copy(PROJECT_ROOT / name, root / name)
    (root / "_toc.yml").write_text("format: jb-book\nroot: book/intro\nchapters:\n"
                                   + "".join(f"  - file: book/{c}\n" for c in chapters))


def _tripwire(tmp_path, monkeypatch):
    """From now on a machine without vLLM where no backend can be built: a PYTHONPATH entry (the notebook kernels
    inherit it) holding a ``vllm`` package whose import fails and a ``sitecustomize`` that makes building any
    backend fail. Each attempt is written to the returned log."""
    root = tmp_path / "tripwire"
    (root / "vllm").mkdir(parents=True)
    log = tmp_path / "tripwire.log"
    (root / "vllm" / "__init__.py").write_text(
        "import os\n"
        "with open(os.environ['TRIPWIRE_LOG'], 'a') as log:\n    log.write('import vllm\\n')\n"
        "raise ImportError('vLLM is not installed on this machine')\n")
    (root / "sitecustomize.py").write_text(
        "import os\n"
        "import cpdagthink.backends as backends\n\n\n"
        "def _refuse(name, **options):\n"
        "    with open(os.environ['TRIPWIRE_LOG'], 'a') as log:\n        log.write(f'make_backend {name}\\n')\n"
        "    raise RuntimeError(f'a backend was built while rendering: {name}')\n\n\n"
        "backends.make_backend = _refuse\n")
    monkeypatch.setenv("TRIPWIRE_LOG", str(log))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(root), *filter(None, [os.environ.get("PYTHONPATH")])]))
    return log


def _tree(folder):
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _outputs(path):
    """Each code cell's outputs as a page shows them: papermill's timings (cell metadata) left out, and the
    ``text/plain`` fallback of an output that has a richer form (a table's is ``<Styler at 0x...>``, a memory
    address)."""
    def shown(output):
        data = output.get("data", {})
        return {**output, "data": {k: v for k, v in data.items() if k != "text/plain" or len(data) == 1}}

    return [[shown(o) for o in c.outputs] for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code"]


@pytest.mark.slow
def test_a_chapter_made_through_the_api_renders_from_its_records_alone(test_csv, tmp_path, monkeypatch):
    """Chapter 01 made with the `openai` backend against the test server renders again, render-only, after the
    server is stopped, the key unset and the call cache deleted, to the same outputs and the same HTML page,
    with no backend built and its run folders untouched."""
    from reasoning_api_server import ReasoningAPIServer

    monkeypatch.setenv("CORR2CAUSE_CSV", str(test_csv))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-compute-only")
    _book_root(tmp_path)
    runs, cache = tmp_path / "outputs" / "runs", tmp_path / "outputs" / "cache"
    with ReasoningAPIServer() as server:
        overrides = {"backend": "openai", "model": "gpt-5.4-mini", "out_root": str(runs), "cache_dir": str(cache),
                     "backend_options": {"reasoning_effort": "low", "base_url": [server.url]}}
        build(overrides, only=["01"], root=tmp_path, parameters={"n_resamples": 200})
        assert server.requests and server.rejected == 0
    made = _outputs(tmp_path / "book" / "01_main_results.ipynb")
    page = (tmp_path / "_build" / "html" / "book" / "01_main_results.html").read_text()
    folders = _tree(runs)
    shutil.rmtree(cache)
    shutil.rmtree(tmp_path / "_build")  # a fresh build, as on another machine (Sphinx adds ?v= to a second build)
    monkeypatch.delenv("OPENAI_API_KEY")
    tripwire = _tripwire(tmp_path, monkeypatch)
    build(overrides, only=["01"], root=tmp_path, parameters={"n_resamples": 200}, render_only=True)
    assert not tripwire.exists()  # no backend built, vLLM never imported
    assert _outputs(tmp_path / "book" / "01_main_results.ipynb") == made
    assert (tmp_path / "_build" / "html" / "book" / "01_main_results.html").read_text() == page
    assert _tree(runs) == folders and not cache.exists()
    assert "gpt-5.4-mini" in page and "Responses API" in page  # the run details, from metadata.json


class _VLLMAsWritten(ReferenceBackend):
    """The vLLM backend as the runner sees it: its own ``identity``/``provenance`` methods over the attributes its
    constructor sets, with answers from the reference agent (vLLM cannot run in this environment)."""

    name = VLLMBackend.name
    preferred_chunk_size = VLLMBackend.preferred_chunk_size
    identity = VLLMBackend.identity
    provenance = VLLMBackend.provenance
    # vLLM's family answers, which decide a run's sampling and so its folder, as the kernels read them from the
    # real class (not the reference agent's: no sampling, a symbolic answerer)
    sized_by, api_slots, job_resources = VLLMBackend.sized_by, VLLMBackend.api_slots, VLLMBackend.job_resources
    model_title, check_condition = VLLMBackend.model_title, VLLMBackend.check_condition
    recommended_sampling, sends_sampling = VLLMBackend.recommended_sampling, VLLMBackend.sends_sampling
    builds_cheaply = symbolic = False

    def __init__(self, model: str, *, tensor_parallel_size: int = 2, max_model_len: int | None = 16384,
                 revision: str | None = None, reasoning_parser: str | None = None, dtype: str = "auto"):
        self.model, self.revision, self.dtype = model, revision, dtype
        self.tensor_parallel_size, self.max_model_len = tensor_parallel_size, max_model_len
        self.profile = with_overrides(profile_for(model), reasoning_parser=reasoning_parser)
        self.reasoning_parser = self.profile.reasoning_parser
        self._vllm = types.SimpleNamespace(__version__="0.33.0")
        self.thinking_supported = True  # Qwen3.5's chat template takes enable_thinking


@pytest.mark.slow
def test_a_run_folder_written_by_the_vllm_backend_renders_without_vllm(test_csv, tmp_path, monkeypatch):
    """Chapter 01's runs written through the runner as the vLLM backend writes them (identity, provenance,
    chunking) render render-only in kernels where `import vllm` fails and building any backend fails."""
    from cpdagthink.book import experiments as ex
    from cpdagthink.backends import BACKENDS

    monkeypatch.setenv("CORR2CAUSE_CSV", str(test_csv))
    _book_root(tmp_path)
    runs = tmp_path / "outputs" / "runs"
    overrides = {"backend": "vllm", "model": "Qwen/Qwen3.5-27B", "out_root": str(runs),
                 "cache_dir": str(tmp_path / "outputs" / "cache")}
    defaults = notebook_defaults(NOTEBOOKS / "01_main_results.ipynb")
    monkeypatch.setitem(BACKENDS, "vllm", _VLLMAsWritten)  # in this process only: the kernels get the real one
    setup = ex.setup_from_parameters({**defaults, **overrides})
    instances = setup.instances()
    for condition in defaults["conditions"]:
        ex.run(setup.for_run(condition, 0), instances, progress=False)
    ex.run(ex.reference_of(setup).for_run("structured", 0), instances, progress=False)
    metadata = ex.run_metadata(setup, "structured", 0, instances)
    assert metadata["backend"]["vllm"] == "0.33.0" and metadata["backend"]["thinking"] == "supported"
    assert metadata["thinking_supported"] is True
    folders = _tree(runs)
    tripwire = _tripwire(tmp_path, monkeypatch)
    build(overrides, only=["01"], root=tmp_path, parameters={"n_resamples": 200}, render_only=True)
    assert not tripwire.exists()  # vLLM never imported, no backend built
    assert _tree(runs) == folders
    page = (tmp_path / "_build" / "html" / "book" / "01_main_results.html").read_text()
    assert "Qwen/Qwen3.5-27B" in page and "backend <code class=\"docutils literal notranslate\"><span class=\"pre\">vllm" in page
    assert "sample of 4 instances" in page and "Traceback" not in page


@pytest.mark.slow
def test_render_only_fails_a_chapter_whose_runs_are_missing_in_one_line(test_csv, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("CORR2CAUSE_CSV", str(test_csv))
    monkeypatch.setenv("CPDAGTHINK_OUTPUTS", str(tmp_path / "outputs"))
    monkeypatch.setattr("cpdagthink.book.build.build", functools.partial(build, root=tmp_path))
    _book_root(tmp_path)
    assert main(["book", "--only", "01", "--render-only", "--backend", "reference"]) == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith(f"cpdagthink book: error: 01_main_results: {tmp_path / 'outputs' / 'runs'}/")
    assert "\n" not in error and "does not hold this run yet (no run folder)" in error and "make grid" in error
    assert not (tmp_path / "outputs" / "runs").exists() and "CPDAGTHINK_RENDER_ONLY" not in os.environ


HEADER3 = ("Premise: Suppose there is a closed system of 3 variables, A, B and C. All the statistical relations among "
           "these 3 variables are as follows: ")
# Rows `run` accepts and records without an answer to score against the oracle: a premise the oracle cannot
# read, a hypothesis it cannot read, and a premise no DAG satisfies.
ODD_ROWS = [HEADER3 + "A flies over B.\nHypothesis: A directly causes B.",
            HEADER3 + "A correlates with C. B correlates with C. However, A is independent of B.\nHypothesis: A whispers to B.",
            HEADER3 + "A correlates with C. B correlates with C. However, A is independent of B. A and B are independent "
                      "given C.\nHypothesis: A directly causes C."]


def odd_csv(test_csv, path):
    """A valid CSV whose rows all have three variables (no bin the paper's rule keeps) and which holds each row
    the oracle cannot label: a few real 3-variable rows, the split's positives among them, and :data:`ODD_ROWS`."""
    import csv

    rows = [r for r in csv.DictReader(test_csv.open(newline="", encoding="utf-8")) if r["num_variables"] == "3"]
    kept = [r for r in rows if r["label"] == "1"][:3] + [r for r in rows if r["label"] == "0"][:7]
    kept += [{"input": text, "label": "0", "num_variables": "3", "template": "parent"} for text in ODD_ROWS]
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=["input", "label", "num_variables", "template"])
        writer.writeheader()
        writer.writerows(kept)
    return path


@pytest.mark.slow
def test_every_chapter_builds_on_rows_the_oracle_cannot_label_and_says_what_it_left_out(test_csv, tmp_path):
    """Every chapter executes on a CSV of only three-variable rows holding an unreadable premise, an unreadable
    hypothesis and a premise no DAG satisfies (all of which `run` records and goes on with); each page counts
    the rows it left out, and chapter 06 counts them apart from its correct answers."""
    data = odd_csv(test_csv, tmp_path / "odd.csv")
    overrides = {"backend": "reference", "data": str(data), "limit": 0, "out_root": str(tmp_path / "runs"),
                 "cache_dir": str(tmp_path / "cache")}
    book = build(overrides, root=tmp_path, parameters={"n_resamples": 200}, render_book=False)
    for name in CHAPTERS:
        nb = nbformat.read(book / f"{name}.ipynb", as_version=4)
        outputs = [o for c in nb.cells for o in c.get("outputs", [])]
        assert not [o for o in outputs if o.output_type == "error"], name
        # shown markdown, and glued phrases (stored under myst-nb's prefix, pasted where the prose asks)
        text = _unescaped(" ".join(v for o in outputs for k, v in o.get("data", {}).items() if k.endswith("text/markdown")))
        assert ("Left out: 3 rows of this sample have no oracle label (1 row: no DAG satisfies the premise; 2 rows: "
                "text the oracle cannot read)") in text, name
        if name == "05_audit":  # the split's own audit leaves the same rows out, and says so
            assert "Left out: 3 rows of the split with no oracle label" in text
            assert "Left out: 2 rows of the split with no oracle label (2 rows: text the oracle cannot read)" in text
    gallery = nbformat.read(book / "06_failure_gallery.ipynb", as_version=4)
    table = " ".join(o.get("data", {}).get("text/html", "") for c in gallery.cells for o in c.get("outputs", []))
    assert re.search(r">no label</td>(\s*<td[^>]*>3</td>){3}", table)  # in each of its three conditions


def _rendered_without_sphinx(root, monkeypatch, **options):
    """:func:`render` on ``root`` with the two jupyter-book builds left out (what they are given is checked
    elsewhere): the intro's account and the marks on the chapters, in seconds."""
    monkeypatch.setattr("cpdagthink.book.build.build_html", lambda root: root / "_build" / "html" / "index.html")
    monkeypatch.setattr("cpdagthink.book.build.build_single_file", lambda root: None)
    render(root, **options)
    return _unescaped((root / "book" / "build_summary.md").read_text())


def _unescaped(source: str) -> str:
    """Markdown source without its backslash escapes, so a test can read the words it states."""
    return re.sub(r"\\(.)", r"\1", source)


def test_render_reads_only_the_chapters_of_the_toc_and_names_a_notebook_it_cannot_read(tmp_path, monkeypatch):
    _book_root(tmp_path, ("01_main_results", "04_probes"))
    _executed(tmp_path / "book" / "01_main_results.ipynb", CONFIG)
    _executed(tmp_path / "book" / "07_x.ipynb", {**CONFIG, "instances": 99})  # a stray notebook, in no toc
    summary = _rendered_without_sphinx(tmp_path, monkeypatch)
    assert "\n\n**One configuration for every chapter:**" in summary and "07" not in summary
    # a chapter of the book never executed (a build with --only, or one stopped before papermill began) is named
    assert summary.startswith("**Chapters not executed yet:** 04 probes; run `cpdagthink book --only 04`\n\n")
    (tmp_path / "book" / "04_probes.ipynb").write_text("{not json")
    with pytest.raises(ValueError, match=re.escape(str(tmp_path / "book" / "04_probes.ipynb")) + " is not a readable "
                       "notebook .*cpdagthink book --only 04"):
        render(tmp_path)


def test_a_chapter_from_another_version_is_listed_as_such_not_a_crash(tmp_path, monkeypatch):
    """A first screen without a key the intro reads (a notebook from another version of cpdagthink)."""
    _book_root(tmp_path, ("01_main_results", "04_probes"))
    _executed(tmp_path / "book" / "01_main_results.ipynb", CONFIG)
    old = {k: v for k, v in CONFIG.items() if k != "decoding"}
    _executed(tmp_path / "book" / "04_probes.ipynb", old)
    summary = _rendered_without_sphinx(tmp_path, monkeypatch)
    assert summary.startswith("**Chapters not counted here:** 04 probes: made by another version (its first "
                              "screen's 'configuration' lacks 'decoding'); run `cpdagthink book --only 04` again")
    assert "**One configuration for every chapter:**" in summary  # the readable chapter is still reported


def _interrupted(path):
    """An executed chapter whose kernel was interrupted after its first screen, as papermill leaves it: the
    running cell shows the ``KeyboardInterrupt``, the later ones are pending."""
    _executed(path, CONFIG)
    nb = nbformat.read(path, as_version=4)
    stopped = nbformat.v4.new_code_cell("ex.run(setup.for_run('structured'))", metadata={"papermill": {"status": "failed"}})
    stopped.outputs = [nbformat.v4.new_output("error", ename="KeyboardInterrupt", evalue="", traceback=[])]
    nb.cells = [nbformat.v4.new_markdown_cell("# Main results"), *nb.cells, stopped,
                nbformat.v4.new_code_cell("display(table)", metadata={"papermill": {"status": "pending"}})]
    nbformat.write(nb, path)


def test_a_half_built_book_is_refused_unless_a_partial_book_is_asked_for(tmp_path, monkeypatch, capsys):
    """A chapter executed in place and interrupted (papermill run directly, or an earlier version): its page is
    never one with results."""
    _book_root(tmp_path, ("01_main_results", "06_failure_gallery"))
    _interrupted(tmp_path / "book" / "01_main_results.ipynb")
    _executed(tmp_path / "book" / "06_failure_gallery.ipynb", CONFIG)
    monkeypatch.setattr("cpdagthink.book.build.render", functools.partial(render, root=tmp_path))
    assert main(["render"]) == 2
    error = capsys.readouterr().err
    assert ("no complete execution of 01_main_results (its execution did not finish, a cell raised KeyboardInterrupt): "
            "run `cpdagthink book --only 01` again, or pass --allow-partial") in error
    assert not (tmp_path / "book" / "build_summary.md").exists()  # nothing published
    for _ in range(2):  # rendered again: the same page, one note
        summary = _rendered_without_sphinx(tmp_path, monkeypatch, allow_partial=True)
        assert summary.startswith("**Chapters not counted here:** 01 main results: its execution did not finish, "
                                  "a cell raised KeyboardInterrupt, so it has no page with results; run `cpdagthink "
                                  "book --only 01` again")
        assert "| 06 failure gallery |" in summary and "| 01 main results |" not in summary
        page = nbformat.read(tmp_path / "book" / "01_main_results.ipynb", as_version=4)
        assert [c.cell_type for c in page.cells] == ["markdown", "markdown"]  # no result, no code
        assert _unescaped(page.cells[1].source).startswith(
            "**This chapter has no results:** its execution did not finish, a cell raised KeyboardInterrupt")
    kept = nbformat.read(tmp_path / "book" / ".01_main_results.partial.ipynb", as_version=4)  # set aside, not lost
    assert any(o.get("ename") == "KeyboardInterrupt" for c in kept.cells for o in c.get("outputs", []))
    assert main(["render"]) == 2  # its page is still no complete execution
    assert _unescaped(build_summary({}, []).source()) == "No chapter of this book has been executed yet: run `make book`."


def _book_in_subprocess(root, test_csv, limit, interrupt_when, kernel_only=False):
    """``cpdagthink book --only 01 --backend reference --limit LIMIT`` into ``root/book``, in a process group of
    its own, sent SIGINT (a Ctrl-C at the terminal) as soon as ``interrupt_when()`` is true (``kernel_only``: to
    the chapter's kernel alone); its exit status and standard error."""
    import signal
    import subprocess
    import sys
    import textwrap
    import time

    script = root / "book_here.py"
    script.write_text(textwrap.dedent(f"""
        import functools, pathlib, sys
        import cpdagthink.book.build as build
        build.build = functools.partial(build.build, root=pathlib.Path({str(root)!r}))
        from cpdagthink.cli import main
        sys.exit(main(["book", "--only", "01", "--backend", "reference", "--limit", "{limit}", "--no-build",
                       "-p", "out_root={root / 'runs'}", "-p", "cache_dir={root / 'cache'}"]))
    """))
    book = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, env={**os.environ, "CORR2CAUSE_CSV": str(test_csv)},
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert book.stdout.readline().startswith("executing 01_main_results.ipynb")
    deadline = time.monotonic() + 300
    while not interrupt_when():
        assert time.monotonic() < deadline and book.poll() is None, "the moment to interrupt never came"
        time.sleep(0.05)
    if kernel_only:
        [kernel] = [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit() and _parent(p) == book.pid
                    and b"ipykernel" in (p / "cmdline").read_bytes()]
        os.kill(kernel, signal.SIGINT)
    else:
        os.killpg(book.pid, signal.SIGINT)
    _, err = book.communicate(timeout=120)
    return book.returncode, err


def _parent(proc) -> int | None:
    """The parent process id of ``/proc/PID`` (None: it has ended meanwhile)."""
    try:
        return int((proc / "stat").read_text().rpartition(")")[2].split()[1])
    except (OSError, ValueError, IndexError):
        return None


@pytest.mark.slow
def test_ctrl_c_that_reaches_the_chapters_kernel_alone_is_one_line_too(test_csv, tmp_path):
    """The kernel, not the book's process, takes the interruption (it raises in the running cell): the same line."""
    _book_root(tmp_path)
    status, err = _book_in_subprocess(tmp_path, test_csv, 400, lambda: any((tmp_path / "runs").glob("**/records.jsonl")),
                                      kernel_only=True)
    assert status == 130 and err.strip().splitlines() == [
        "cpdagthink book: interrupted; every finished record is kept, run again to resume"], err
    assert not (tmp_path / "book" / "01_main_results.ipynb").exists()


@pytest.mark.slow
def test_ctrl_c_during_a_chapter_prints_one_clear_line_and_no_kernel_traceback(test_csv, tmp_path):
    """Ctrl-C (SIGINT to the foreground group) while a chapter's kernel runs: the console gets the command's
    own line, while the kernel's log (its traceback as its sockets are torn down) goes to a file beside it."""
    _book_root(tmp_path)
    # Interrupted once the kernel is writing the chapter's first records, not after a fixed wait: on a fast
    # machine the chapter is done within seconds and the signal would reach the jupyter-book step instead.
    status, err = _book_in_subprocess(tmp_path, test_csv, 400, lambda: any((tmp_path / "runs").glob("**/records.jsonl")))
    assert status == 130, err
    assert err.strip().splitlines() == [
        "cpdagthink book: interrupted; every finished record is kept, run again to resume"]
    assert (tmp_path / "book" / ".01_main_results.kernel.log").is_file()


def _known_book(tmp_path, structured: float, baseline: float, gallery_model: str | None = None):
    """A book of chapters 01 and 06 on 400-row runs of known answers (tests/known_answers.py): chapter 01's first
    screen records the headline its reading computes; the gallery reads the primary seed of the same runs."""
    from cpdagthink.analysis import tables
    from cpdagthink.book import readings
    from cpdagthink.causal.instance import Instance
    from known_answers import GOLD, records, right_on

    runs = {("structured", 0): records("structured", right_on(structured, 1)),
            ("baseline_enhanced", 0): records("baseline_enhanced", right_on(baseline, 2))}
    rows = [Instance(id=f"r{i}", premise="", hypothesis="", label=g, num_variables=5, template="t", split="test",
                     source="test") for i, g in enumerate(GOLD)]
    paired = tables.paired_frame(runs, "structured", ["baseline_enhanced"], n_resamples=1000)
    headline = readings.main_results(tables.scores_frame(runs), paired, rows, [0], runs).headline
    headline = dataclasses.replace(headline, answered_by="openai")
    config = {**CONFIG, "backend": "openai", "model": "Qwen/Qwen3.5-27B", "instances": 400, "positives": 200,
              "negatives": 200, "sample": "whole split", "seeds": [0, 1, 2]}
    book = tmp_path / "book"
    book.mkdir()
    _executed(book / "01_main_results.ipynb", config, headline.record())
    gallery = {**config, "seeds": [0], "model": gallery_model or config["model"]}
    _executed(book / "06_failure_gallery.ipynb", gallery, {
        "figure": "errors localised", "paper": 32.0, "value": 50.0, "ci_low": None, "ci_high": None, "unit": "",
        "verdict": "This chapter describes rather than tests: it localises 50 errors.", "paper_key": "gallery_cases",
        "causes": [], "degenerate": False})
    return build_summary(chapter_records(book)), headline


def test_the_intros_box_answers_yes_from_chapter_01s_interval_on_a_book_built_by_one_command(tmp_path):
    """92% against 75% right on 400 rows: the box says yes with the gain and its interval; the gallery reading the
    primary seed of the same runs by design does not make the book mixed."""
    box, headline = _known_book(tmp_path, 0.92, 0.75)
    text = str(box)
    assert text.startswith("Does Structured Thinking beat BaselineEnhanced on this model? Yes, on this build's "
                           f"evidence: in chapter 01, the gain of Structured Thinking over BaselineEnhanced is "
                           f"{headline.value:+.1f} pp (95% CI [{headline.ci_low:+.1f}, {headline.ci_high:+.1f}]), an "
                           "interval wholly above zero.")
    assert "chapter 06 (errors localised): this chapter describes rather than tests" in text
    assert "This book is mixed" not in text
    reference = {"figure": "the drop under the full scramble", "paper": 25.0, "value": 1.0, "ci_low": 0.0,
                 "ci_high": 2.0, "verdict": "This build makes no claim about LLMs: the symbolic reference agent ...",
                 "paper_key": "probe_full_drop", "causes": [], "degenerate": False, "answered_by": "reference"}
    _executed(tmp_path / "book" / "04_probes.ipynb", {**CONFIG, "backend": "reference"}, reference)
    assert ("chapter 04 (the drop under the full scramble, +1.0 pp (95% CI [+0.0, +2.0])): this build makes no "
            "claim about LLMs") in str(build_summary(chapter_records(tmp_path / "book")))
    assert "One configuration for every chapter: Qwen/Qwen3.5-27B (backend openai), test split, whole split, seeds " \
           "0, 1, 2 (chapter 06 reads 0)," in text


def test_the_intros_box_answers_no_for_a_method_no_better_and_a_book_of_two_models_is_mixed(tmp_path):
    box, headline = _known_book(tmp_path, 0.80, 0.80, gallery_model="another/model-9B")
    text = str(box)
    assert text.startswith("Does Structured Thinking beat BaselineEnhanced on this model? Not by the paper's margin: "
                           "in chapter 01, the gain")
    assert "an interval that contains zero and excludes the paper's +13.35 pp." in text
    assert "This book is mixed: its chapters ran with different models" in text


# How a chapter stopped by Ctrl-C reads: the signal reaches papermill's process, which then marks the cells it never
# reached "completed", and the kernel (same process group), whose running cell may raise it first.
STOPPED = r"(\d+ of \d+ code cells never ran|a cell raised KeyboardInterrupt|a cell was left running)"


@pytest.mark.slow
def test_an_interrupted_chapter_is_never_published_and_the_complete_one_it_would_replace_is_kept(
        test_csv, tmp_path, monkeypatch, capsys):
    """``cpdagthink book --only 01`` stopped by Ctrl-C mid-chapter, then ``cpdagthink render``: first with no earlier
    execution of the chapter, then with a complete one, which the interrupted rebuild leaves in place."""
    _book_root(tmp_path)
    book, partial = tmp_path / "book", tmp_path / "book" / ".01_main_results.partial.ipynb"
    monkeypatch.setenv("CORR2CAUSE_CSV", str(test_csv))
    monkeypatch.setattr("cpdagthink.book.build.render", functools.partial(render, root=tmp_path))
    monkeypatch.setattr("cpdagthink.book.build.build_html", lambda root: root / "_build" / "html" / "index.html")
    monkeypatch.setattr("cpdagthink.book.build.build_single_file", lambda root: None)
    chapter = book / "01_main_results.ipynb"

    def writing_records():  # of the 400-row sample: mid-chapter (a Ctrl-C as the kernel starts can be swallowed)
        return any((tmp_path / "runs").glob("*-n400-*/records.jsonl"))

    status, err = _book_in_subprocess(tmp_path, test_csv, 400, writing_records)
    assert status == 130, err
    assert not chapter.exists() and partial.is_file()
    capsys.readouterr()
    assert main(["render"]) == 2  # nothing to publish
    assert re.search(rf"no complete execution of 01_main_results \(its execution did not finish, {STOPPED}\): run "
                     r"`cpdagthink book --only 01` again", capsys.readouterr().err)
    assert not (book / "build_summary.md").exists()

    build({"backend": "reference", "limit": 4, "out_root": str(tmp_path / "runs"), "cache_dir": str(tmp_path / "cache")},
          only=["01"], root=tmp_path, render_book=False)
    complete = chapter.read_bytes()
    assert not partial.exists()
    for records in list((tmp_path / "runs").glob("*-n400-*/records.jsonl")):  # the first try's: a fresh start
        shutil.rmtree(records.parent)
    status, err = _book_in_subprocess(tmp_path, test_csv, 400, writing_records)  # another sample, stopped
    assert status == 130, err
    assert chapter.read_bytes() == complete and partial.is_file()
    assert main(["render"]) == 0
    assert "01_main_results: its latest execution did not finish" in capsys.readouterr().err
    summary = _unescaped((book / "build_summary.md").read_text())
    assert re.match(rf"\*\*Chapters kept from an earlier execution:\*\* 01 main results: its latest execution did not "
                    rf"finish, {STOPPED}; its page is its previous complete execution \(run `cpdagthink book --only 01` "
                    r"again to replace it\)", summary)
    assert "limit 4" in summary and "limit 400" not in summary  # the complete chapter's figures, counted


@pytest.mark.slow
def test_render_while_a_chapter_executes_says_it_is_under_way_not_stopped(test_csv, tmp_path, monkeypatch, capsys):
    _book_root(tmp_path)
    monkeypatch.setattr("cpdagthink.book.build.render", functools.partial(render, root=tmp_path))
    said = []

    def render_meanwhile():  # once the chapter's kernel writes its first records: mid-chapter
        if not any((tmp_path / "runs").glob("**/records.jsonl")):
            return False
        said.append((main(["render"]), capsys.readouterr().err))
        return True

    status, err = _book_in_subprocess(tmp_path, test_csv, 0, render_meanwhile)  # the whole split: minutes
    assert status == 130, err
    [(code, error)] = said
    assert code == 2 and "kernel was stopped" not in error
    assert re.search(r"no complete execution of 01_main_results \(its execution is still under way in process \d+\): "
                     r"wait for the execution under way to end, or pass --allow-partial", error), error


def test_what_native_code_writes_in_a_chapter_goes_to_its_kernel_log_not_its_page(tmp_path, monkeypatch):
    """A library's console line (llama.cpp's log, written by C to file descriptor 2) is not part of the chapter:
    the executed notebook keeps what Python prints and leaves the native write to ``.NN_name.kernel.log``."""
    from cpdagthink.book.build import execute

    # ipykernel never captures native writes in a kernel that inherits pytest's marker: the kernel here runs
    # as `cpdagthink book` starts it
    monkeypatch.delenv("PYTEST_CURRENT_TEST")

    notebook = tmp_path / "09_native.ipynb"
    cell = nbformat.v4.new_code_cell('import os\nos.write(2, b"native console line\\n")\nprint("the chapter\'s own")')
    parameters = nbformat.v4.new_code_cell("limit = 4", metadata={"tags": ["parameters"]})
    nbformat.write(nbformat.v4.new_notebook(cells=[parameters, cell]), notebook)
    out = tmp_path / "book"
    out.mkdir()
    executed = nbformat.read(execute(notebook, {}, out), as_version=4)
    printed = "".join(output.get("text", "") for output in executed.cells[-1].outputs)
    assert "the chapter's own" in printed
    assert "native console line" not in printed
    assert "native console line" in (out / ".09_native.kernel.log").read_text(encoding="utf-8")
