"""Benchmark: the runner's overhead over raw llama.cpp calls, and decoding speed with and without the regex.

1. Harness overhead: the one-turn baseline through ``run_config`` (empty cache, records written) against
   ``llm.create_completion`` on the very same rendered prompts with the same decoding settings. Both start
   from a reset KV cache and see the prompts in the same order; greedy decoding makes the outputs equal,
   which is checked. Target: under 5%.
2. Structured turn 1, same prompts, same run, modes interleaved per prompt: plain constrained decoding
   (the outlines processor in llama.cpp's sampler, one token per step), jump-forward over forced tokens,
   jump-forward with verified lookup drafts, and unconstrained. Each prompt is first served once unmeasured,
   so every measured call reuses the prompt's whole batches from the KV cache (the rest, under a batch, is
   evaluated again in each mode alike) and the figures are mostly decoding speed. Reports
   tokens/s, the share of forced (and accepted drafted) tokens, and wall-time ratios to the plain path.
   First it prints the batch check of this llama.cpp build (how far batched rows are from one-token steps,
   which decides how large a batch jump-forward may evaluate) and the cold prefill time of one prompt, the
   cost side of a build without llamafile (``make llama-exact``).

3. With ``--end-to-end plain|jump-forward``, only this: turn 1 of every row, prefill included, as the book
   asks it; run it per decoder and per build and compare the totals (the printed output digest shows the
   decoders wrote the same answers).

    .venv/bin/python benchmarks/runner.py [--model qwen2.5-0.5b] [--limit 3] [--decoding-only]
    .venv/bin/python benchmarks/runner.py --end-to-end jump-forward --draft-tokens 6 --limit 8
"""

from __future__ import annotations

import argparse
import hashlib
import tempfile
import time

from cpdagthink.backends.local.kept_states import KeptPrefixes
from cpdagthink.backends.local import LocalBackend
from cpdagthink.method.conditions import CONDITIONS, first_request
from cpdagthink.method.decoding import Decoding
from cpdagthink.run.data import load_split, sample
from cpdagthink.run.config import RunConfig
from cpdagthink.run.runner import run_config


def raw_pass(backend: LocalBackend, requests) -> tuple[float, list[str]]:
    """The same prompts straight into llama.cpp: no records, no cache, no parsing; prefixes reused as the
    backend reuses them (aligned to the batch), so the two passes compute the same."""
    kept = KeptPrefixes(backend.llm, None)
    texts, start = [], time.perf_counter()
    for request in requests:
        tokens = backend.tokenize(backend.render(request))
        kept.prepare(tokens)
        out = backend.llm.create_completion(
            tokens, max_tokens=request.max_tokens, temperature=request.temperature,
            seed=request.seed, top_p=request.top_p, top_k=request.top_k, min_p=request.min_p, repeat_penalty=1.0)
        kept.keep(tokens)
        texts.append(out["choices"][0]["text"])
    return time.perf_counter() - start, texts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="qwen2.5-0.5b")
    parser.add_argument("--limit", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=Decoding().max_tokens_turn1,
                        help="turn-1 budget (default: the book's)")
    parser.add_argument("--draft-tokens", type=int, default=6, help="longest draft of the drafting mode")
    parser.add_argument("--decoding-only", action="store_true", help="skip the harness-overhead part")
    parser.add_argument("--end-to-end", choices=["plain", "jump-forward"],
                        help="only part 3: turn 1 of every row, prefill included, with this decoder")
    args = parser.parse_args()

    instances = sample(load_split("test"), args.limit, seed=0)
    if args.end_to_end:
        return end_to_end(args.model, instances, Decoding(max_tokens_turn1=args.max_tokens), args.end_to_end,
                          args.draft_tokens)
    # No kept states here: both passes must start cold and reuse prefixes the same way.
    backend = LocalBackend(args.model, kept_states_gib=0)
    decoding = Decoding(max_tokens_answer=args.max_tokens, max_tokens_turn1=args.max_tokens)
    baseline = CONDITIONS["baseline_enhanced"]
    requests = [first_request(baseline, i, decoding) for i in instances]

    if not args.decoding_only:
        harness_overhead(backend, baseline, instances, requests, decoding)
    decoding_modes(backend, instances, decoding, args.draft_tokens)


def harness_overhead(backend: LocalBackend, baseline, instances, requests, decoding: Decoding) -> None:
    backend.reset_context()
    raw_s, raw_texts = raw_pass(backend, requests)
    backend.reset_context()
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        config = RunConfig(condition=baseline.name, backend="local", decoding=decoding, cache_dir=f"{tmp}/cache",
                           chunk_size=1)
        result = run_config(config, backend, instances, f"{tmp}/run", progress=False)
        harness_s = time.perf_counter() - start
    same = [r.turns[0].raw for r in result.records] == raw_texts
    overhead = (harness_s - raw_s) / raw_s
    print(f"{len(instances)} instances, one-turn baseline, max_tokens {decoding.max_tokens_turn1}")
    print(f"raw llama.cpp: {raw_s:.2f} s; through the runner: {harness_s:.2f} s; identical outputs: {same}")
    print(f"harness overhead: {100 * overhead:+.2f}% (target < 5%: {'met' if overhead < 0.05 else 'MISSED'})")


