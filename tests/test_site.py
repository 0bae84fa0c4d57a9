"""The HTML book's single-file print, built by Sphinx and printed by headless Chromium."""

from __future__ import annotations

import re
import shutil

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
