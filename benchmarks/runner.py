"""Benchmark: the runner's overhead over raw llama.cpp calls, and decoding speed with and without the regex.

1. Harness overhead: the one-turn baseline through ``run_condition`` (empty cache, records written) against
   ``llm.create_completion`` on the very same rendered prompts with the same decoding settings. Both start
   from a reset KV cache and see the prompts in the same order; greedy decoding makes the outputs equal,
   which is checked. Target: under 5%.
2. Tokens per second of the structured turn 1 with the schema regex and without it (same prompts).

    .venv/bin/python benchmarks/runner.py [--model qwen2.5-0.5b] [--limit 3]
"""

from __future__ import annotations

import argparse
import tempfile
import time

from cpdagthink.backends.local import LocalBackend
from cpdagthink.conditions import CONDITIONS, Decoding, first_request
from cpdagthink.data import load_split, sample
from cpdagthink.runner import run_condition


def raw_pass(backend: LocalBackend, requests) -> tuple[float, list[str]]:
    """The same prompts straight into llama.cpp: no records, no cache, no parsing."""
    backend.llm.reset()
    texts, start = [], time.perf_counter()
    for request in requests:
        out = backend.llm.create_completion(
            backend.tokenize(backend.render(request)), max_tokens=request.max_tokens, temperature=request.temperature,
            seed=request.seed, top_p=1.0, top_k=0, min_p=0.0, repeat_penalty=1.0)
        texts.append(out["choices"][0]["text"])
    return time.perf_counter() - start, texts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="qwen2.5-0.5b")
    parser.add_argument("--limit", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=256)
    args = parser.parse_args()

    instances = sample(load_split("test"), args.limit, seed=0)
    # No KV-state RAM cache here: both passes must start cold and reuse prefixes the same way.
    backend = LocalBackend(args.model, ram_cache_gib=0)
    decoding = Decoding(max_tokens_answer=args.max_tokens, max_tokens_turn1=args.max_tokens)
    baseline = CONDITIONS["baseline_enhanced"]
    requests = [first_request(baseline, i, decoding) for i in instances]

    raw_s, raw_texts = raw_pass(backend, requests)
    backend.llm.reset()
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        result = run_condition(baseline, backend, instances, f"{tmp}/run", decoding=decoding, cache_dir=f"{tmp}/cache",
                               chunk_size=1, progress=False)
        harness_s = time.perf_counter() - start
    same = [r["turns"][0]["raw"] for r in result.records] == raw_texts
    overhead = (harness_s - raw_s) / raw_s
    print(f"model {args.model}, {len(instances)} instances, one-turn baseline, max_tokens {args.max_tokens}")
    print(f"raw llama.cpp: {raw_s:.2f} s; through the runner: {harness_s:.2f} s; identical outputs: {same}")
    print(f"harness overhead: {100 * overhead:+.2f}% (target < 5%: {'met' if overhead < 0.05 else 'MISSED'})")

    structured = CONDITIONS["structured"]
    for label, condition in (("with regex", structured), ("without regex", CONDITIONS["no_constrained_decoding"])):
        tokens = seconds = 0.0
        for instance in instances:
            completion = backend.complete(first_request(condition, instance, decoding))
            tokens += completion.completion_tokens
            seconds += completion.latency_s
        print(f"structured turn 1 {label}: {tokens:.0f} tokens in {seconds:.1f} s = {tokens / seconds:.1f} tok/s "
              "(prompt prefill included)")


if __name__ == "__main__":
    main()
