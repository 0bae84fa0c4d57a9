"""Shared fixtures: the real Corr2Cause test split, pointed to (never copied into the project)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED_CSV = ROOT.parent / "shared" / "corr2cause" / "test.csv"


def real_test_csv() -> Path | None:
    candidate = Path(os.environ.get("CORR2CAUSE_CSV") or SHARED_CSV)
    return candidate if candidate.is_file() else None


@pytest.fixture(scope="session")
def test_csv() -> Path:
    path = real_test_csv()
    if path is None:
        pytest.skip(f"the Corr2Cause test split is absent (set CORR2CAUSE_CSV or place it at {SHARED_CSV})")
    return path


@pytest.fixture
def browser():
    """A headless Chromium page (:class:`cpdagthink.browser.Browser`). Skipped when Chromium is absent,
    except under CI (``CI`` set), where a missing browser is a failure: CI installs it."""
    from cpdagthink.browser import Browser, find_chromium

    if find_chromium() is None:
        message = "Chromium is absent: run scripts/install-browser.sh"
        if os.environ.get("CI", "").lower() not in ("", "0", "false"):
            pytest.fail(message)
        pytest.skip(message)
    with Browser(width=1200, height=900) as page:
        yield page
