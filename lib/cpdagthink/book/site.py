"""The HTML book and its single-file print, built from notebooks already executed (``jupyter-book`` and
headless Chromium; :func:`cpdagthink.book.build.render` calls both)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from ..errors import CpdagthinkError
from ..paths import NEEDS_CHECKOUT, PROJECT_ROOT


class CheckoutError(CpdagthinkError, FileNotFoundError):
    """The book's sources are absent: an installed wheel ships the package, not the notebooks or ``_toc.yml``."""


def require_checkout(*paths: Path) -> None:
    """Stop before any work when one of the book's sources is missing, naming it and what works where
    (:data:`~cpdagthink.paths.NEEDS_CHECKOUT`); otherwise papermill or jupyter-book would fail on it later, or no
    chapter would be selected at all (``plan`` would list none)."""
    missing = [str(path) for path in paths if not path.exists()]
    if missing:
        raise CheckoutError(f"{', '.join(missing)} is missing: {NEEDS_CHECKOUT}")


def build_html(root: Path = PROJECT_ROOT) -> Path:
    """``jupyter-book build`` on the root (notebooks are already executed; execution is off)."""
    require_checkout(root / "_toc.yml")
    command = [str(Path(sys.executable).with_name("jupyter-book")), "build", str(root), "--quiet"]
    subprocess.run(command, check=True, cwd=root)
    index = root / "_build" / "html" / "index.html"
    if not index.is_file():
        raise RuntimeError(f"jupyter-book finished but {index} is missing")
    return index


# For print: no navigation; code wrapped (a long line would shrink every page to fit it); a code cell's toggle
# left out with the code it hides (print has no click, and the page's scripts are off); tables in smaller type,
# free to continue on the next page with their header repeated, and never clipped by a scrolling box; a block
# kept on one page only when :data:`PRINT_LAYOUT` marks it so. Each page of the book (the intro, a chapter, an
# appendix) starts a printed page: in Sphinx's single page a page's top section follows the empty span that marks
# its document. No heading ends a printed page: Chromium honours break-after: avoid after prose, tables, notebook
# cells, admonitions and figures alike; it is set on h5 and h6 too, as the single page demotes a chapter's
# headings one level (its "####" is an h5), and on a table's caption and a rubric, each of which heads what
# follows it (without it either is left at a page's foot: tests/test_site.py).
PRINT_STYLE = """
.bd-header, .bd-sidebar-primary, .bd-sidebar-secondary, .skip-link, .header-article, .bd-footer,
.prev-next-area, .bd-header-announcement, #pst-back-to-top { display: none !important; }
.bd-article-container, .bd-content, .bd-main, .bd-page-width { max-width: 100% !important; }
pre { white-space: pre-wrap !important; overflow-wrap: anywhere; }
details.above-input, details.below-input { display: none !important; }
.bd-main .bd-content table, table { break-inside: auto !important; font-size: 0.8em; }
thead { display: table-header-group; }
tr, img { break-inside: avoid; }
div.cell_output, div.output, div.output_html, .pst-scrollable-table-container, .table-wrapper,
.bd-article, .bd-article-container { overflow: visible !important; }
th { overflow-wrap: normal !important; word-break: normal !important; hyphens: manual !important; }
span[id^="document-"] + section { break-before: page; }
h1, h2, h3, h4, h5, h6, caption, p.rubric { break-after: avoid; }
.cpdagthink-print-together { break-inside: avoid !important; }
"""

# Run on the page laid out for print (:meth:`Browser.emulate_print`), its value the page height in CSS pixels:
# a figure is kept on one page with its caption where it fits one, a cell, table or admonition only when it is
# at most a third of a page tall (a taller one pushed whole to the next page would leave most of this one
# blank), and a table wider than its column is scaled down to fit it.
PRINT_LAYOUT = """(page => {
  const keep = (selector, most) => document.querySelectorAll(selector).forEach(block => {
    if (block.getBoundingClientRect().height <= most) block.classList.add('cpdagthink-print-together');
  });
  keep('figure', page);
  keep('div.cell_input, div.cell_output, table, .admonition', page / 3);
  for (const table of document.querySelectorAll('table')) {
    const room = table.parentElement.clientWidth;
    if (table.scrollWidth > room) table.style.zoom = room / table.scrollWidth;
  }
})"""


def prepare_print(browser: Any) -> None:
    """Make the page open in ``browser`` (a :class:`browser.Browser`) ready to print: laid out as printed, its
    fonts loaded, :data:`PRINT_STYLE` added and :data:`PRINT_LAYOUT` applied."""
    from .browser import PRINT_AREA

    browser.emulate_print()
    browser.evaluate("document.fonts.ready.then(() => { const s = document.createElement('style'); "
                     f"s.textContent = {json.dumps(PRINT_STYLE)}; document.head.appendChild(s); }})")
    browser.evaluate(f"{PRINT_LAYOUT}({PRINT_AREA[1]})")


def build_single_file(root: Path = PROJECT_ROOT) -> Path:
    """The whole book as one file: Sphinx's ``singlehtml`` build (all chapters on one page, offline) printed
    to ``_build/book.pdf`` by headless Chromium. jupyter-book's own ``--builder pdfhtml`` cannot run here: it
    launches Playwright's browser, which Playwright downloads, and takes no path to Debian's ``chromium``.
    Without Chromium (``scripts/install-system-packages.sh book``) the result is the single HTML page (it
    needs its ``_static`` folder beside it) and a note says so; the PDF then is one print from a browser away."""
    import yaml

    from .browser import Browser, find_chromium

    command = [str(Path(sys.executable).with_name("jupyter-book")), "build", str(root), "--builder", "singlehtml",
               "--quiet"]
    subprocess.run(command, check=True, cwd=root)
    toc_root = yaml.safe_load((root / "_toc.yml").read_text())["root"]
    page = root / "_build" / "singlehtml" / f"{Path(toc_root).with_suffix('')}.html"
    if not page.is_file():
        raise RuntimeError(f"jupyter-book finished but {page} is missing")
    # Sphinx writes the page where the root document sits (book/intro.html) but links its styles and images
    # as from the build's top folder; at the top, in place of index.html's redirect, they resolve.
    single = root / "_build" / "singlehtml" / "index.html"
    single.write_text(page.read_text(encoding="utf-8"), encoding="utf-8")
    if find_chromium() is None:
        print(f"single-page book: {single} (no PDF: Chromium is absent; run scripts/install-system-packages.sh book)")
        return single
    pdf = root / "_build" / "book.pdf"
    # Printed with every script of the page off: the print is of static HTML (tables, images, the explorer's
    # printed cases), and no script, whoever wrote it, can change what the PDF says.
    with Browser(scripts=False) as browser:
        browser.open(single)
        prepare_print(browser)
        browser.pdf(pdf)
    print(f"single-file book: {pdf} (single page: {single})")
    return pdf
