"""Benchmark: the whole `cpdagthink oracle` command against a bare Python process doing its core work.

Both run as fresh processes on the test split (median of 5 each): the command (start-up, imports, labelling,
the report, the JSONL) and a process that only imports the loader and the oracle, reads the split and labels
every row. The ratio is the command's overhead; target: within 2x.

    CORR2CAUSE_CSV=../shared/corr2cause/test.csv .venv/bin/python benchmarks/oracle_cli.py
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUNS = 5
BARE = ("from cpdagthink.run.data import load_split\n"
        "from cpdagthink.causal.oracle import label_text\n"
        "labels = [label_text(i.text).label for i in load_split('test')]\n")


def median_seconds(command: list[str], env: dict[str, str]) -> float:
    times = []
    for _ in range(RUNS):
        start = time.perf_counter()
        subprocess.run(command, check=True, env=env, cwd=ROOT, stdout=subprocess.DEVNULL)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "lib"), os.environ.get("PYTHONPATH")]))}
    with tempfile.TemporaryDirectory() as scratch:
        out = str(Path(scratch) / "oracle.jsonl")
        command = median_seconds([sys.executable, "-m", "cpdagthink", "oracle", "--split", "test", "--out", out], env)
    bare = median_seconds([sys.executable, "-c", BARE], env)
    print(f"cpdagthink oracle --split test: {command:.3f} s (median of {RUNS})")
    print(f"bare parse-and-label process:   {bare:.3f} s (median of {RUNS})")
    print(f"ratio: {command / bare:.2f}x (target: within 2x)")


if __name__ == "__main__":
    main()
