"""Benchmark: the default local model on a quiet machine and beside one CPU-bound process, with and without
``share_cores`` (lib/cpdagthink/backends/local/core_share.py).

Each measurement is one ``cpdagthink run --backend local --condition baseline_enhanced --limit 2`` (96-token budgets) in its own
process with a fresh cache and run folder (model loading included), the neighbour a Python loop that never
sleeps, started before the run and killed after it. The four figures (median of ``--repeats`` runs each):
the earlier setting (``-o share_cores=false``: llama.cpp's threads always ``n_threads``, spinning at their
barriers) quiet and beside the neighbour, and the default (threads shrink to the cores the neighbour leaves)
quiet and beside it. Targets: beside one CPU-bound process at most 2.5 x the quiet time; the default's quiet time
within 5% of the earlier setting's. The runs' answers are compared too: the same text whatever the threads.

    .venv/bin/python benchmarks/busy_machine.py [--repeats 3] [--limit 2]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SETTINGS = {"earlier (share_cores=false)": ["-o", "share_cores=false"], "default (share_cores)": []}


def _run(options: list[str], limit: int, neighbour: bool, work: Path) -> tuple[float, str]:
    """Seconds for one run in its own process, and a digest of its answers' text."""
    folder = Path(tempfile.mkdtemp(dir=work))
    command = [sys.executable, "-m", "cpdagthink", "run", "--backend", "local", "--condition", "baseline_enhanced",
               "--limit", str(limit), "--max-tokens-turn1", "96", "--max-tokens-answer", "96", "--cache", str(folder / "cache"), "--out", str(folder / "run"), *options]
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if neighbour else None
    try:
        start = time.perf_counter()
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        seconds = time.perf_counter() - start
    finally:
        if spinner is not None:
            spinner.kill()
            spinner.wait()
    records = sorted((json.loads(line) for line in (folder / "run" / "records.jsonl").open()), key=lambda r: r["id"])
    texts = json.dumps([[turn["raw"] for turn in record["turns"]] for record in records])
    return seconds, hashlib.sha256(texts.encode()).hexdigest()[:12]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--limit", type=int, default=2)
    args = parser.parse_args()
    print(f"{os.cpu_count()} CPUs, load average before {os.getloadavg()[0]:.2f}", flush=True)
    times: dict[tuple[str, bool], list[float]] = {}
    digests = set()
    with tempfile.TemporaryDirectory() as work:
        for _ in range(args.repeats):  # interleaved, so a drift in the machine's speed falls on every setting
            for name, options in SETTINGS.items():
                for neighbour in (False, True):
                    seconds, digest = _run(options, args.limit, neighbour, Path(work))
                    times.setdefault((name, neighbour), []).append(seconds)
                    digests.add(digest)
    print("| setting | quiet | beside one CPU-bound process | ratio |\n|---|---:|---:|---:|")
    for name in SETTINGS:
        quiet, busy = (statistics.median(times[(name, n)]) for n in (False, True))
        print(f"| {name} | {quiet:.1f} s | {busy:.1f} s | {busy / quiet:.2f} |")
    earlier, default = (statistics.median(times[(name, False)]) for name in SETTINGS)
    print(f"default quiet / earlier quiet: {default / earlier:.3f}; answers alike in every run: {len(digests) == 1}")
    print(f"load average after {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
