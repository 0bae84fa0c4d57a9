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