# (label, constrained, jump_forward, draft) for the decoding comparison; the first is the reference
MODES = (("plain constrained", True, False, False), ("jump-forward", True, True, False),
         ("jump-forward + drafts", True, True, True), ("unconstrained", False, False, False))


def decoding_modes(backend: LocalBackend, instances, decoding: Decoding, draft_tokens: int) -> None:
    diffs = backend.batch_invariance()  # measured (or read from disk) before any timing
    print(f"batch check on this build ({backend.system_info.strip()}): max |logit "
          f"difference| to one-token steps by batch size " + ", ".join(f"{k}: {d:.3g}" for k, d in diffs.items())
          + f"; batches of up to {backend.batch_rows} token(s) are exact")
    prompt = backend.tokenize(backend.render(first_request(CONDITIONS["structured"], instances[0], decoding)))
    backend.llm.reset()
    start = time.perf_counter()
    backend.llm.eval(prompt)
    print(f"cold prefill of a {len(prompt)}-token turn-1 prompt: {time.perf_counter() - start:.2f} s")
    backend.reset_context()
    totals = {label: {"tokens": 0, "seconds": 0.0, "forced": 0, "drafted": 0} for label, *_ in MODES}
    texts: dict[str, list[str]] = {label: [] for label, *_ in MODES}
    for instance in instances:
        structured = first_request(CONDITIONS["structured"], instance, decoding)
        free = first_request(CONDITIONS["no_constrained_decoding"], instance, decoding)
        backend.complete(free)  # unmeasured: puts this prompt in the KV cache for every mode alike
        for label, constrained, jump, draft in MODES:
            backend.jump_forward, backend.draft_tokens = jump, draft_tokens if draft else 0
            completion = backend.complete(structured if constrained else free)
            total = totals[label]
            total["tokens"] += completion.completion_tokens
            total["seconds"] += completion.latency_s
            total["forced"] += completion.meta.get("forced_tokens", 0)
            total["drafted"] += completion.meta.get("drafted_tokens", 0)
            texts[label].append(completion.raw)
    reference = MODES[0][0]
    print(f"structured turn 1, {len(instances)} prompts, max_tokens {decoding.max_tokens_turn1}, prompt cached:")
    for label, *_ in MODES:
        t = totals[label]
        same = texts[label] == texts[reference] if label != "unconstrained" else None
        print(f"  {label:22s} {t['tokens']:5d} tokens in {t['seconds']:7.1f} s = {t['tokens'] / t['seconds']:5.2f} tok/s; "
              f"forced {100 * t['forced'] / max(t['tokens'], 1):4.1f}%, drafted {100 * t['drafted'] / max(t['tokens'], 1):4.1f}%; "
              f"time/token vs plain x{(t['seconds'] / t['tokens']) / (totals[reference]['seconds'] / totals[reference]['tokens']):.2f}"
              + ("" if same is None else f"; output identical to plain: {same}"))


def end_to_end(model: str, instances, decoding: Decoding, decoder: str, draft_tokens: int) -> None:
    """Structured turn 1 of every row in turn, as the book asks it (rows reuse the shared prompt prefix the
    context holds; no kept states, which an earlier run would have left on disk), from a cold start of the
    model; batch check done before the clock starts.
    Run once per decoder and per llama.cpp build, and compare the totals."""
    jump = decoder == "jump-forward"
    backend = LocalBackend(model, jump_forward=jump, draft_tokens=draft_tokens if jump else 0, kept_states_gib=0)
    identity = backend.identity()
    outputs, tokens, start = [], 0, time.perf_counter()
    for instance in instances:
        completion = backend.complete(first_request(CONDITIONS["structured"], instance, decoding))
        outputs.append(completion.raw)
        tokens += completion.completion_tokens
    seconds = time.perf_counter() - start
    digest = hashlib.sha256("\x00".join(outputs).encode()).hexdigest()[:16]
    print(f"end to end, {len(instances)} rows, structured turn 1, max_tokens {decoding.max_tokens_turn1}: "
          f"{seconds:.1f} s for {tokens} tokens; decoder: {identity['decoder']}; llama.cpp build: "
          f"{'stock (llamafile)' if backend.stock_build else 'without llamafile'}; "
          f"outputs sha256 {digest}")


if __name__ == "__main__":
    main()
