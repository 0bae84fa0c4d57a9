"""Benchmark: the golden tables of the reference agent on the whole test split (1162 rows, 7 conditions and 5
probes), compared with ``tests/golden/reference_full_split.json``; prints the wall time and every table that
differs, and exits 1 when one does.

``make test`` checks the same tables on a representative subset (``tests/test_golden.py``). With
``--write-subset`` this script rewrites that subset's golden file, ``tests/golden/reference_subset.json``, and
only when the whole split matched in the same run, so the subset's numbers come from code that reproduces the
full split's.

    CORR2CAUSE_CSV=../shared/corr2cause/test.csv .venv/bin/python benchmarks/golden.py [--write-subset]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from test_golden import FULL_SPLIT, SUBSET, TABLES, golden_tables, reference_setup, representative  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write-subset", action="store_true",
                        help=f"after a full-split match, rewrite {SUBSET.relative_to(SUBSET.parents[2])}")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="golden-") as root:
        setup = reference_setup(Path(root))
        instances = setup.instances()
        start = time.perf_counter()
        now = golden_tables(setup, instances)
        print(f"whole split: {len(instances)} rows, 12 runs, {time.perf_counter() - start:.1f} s")
        golden = json.loads(FULL_SPLIT.read_text())
        differing = [t for t in TABLES if now[t] != golden[t]]
        for table in differing:
            print(f"DIFFERS from {FULL_SPLIT.name}: {table}")
        if differing:
            return 1
        print(f"every table equals {FULL_SPLIT.name}")
        if args.write_subset:
            subset = representative(instances)
            start = time.perf_counter()
            tables = golden_tables(setup, subset)
            print(f"subset: {len(subset)} rows, {time.perf_counter() - start:.1f} s")
            SUBSET.write_text(json.dumps({"ids": [i.id for i in subset], **tables}, indent=1, sort_keys=True) + "\n")
            print(f"wrote {SUBSET}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
