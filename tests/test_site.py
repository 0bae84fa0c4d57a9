"""The HTML book's single-file print, built by Sphinx and printed by headless Chromium."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from cpdagthink.book.site import build_single_file
from cpdagthink.paths import PROJECT_ROOT


def test_single_file_book_holds_every_chapter(browser, tmp_path):
    """The PDF from Sphinx's single-page build (``browser``: Chromium must be present, or the test skips)."""
    shutil.copy(PROJECT_ROOT / "_config.yml", tmp_path / "_config.yml")
    (tmp_path / "_toc.yml").write_text("format: jb-book\nroot: book/intro\nchapters:\n  - file: book/one\n")
    (tmp_path / "book").mkdir()
    (tmp_path / "book" / "intro.md").write_text("# Front page\n\nIntro text.\n")
    (tmp_path / "book" / "one.md").write_text("# Chapter one\n\nChapter text.\n")
    pdf = build_single_file(tmp_path)
    assert pdf == tmp_path / "_build" / "book.pdf" and pdf.read_bytes()[:5] == b"%PDF-"
    single = (tmp_path / "_build" / "singlehtml" / "index.html").read_text()
    assert "Intro text." in single and "Chapter text." in single
    stylesheets = re.findall(r'<link href="([^"?]+)[^"]*" rel="stylesheet"', single)
    assert stylesheets and all((tmp_path / "_build" / "singlehtml" / s).is_file() for s in stylesheets)


# A book of long pages in Sphinx's single page, as `make book` prints it: a front page of one paragraph, then two
# parts (a Markdown chapter, a notebook chapter with the book's hidden-input cells, an appendix). Every fifth word
# of body text is its page's word ("alderwood"), which tells which page of the book a printed page holds; every
# heading, rubric and table caption is recorded, to be found at a printed page's foot.
WORDS = "graph reads the question and answers it in two turns while the premise lists every independence".split()
CHAPTERS = {"alder": "md", "birch": "ipynb", "cedar": "md"}


def _prose(word: str, lines: int, seed: int) -> str:
    words = [f"{word}wood" if i % 5 == 0 else WORDS[(seed + i) % len(WORDS)] for i in range(lines * 12)]
    return " ".join(words).capitalize() + "."


def _table(word: str, k: int) -> str:
    """A captioned table whose rows run to three to five lines, each row's first and last words marked."""
    rows = "".join(f"| {k}.{r} | {word}wood t{k}r{r}begins {_prose(word, 2 + r % 3, r)} t{k}r{r}ends |\n"
                   for r in range(4 + k % 5))
    return f"```{{table}} {word.title()} table {k}\n| row | text |\n|---|---|\n{rows}```\n"


def _sections(word: str, k: int, headings: list[str]) -> list[str]:
    """Section ``k`` of a page as Markdown blocks: a heading, then prose, a subsection, a rubric or a captioned
    table (by ``k``), at lengths that vary so that, printed with no rule against it, some lands at a page's foot."""
    blocks = [f"## {word.title()} heading {k}", _prose(word, 1 + (k * 7) % 6, k)]
    headings += [f"{word.title()} heading {k}"]
    if k % 3 == 0:
        blocks += [f"### {word.title()} subheading {k}", f"#### {word.title()} minor {k}", _prose(word, 2 + k % 4, k)]
        headings += [f"{word.title()} subheading {k}", f"{word.title()} minor {k}"]
    if k % 3 == 1:
        blocks += [f"```{{rubric}} {word.title()} rubric {k}\n```", _prose(word, 3 + k % 3, k)]
        headings += [f"{word.title()} rubric {k}"]
    if k % 3 == 2:
        blocks += [_table(word, k)]
        headings += [f"{word.title()} table {k}"]
    return blocks


