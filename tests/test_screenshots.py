"""scripts/screenshots.py on a small built-book tree: one PNG per chapter page, the code/results order."""

from __future__ import annotations

import struct
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CELL = '<div class="cell_input" style="height:{h}px">code</div>'
OUTPUT = '<div class="cell_output" style="height:{h}px">result</div>'


def test_one_full_page_shot_per_chapter(browser, tmp_path):  # ``browser``: Chromium present (or skip/fail)
    html = tmp_path / "html"
    (html / "book").mkdir(parents=True)
    (html / "_static").mkdir()
    (html / "_static" / "theme.html").write_text("not a page")
    (html / "search.html").write_text("sphinx's")
    (html / "index.html").write_text('<meta http-equiv="Refresh" content="0; url=book/one.html" />')
    (html / "book" / "one.html").write_text(CELL.format(h=100) + OUTPUT.format(h=3000))
    (html / "book" / "three.html").write_text("<p>Verdict. nan</p><table><thead><tr><th>a</th></tr></thead></table>"
                                              + OUTPUT.format(h=50) + CELL.format(h=50))
    (html / "book" / "two.html").write_text(OUTPUT.format(h=50) + '<details>' + CELL.format(h=40) + '</details>')
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "screenshots.py"), "--html", str(html),
                           "--out", str(tmp_path / "shots"), "--width", "800"],
                          capture_output=True, text=True, check=True)
    assert sorted(p.name for p in (tmp_path / "shots").iterdir()) == ["one.png", "three.png", "two.png"]
    width, height = struct.unpack(">II", (tmp_path / "shots" / "one.png").read_bytes()[16:24])
    assert width == 800 and height >= 3100
    lines = done.stdout.splitlines()
    assert "(CODE FIRST)" in lines[0] and "one.png" in lines[0]
    assert "(results first)" in lines[1] and "verdict yes, NaN 1, header-only tables 1" in lines[1]
    assert "verdict NO, NaN 0, header-only tables 0" in lines[0]
    assert "(n/a)" in lines[2] and "first visible code at None" in lines[2]  # code collapsed in <details>
