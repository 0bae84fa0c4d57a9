"""Benchmark: compiling the turn-1 constraint over the whole vocabulary against over the tokens it can read.

For each variable count, the structured condition's tool-call regex (its envelope included) is compiled into
an outlines-core index both ways (`regex_indexes.compile_index`, and `Index` over every token as outlines
builds it), timed, and the two compared state for state: the same initial state, transitions and final states.

    .venv/bin/python benchmarks/regex_indexes.py [--model qwen2.5-0.5b] [--variables 2 3 4 5 6]
"""

from __future__ import annotations

import argparse
import time

import outlines
from outlines_core import Index, Vocabulary

from cpdagthink.backends.local.backend import LocalBackend, output_regex
from cpdagthink.backends.local.regex_indexes import compile_index, regex_alphabet, token_texts
from cpdagthink.method.conditions import CONDITIONS, first_request
from cpdagthink.method.decoding import Decoding
from cpdagthink.run.data import load_split


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="qwen2.5-0.5b")
    parser.add_argument("--variables", type=int, nargs="+", default=[2, 3, 4, 5, 6])
    args = parser.parse_args()
    backend = LocalBackend(args.model, n_ctx=2048, kept_states_gib=0)
    eos_id, texts = token_texts(outlines.from_llamacpp(backend.llm, chat_mode=False).tokenizer)
    rows = load_split("test")
    print(f"{args.model}: {len(texts)} token texts")
    print("| variables | regex chars | bytes it can match | tokens kept | whole vocabulary | readable tokens | speed-up | same index |")
    print("|---:|---:|---:|---:|---:|---:|---:|---|")
    for n in args.variables:
        instance = next(i for i in rows if i.num_variables == n)
        regex = output_regex(first_request(CONDITIONS["structured"], instance, Decoding()))
        alphabet = regex_alphabet(regex) or set(range(256))
        kept = sum(alphabet.issuperset(text.encode()) for text in texts)
        start = time.perf_counter()
        full = Index(regex, Vocabulary(eos_id, texts))
        whole = time.perf_counter() - start
        start = time.perf_counter()
        small = compile_index(regex, eos_id, texts)
        readable = time.perf_counter() - start
        same = (small.get_initial_state() == full.get_initial_state()
                and small.get_final_states() == full.get_final_states()
                and small.get_transitions() == full.get_transitions())
        print(f"| {n} | {len(regex)} | {len(alphabet)} | {kept} | {whole:.2f} s | {readable:.2f} s | "
              f"x{whole / readable:.1f} | {same} |", flush=True)
    backend.close()


if __name__ == "__main__":
    main()