def _write_book(root: Path) -> list[str]:
    """The book's sources under ``root``; its headings, in order."""
    import nbformat
    from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

    shutil.copy(PROJECT_ROOT / "_config.yml", root / "_config.yml")
    (root / "_toc.yml").write_text("format: jb-book\nroot: book/intro\nparts:\n  - caption: Chapters\n    chapters:\n"
                                   "      - file: book/alder\n      - file: book/birch\n"
                                   "  - caption: Appendices\n    chapters:\n      - file: book/cedar\n")
    (root / "book").mkdir()
    (root / "book" / "intro.md").write_text(f"# Front page\n\n{_prose('front', 4, 0)}\n")
    headings = ["Front page"]
    for word, kind in CHAPTERS.items():
        headings.append(f"{word.title()} chapter")
        blocks = [f"# {word.title()} chapter", _prose(word, 2, 0)]
        for k in range(1, 25):
            blocks += _sections(word, k, headings)
        if kind == "md":
            (root / "book" / f"{word}.md").write_text("\n\n".join(blocks) + "\n")
            continue
        # the notebook: a hidden-input code cell after each section's prose, its output a table as pandas draws one
        cells = []
        for i, block in enumerate(blocks):
            cells.append(new_markdown_cell(block))
            if block.startswith("## "):
                cell = new_code_cell("display(table)", metadata={"tags": ["hide-input"]})
                html = "".join(f"<tr><td>{word}wood {r}</td><td>{_prose(word, 1, r)}</td></tr>"
                               for r in range(2 + i % 4))
                cell.outputs = [new_output("display_data", data={"text/html": f"<table>{html}</table>",
                                                                 "text/plain": "table"})]
                cells.append(cell)
        python = {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}}
        nbformat.write(new_notebook(cells=cells, metadata=python), root / "book" / f"{word}.ipynb")
    return headings


def _printed(pdf: Path) -> list[list[str]]:
    """The text lines of each page of ``pdf`` (poppler's ``pdftotext``; a form feed ends each page)."""
    import subprocess

    text = subprocess.run(["pdftotext", "-layout", str(pdf), "-"], check=True, capture_output=True, text=True).stdout
    return [[line.strip() for line in page.splitlines() if line.strip()] for page in text.split("\f")[:-1]]


def _misprints(pages: list[list[str]], headings: list[str]) -> tuple[list, list, list, list]:
    """What a reader of ``pages`` would find wrong: headings that end a page; pages holding two pages of the book;
    pages of the book whose title is the first line of no printed page; table rows split across two pages."""
    stranded = [(n, page[-1]) for n, page in enumerate(pages, 1) if any(page[-1].endswith(h) for h in headings)]
    shared = [(n, words) for n, page in enumerate(pages, 1)
              if len(words := {w.lower() for w in re.findall(r"(\w+)wood", " ".join(page))}) > 1]
    titles = ["Front page", *(f"{word.title()} chapter" for word in CHAPTERS)]
    unstarted = [title for title in titles if [page[0] for page in pages].count(title) != 1]
    text = [" ".join(page) for page in pages]
    rows = sorted(set(re.findall(r"t\d+r\d+", " ".join(text))))
    split = [row for row in rows
             if [f"{row}begins" in page for page in text] != [f"{row}ends" in page for page in text]]
    assert rows, "no table row was printed"
    return stranded, shared, unstarted, split


def test_each_page_of_the_book_starts_a_printed_page_and_no_heading_ends_one(browser, tmp_path):
    """The single-file print of three long pages: each starts a page of the PDF and no two share one; no heading,
    rubric or table caption is the last line of a printed page; no table row is split across two. The same single
    page printed with every break rule undone shows each of these faults, so the content can show them."""
    if shutil.which("pdftotext") is None:
        pytest.skip("poppler-utils is absent: run scripts/install-system-packages.sh book")
    from cpdagthink.book.site import prepare_print

    headings = _write_book(tmp_path)
    pdf = build_single_file(tmp_path)
    pages = _printed(pdf)
    assert len(pages) > 12
    assert _misprints(pages, headings) == ([], [], [], [])
    browser.open(tmp_path / "_build" / "singlehtml" / "index.html")
    prepare_print(browser)
    browser.evaluate("(() => { const s = document.createElement('style'); document.head.appendChild(s); "
                     "s.textContent = '* { break-before: auto !important; break-after: auto !important; "
                     "break-inside: auto !important; }'; })()")
    assert all(_misprints(_printed(browser.pdf(tmp_path / "unkept.pdf")), headings))
