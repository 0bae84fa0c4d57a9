"""Benchmark: does reusing a prompt's prefix change its logits? Split by split, and for the local backend's
aligned reuse (``backends/local/kept_states.py``).

One prompt of the book (a row's one-turn baseline, the default model) is evaluated from the start, then again
in two parts, the first part left in the KV cache and the rest evaluated after it, as a restored prefix is.
For each split point it prints the largest difference of the last logits from the whole evaluation, then the
same for the prompt evaluated after each other row's prompt through ``KeptPrefixes`` (reuse at multiples of
the batch) and after the longest shared prefix (what llama-cpp-python's own cache reuses).

    .venv/bin/python benchmarks/prefill_splits.py [--model qwen2.5-0.5b] [--row 2] [--n-batch 512]
"""

from __future__ import annotations

import argparse

import numpy as np

from cpdagthink.backends.local.kept_states import KeptPrefixes
from cpdagthink.backends.local import LocalBackend
from cpdagthink.method.conditions import CONDITIONS, first_request
from cpdagthink.method.decoding import Decoding
from cpdagthink.run.data import load_split


def last_logits(llm) -> np.ndarray:
    import llama_cpp

    return np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(llm._ctx.ctx, -1), shape=(llm.n_vocab(),)).copy()


def evaluated(llm, *parts: list[int]) -> np.ndarray:
    """The last logits of ``parts`` evaluated one after the other from an empty context."""
    llm._ctx.kv_cache_clear()
    llm.n_tokens = 0
    for part in parts:
        llm.eval(part)
    return last_logits(llm)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="qwen2.5-0.5b")
    parser.add_argument("--row", type=int, default=2, help="which of the first rows of 3 variables to evaluate")
    parser.add_argument("--n-batch", type=int, help="the batch size (default: the backend's)")
    args = parser.parse_args()
    backend = LocalBackend(args.model, kept_states_gib=0, **({"n_batch": args.n_batch} if args.n_batch else {}))
    llm = backend.llm
    rows = [i for i in load_split("test") if i.num_variables == 3][:max(4, args.row + 1)]
    prompts = [backend.tokenize(backend.render(first_request(CONDITIONS["baseline_enhanced"], row, Decoding())))
               for row in rows]
    prompt = prompts[args.row]
    whole = evaluated(llm, prompt)
    print(f"row {args.row}: {len(prompt)} tokens; batches of {llm.n_batch}; the last logits' largest difference from "
          f"the prompt evaluated whole:")
    batch = llm.n_batch
    for split in sorted({1, 4, 8, 100, batch // 2, batch - 1, batch, len(prompt) - 13, len(prompt) - 12,
                         len(prompt) - 1}):
        if 0 < split < len(prompt):
            diff = np.abs(evaluated(llm, prompt[:split], prompt[split:]) - whole).max()
            print(f"  split at {split:5d} (then {len(prompt) - split:4d} tokens): {diff:.3g}")
    kept = KeptPrefixes(llm, None)
    for k, other in enumerate(prompts):
        if k == args.row:
            continue
        shared = min(llm.longest_token_prefix(other, prompt), len(prompt) - 1)
        evaluated(llm, other)
        kept.keep(other)
        reused = kept.prepare(prompt)
        llm.eval(prompt[reused:])
        aligned = np.abs(last_logits(llm) - whole).max()
        longest = np.abs(evaluated(llm, prompt[:shared], prompt[shared:]) - whole).max()
        print(f"  after row {k} (sharing {shared} tokens): reused {reused}, difference {aligned:.3g}; "
              f"reusing all {shared}: {longest:.3g}")


if __name__ == "__main__":
    main()
