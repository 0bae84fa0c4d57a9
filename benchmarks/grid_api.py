"""Benchmark: a grid of several cells through the Snakemake workflow against an API server with a fixed latency.

The test server (``tests/reasoning_api_server.py``, in its own process as in ``api_throughput.py``) answers
every call after ``--latency`` seconds. ``snakemake runs`` (workflow/Snakefile, local executor, ``--cores 2``)
computes chapter 01's grid on the OpenAI backend (gpt-5.4-mini, effort low, concurrency 5): its four conditions
on ``--limit`` rows, one plan group, so one job. Reported: the calls made (the fresh cache's entries), the
ideal wall time ``calls x latency / concurrency``, and against it the group job's wall time (Snakemake's
``benchmark`` file: the job's process, start-up and planning included) and the whole ``snakemake`` command's
(its own start-up and planning too). Goal: <= 1.15.

    .venv/bin/python benchmarks/grid_api.py [--limit 100] [--latency 2.0]
"""

from __future__ import annotations

import argparse
import csv
import json
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))

from api_throughput import serve  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=100, help="rows per cell")
    parser.add_argument("--latency", type=float, default=2.0,
                        help="seconds the server takes per call (a reasoning model takes seconds)")
    args = parser.parse_args()

    ours, theirs = multiprocessing.Pipe()
    server = multiprocessing.Process(target=serve, args=(args.latency, theirs), daemon=True)
    server.start()
    url = ours.recv()
    with tempfile.TemporaryDirectory() as tmp:
        outputs = Path(tmp) / "outputs"
        env = {**os.environ, "CPDAGTHINK_OUTPUTS": str(outputs)}
        env.pop("OPENAI_API_KEY", None)
        config = ["backend=openai", "model=gpt-5.4-mini", f"backend_options=reasoning_effort=low base_url={url}",
                  f"limit={args.limit}", "sample_variables=null", "only=[01]", "include_reference=false"]
        command = [sys.executable, "-m", "snakemake", "runs", "--snakefile", str(ROOT / "workflow" / "Snakefile"),
                   "--directory", tmp, "--cores", "2", "--resources", "api_slots=1", "--config", *config]
        start = time.perf_counter()
        done = subprocess.run(command, env=env, capture_output=True, text=True)
        wall = time.perf_counter() - start
        if done.returncode:
            sys.exit(f"snakemake failed:\n{done.stdout[-2000:]}{done.stderr[-3000:]}")
        (measured,) = (outputs / "plan").glob("*.benchmark.tsv")
        job = float(next(csv.DictReader(measured.open(), delimiter="\t"))["s"])
        calls = sum(1 for _ in (outputs / "cache").rglob("*.json"))
        records = [json.loads(line) for f in (outputs / "runs").glob("*/records.jsonl")
                   for line in f.read_text().splitlines()]
    ours.send("done")
    server.join(timeout=10)
    ideal = calls * args.latency / 5
    rejected = sum(1 for r in records if any(t.get("rejected") for t in r["turns"]))
    print(f"chapter 01's grid: {len(records)} records in 4 cells of {args.limit} rows, {calls} calls, latency "
          f"{args.latency} s, concurrency 5; rejected {rejected}")
    print(f"ideal {ideal:.1f} s; group job {job:.1f} s, ratio {job / ideal:.3f}; whole snakemake {wall:.1f} s, "
          f"ratio {wall / ideal:.3f} (goal <= 1.15)")


if __name__ == "__main__":
    main()
