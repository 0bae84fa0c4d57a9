"""The documentation: a README a newcomer reads in minutes, and the book's part "Using cpdagthink" that holds
the rest. Every relative link and anchor of the README and the book's pages resolves in the checkout (offline:
Sphinx's linkcheck needs the network), every page ``_toc.yml`` lists exists, and every page of the part is in
it and linked from the README; the slow test builds that part with jupyter-book, warnings as errors."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from cpdagthink.book.build import PAPER_TABLE, SUMMARY
from cpdagthink.book.build_record import RECORD

ROOT = Path(__file__).parents[1]
README_LIMIT = 10_000  # bytes: what a newcomer reads first, the rest is in the book
USING = ROOT / "book" / "using"

_FENCE = re.compile(r"^(```|~~~).*?^\1", re.S | re.M)
_CODE = re.compile(r"`[^`\n]*`")
_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
_INCLUDE = re.compile(r"^```\{include\} (\S+)\n(?::start-after: (.+)\n)?(?::end-before: (.+)\n)?", re.M)


def _prose(text: str) -> str:
    """``text`` without its code (fenced blocks and inline code), where brackets are not links."""
    return _CODE.sub("", _FENCE.sub("", text))


def _slug(heading: str) -> str:
    """A heading's anchor as GitHub and MyST (``myst_heading_anchors``) make it."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    """The anchors of ``page``'s headings, and of the files it includes (MyST ``{include}``)."""
    text = page.read_text(encoding="utf-8")
    anchors = {_slug(m.group(1)) for m in re.finditer(r"^#{1,6} (.+)$", _FENCE.sub("", text), re.M)}
    for included, _, _ in _INCLUDE.findall(text):
        if (page.parent / included).is_file():
            anchors |= _anchors(page.parent / included)
    return anchors


def _included(page: Path) -> str:
    """The text ``page`` includes from other files (between the markers it names)."""
    parts = []
    for included, start, end in _INCLUDE.findall(page.read_text(encoding="utf-8")):
        if (page.parent / included).is_file():
            text = (page.parent / included).read_text(encoding="utf-8")
            text = text[text.index(start) + len(start):] if start else text
            parts.append(text[:text.index(end)] if end else text)
    return "\n".join(parts)


def _pages() -> list[Path]:
    """The documentation's pages as written (not those ``cpdagthink render`` writes into ``book/``)."""
    written = {SUMMARY, RECORD, PAPER_TABLE}
    return [ROOT / "README.md", ROOT / "benchmarks" / "README.md", *sorted((ROOT / "benchmarks" / "notes").glob("*.md")),
            *sorted((ROOT / "docs").glob("*.md")),
            *sorted(page for page in (ROOT / "book").rglob("*.md") if page.name not in written)]


def _toc_files() -> list[str]:
    files: list[str] = []

    def walk(node: object) -> None:
        if isinstance(node, dict):
            files.extend(str(node[key]) for key in ("root", "file") if key in node)
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8")))
    return files


def _broken_links(page: Path) -> list[str]:
    """Each link of ``page`` that names no file or heading; a link of a text it includes resolves from ``page``,
    as MyST resolves it."""
    broken = []
    for target in _LINK.findall(_prose(page.read_text(encoding="utf-8") + "\n" + _included(page))):
        if re.match(r"[a-z][a-z+.-]*:", target):  # https:, mailto: ...: not the checkout's
            continue
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        if not linked.exists():
            broken.append(f"{target}: no such file")
        elif anchor and (linked.suffix != ".md" or anchor not in _anchors(linked)):
            broken.append(f"{target}: no heading #{anchor}")
    return broken


def test_the_readme_is_short():
    size = len((ROOT / "README.md").read_bytes())
    assert size <= README_LIMIT, f"README.md is {size} bytes; move detail into a page of book/using/"


@pytest.mark.parametrize("page", _pages(), ids=lambda page: str(page.relative_to(ROOT)))
def test_every_relative_link_and_anchor_resolves(page):
    assert _broken_links(page) == []


