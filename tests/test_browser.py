"""The headless Chromium driver: load, evaluate, errors, screenshot and PDF, on small local pages."""

from __future__ import annotations

import struct

import pytest

from cpdagthink.book.browser import BrowserError


def page(tmp_path, body: str):
    path = tmp_path / "page.html"
    path.write_text(f"<!DOCTYPE html><html><body>{body}</body></html>", encoding="utf-8")
    return path


def test_scripts_run_and_values_come_back(browser, tmp_path):
    browser.open(page(tmp_path, "<p id='x'>static</p><script>document.getElementById('x').textContent = 'ran';</script>"))
    assert browser.evaluate("document.getElementById('x').textContent") == "ran"
    assert browser.evaluate("({a: [1, 2], b: null})") == {"a": [1, 2], "b": None}
    assert browser.evaluate("new Promise(r => setTimeout(() => r(7), 10))") == 7


def test_a_thrown_error_is_reported(browser, tmp_path):
    browser.open(page(tmp_path, "<p>x</p>"))
    with pytest.raises(BrowserError, match="boom"):
        browser.evaluate("(() => { throw new Error('boom'); })()")


def test_full_page_screenshot_covers_the_whole_page(browser, tmp_path):
    browser.open(page(tmp_path, "<div style='height:2500px;width:100px;background:#c00'></div>"))
    shot = browser.screenshot(tmp_path / "shot.png")
    header = shot.read_bytes()[:24]
    assert header[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", header[16:24])
    assert width == 1200 and height >= 2500  # beyond the 900-pixel viewport


def test_pdf(browser, tmp_path):
    browser.open(page(tmp_path, "<h1>Printed</h1>"))
    assert browser.pdf(tmp_path / "out.pdf").read_bytes()[:5] == b"%PDF-"


def test_with_scripts_off_no_script_of_the_page_runs_but_evaluate_does(tmp_path):
    from cpdagthink.book.browser import Browser, find_chromium

    if find_chromium() is None:
        pytest.skip("Chromium is absent: run scripts/install-system-packages.sh book")
    with Browser(scripts=False) as browser:
        browser.open(page(tmp_path, "<p id='x'>static</p><script>document.getElementById('x').textContent = 'ran';"
                                    "window.pwned = 1</script><img src='x' onerror='window.pwned = 2'>"
                                    "<iframe src='javascript:parent.pwned = 3'></iframe>"))
        assert browser.evaluate("[document.getElementById('x').textContent, window.pwned === undefined]") == \
            ["static", True]
        assert browser.pdf(tmp_path / "out.pdf").read_bytes()[:5] == b"%PDF-"
