"""Benchmark: API throughput through the runner against a server with a fixed latency per call.

A local reasoning-model API server (``tests/reasoning_api_server.py``: the documented request rules, answers
from the reference backend) on 127.0.0.1 answers every call after ``--latency`` seconds. A condition runs
over the test split through :func:`cpdagthink.run.runner.run_config` with the OpenAI backend at concurrency
``--concurrency`` and the backend's chunk size, through the Responses API (the profile's choice for gpt-5-mini)
or chat completions (``--api chat``). Reported: wall time against the ideal, ``calls x latency /
concurrency``; goal <= 1.15.

    .venv/bin/python benchmarks/api_throughput.py [--condition structured] [--limit 0] [--latency 0.5] [--api chat]
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from reasoning_api_server import ReasoningAPIServer  # noqa: E402

from cpdagthink.backends import make_backend  # noqa: E402
from cpdagthink.method.conditions import CONDITIONS  # noqa: E402
from cpdagthink.run.data import load_split  # noqa: E402
from cpdagthink.run.config import RunConfig  # noqa: E402
from cpdagthink.run.runner import run_config  # noqa: E402


def serve(latency_s: float, pipe) -> None:
    """The server in its own process, so its work does not compete with the runner for the GIL."""
    with ReasoningAPIServer(latency_s=latency_s) as server:
        pipe.send(server.url)
        pipe.recv()  # until the benchmark is done


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--condition", default="structured", choices=sorted(CONDITIONS))
    parser.add_argument("--limit", type=int, default=0, help="instances (0: the whole test split, 1162)")
    parser.add_argument("--latency", type=float, default=0.5, help="seconds the server takes per call")
    parser.add_argument("--concurrency", type=int, default=5)
    parser.add_argument("--chunk-size", type=int, default=0, help="0: the backend's preferred chunk size")
    parser.add_argument("--api", choices=["chat", "responses"], default="responses")
    args = parser.parse_args()

    instances = load_split("test")
    if args.limit:
        instances = instances[: args.limit]
    ours, theirs = multiprocessing.Pipe()
    server = multiprocessing.Process(target=serve, args=(args.latency, theirs), daemon=True)
    server.start()
    url = ours.recv()
    with tempfile.TemporaryDirectory() as tmp:
        # effort "low": the server's simulated reasoning (128 tokens) leaves room in the default answer budget
        backend = make_backend("openai", model="gpt-5-mini", base_url=url, max_concurrency=args.concurrency,
                               reasoning_effort="low", api_key_env="CPDAGTHINK_BENCH_NO_KEY", api=args.api)
        chunk = args.chunk_size or backend.preferred_chunk_size
        start = time.perf_counter()
        config = RunConfig(condition=args.condition, backend="openai", model="gpt-5-mini", cache_dir=f"{tmp}/cache",
                           chunk_size=chunk)
        result = run_config(config, backend, instances, f"{tmp}/run", progress=False)
        wall = time.perf_counter() - start
        backend.close()
    ours.send("done")
    server.join(timeout=10)
    calls = result.model_calls
    ideal = calls * args.latency / args.concurrency
    rejected = sum(r.rejected for r in result.records)
    correct = sum(r.prediction == r.oracle_label for r in result.records)
    print(f"{args.condition} ({args.api}): {len(result.records)} instances, {calls} calls, latency {args.latency} s, "
          f"concurrency {args.concurrency}, chunk {chunk}; rejected {rejected}, answers equal to the oracle {correct}")
    print(f"wall {wall:.1f} s, ideal {ideal:.1f} s, ratio {wall / ideal:.3f} (goal <= 1.15)")


if __name__ == "__main__":
    main()