def test_the_link_check_finds_a_missing_file_and_a_missing_anchor(tmp_path):
    (tmp_path / "other.md").write_text("# A title\n\n## Its section\n")
    page = tmp_path / "page.md"
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "part.md").write_text("[near](other.md)\n<!-- a:start -->\n[far](other.md)\n<!-- a:end -->\n")
    (tmp_path / "sub" / "other.md").write_text("# Beside the part\n")
    page = tmp_path / "page.md"
    page.write_text("[ok](other.md#its-section) [file](gone.md) [anchor](other.md#nowhere) `[code](gone.md)`\n"
                    "[web](https://example.org/x) [self](#local)\n\n## Local\n\n"
                    "```{include} sub/part.md\n:start-after: <!-- a:start -->\n:end-before: <!-- a:end -->\n```\n")
    assert _broken_links(page) == ["gone.md: no such file", "other.md#nowhere: no heading #nowhere"]
    (tmp_path / "other.md").unlink()  # the included link resolves from the page, as MyST resolves it
    assert "other.md: no such file" in _broken_links(page)
    assert _broken_links(tmp_path / "sub" / "part.md") == []


def test_every_page_of_the_toc_exists():
    """A page of ``book/`` is its Markdown file, or a chapter executed from ``notebooks/`` (``make book``)."""
    for entry in _toc_files():
        stem = Path(entry).with_suffix("")
        page = (ROOT / stem).with_suffix(".md")
        assert page.is_file() or (ROOT / "notebooks" / f"{stem.name}.ipynb").is_file(), entry


def test_every_using_page_is_in_the_toc_and_linked_from_the_readme():
    toc = {str(Path(entry).with_suffix("")) for entry in _toc_files()}
    readme = _LINK.findall(_prose((ROOT / "README.md").read_text(encoding="utf-8")))
    pages = sorted(USING.glob("*.md"))
    assert pages
    for page in pages:
        relative = page.relative_to(ROOT)
        assert str(relative.with_suffix("")) in toc, relative
        assert str(relative) in readme, relative


@pytest.mark.slow
def test_the_using_pages_build_with_the_book_without_a_warning(tmp_path):
    """The intro and the part "Using cpdagthink" built by jupyter-book as ``make book`` builds them, with the
    book's own configuration and warnings as errors: every page renders, every cross-page link and anchor and
    every ``{include}`` resolves. The chapters are left out (they need executed notebooks)."""
    for name in ("_config.yml", "_static", "data/paper_reported.csv", "book/intro.md", "book/paper_figures.md",
                 "book/using", "benchmarks/README.md", "benchmarks/notes"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (shutil.copytree if (ROOT / name).is_dir() else shutil.copy)(ROOT / name, tmp_path / name)
    for written in (SUMMARY, RECORD, PAPER_TABLE):  # what `cpdagthink render` writes for the intro and appendix
        (tmp_path / "book" / written).write_text("Written by the render.\n")
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    using = next(part for part in toc["parts"] if part["caption"] == "Using cpdagthink")
    toc["parts"] = [{"caption": "The paper", "chapters": [{"file": "book/paper_figures"}]}, using]
    (tmp_path / "_toc.yml").write_text(yaml.safe_dump(toc))
    command = [str(Path(sys.executable).with_name("jupyter-book")), "build", str(tmp_path), "-W", "--keep-going",
               "--quiet"]
    done = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    page = (tmp_path / "_build" / "html" / "book" / "using" / "measurements.html").read_text()
    assert "Exact jump-forward decoding" in page  # the include of its benchmark's note
    assert "how to run it" in page  # the index's table of scripts


def test_every_benchmark_note_is_dated_listed_by_the_index_and_shown_once_on_the_measurements_page():
    """A benchmark's measurements are a dated note of benchmarks/notes/: benchmarks/README.md (the index that
    says how to run each script) links it, and the page "Measurements" includes it, so a note added and
    forgotten by either fails here."""
    notes = sorted(path.name for path in (ROOT / "benchmarks" / "notes").glob("*.md"))
    assert notes and all(re.fullmatch(r"\d{4}-\d{2}-\d{2}-[a-z0-9-]+\.md", name) for name in notes), notes
    page = (USING / "measurements.md").read_text(encoding="utf-8")
    included = [Path(name).name for name, _, _ in _INCLUDE.findall(page) if "/notes/" in name]
    assert sorted(included) == notes
    index = (ROOT / "benchmarks" / "README.md").read_text(encoding="utf-8")
    assert sorted(re.findall(r"\]\(notes/([^)#]+)\)", index)) == notes
