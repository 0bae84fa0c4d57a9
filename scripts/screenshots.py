"""Full-page PNG screenshots of every page of a built book, taken in headless Chromium.

    python scripts/screenshots.py [--html _build/html] [--out outputs/screenshots] [--width 1280]

Writes ``<page>.png`` per page (Sphinx's index, search and genindex pages are left out) and prints, per
page, where the first visible output and the first visible code cell sit (pixels from the top), so "results
before code" can be checked without opening the images, and whether the page states its verdict, shows a "nan" or a
table with a header and no rows. Chromium comes from ``scripts/install-system-packages.sh book``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "lib"))

from cpdagthink.book.browser import Browser  # noqa: E402

# index.html is only a redirect to the root chapter in a jb-book.
SKIPPED = {"index.html", "genindex.html", "search.html", "py-modindex.html"}

# The top of the first element of each kind that is actually visible: code collapsed in a <details>
# (jupyter-book's hide-input) still has a box, so checkVisibility decides.
FIRSTS = """(() => {
  const top = sel => {
    for (const e of document.querySelectorAll(sel)) {
      const box = e.getBoundingClientRect();
      const seen = e.checkVisibility({contentVisibilityAuto: true, visibilityProperty: true});
      if (seen && box.height > 0 && box.width > 0) return Math.round(box.top + window.scrollY);
    }
    return null;
  };
  const text = document.body.innerText;
  const empty = [...document.querySelectorAll('table')].filter(t => !t.querySelector('tbody tr')).length;
  return {output: top('.cell_output'), code: top('.cell_input'), height: document.body.scrollHeight,
          verdict: text.includes('Verdict.'), nan: (text.match(/\\bnan\\b/gi) || []).length, empty: empty};
})()"""


def chapter_pages(html: Path) -> list[Path]:
    """The book's content pages: every ``*.html`` of the build (chapters sit in ``book/``) but Sphinx's
    generated ones and its ``_static``/``_sources`` folders."""
    return sorted(p for p in html.rglob("*.html") if p.name not in SKIPPED
                  and not any(part.startswith("_") for part in p.relative_to(html).parts[:-1]))


def take(html: Path, out: Path, width: int = 1280) -> list[Path]:
    """One full-page PNG per chapter page of ``html`` into ``out``; the written paths."""
    pages = chapter_pages(html)
    if not pages:
        raise SystemExit(f"no pages in {html}: build the book first (make book)")
    written = []
    with Browser(width=width, height=900) as browser:
        for page in pages:
            browser.open(page)
            # Let web fonts and MathJax settle; the page's own load event fired already.
            browser.evaluate("document.fonts.ready.then(() => new Promise(r => setTimeout(r, 300)))")
            where = browser.evaluate(FIRSTS)
            shot = browser.screenshot(out / f"{page.stem}.png", max_height=30000)  # chapters have unique stems
            written.append(shot)
            order = ("n/a" if where["output"] is None or where["code"] is None
                     else "results first" if where["output"] < where["code"] else "CODE FIRST")
            print(f"{shot}  height {where['height']}px  first output at {where['output']}, "
                  f"first visible code at {where['code']}  ({order}); verdict {'yes' if where['verdict'] else 'NO'}, "
                  f"NaN {where['nan']}, header-only tables {where['empty']}", flush=True)
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--html", type=Path, default=ROOT / "_build" / "html", help="the built book")
    parser.add_argument("--out", type=Path, default=ROOT / "outputs" / "screenshots")
    parser.add_argument("--width", type=int, default=1280, help="viewport width in CSS pixels")
    args = parser.parse_args()
    take(args.html, args.out, args.width)


if __name__ == "__main__":
    main()
