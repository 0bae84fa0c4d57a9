"""Write the generated parts of book/using/reproduce.md: the recipe table and each worked example's cost, as
``cpdagthink reproduce`` prints them now (the page cannot execute code; tests/test_reproduce_page.py checks it
is current).

    python scripts/reproduce_page.py

Needs the Corr2Cause test split ($CORR2CAUSE_CSV, or ../shared/corr2cause/test.csv beside the checkout).
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "lib"))

from cpdagthink.book.reproduce_page import PAGE, update  # noqa: E402

if __name__ == "__main__":
    print(f"{PAGE}: {'updated' if update() else 'already current'}")
