"""What the local backend keeps of the prompts it evaluated, and how it reuses it so that every prompt's logits
are the ones a fresh context computes, whatever was evaluated before it.

Why reuse is aligned: llama.cpp's CPU kernels compute a token's keys and values a little differently
depending on its place in its batch (llamafile's sgemm tiles a batch's tokens, and a batch's partial tiles
take other kernels). So a prompt evaluated after a restored prefix of any length is not the prompt evaluated
from the start: on the default model, splitting a 714-token prompt at token 511 moved its last logits by up
to 0.35, at 512 by nothing, and which calls ran before a call decided its near-tied greedy tokens. Here a
prefix is reused only up to a multiple of the context's ``n_batch``, within the part of an earlier prompt that
was evaluated in whole batches, and the rest is evaluated from there in batches of ``n_batch``: the very
batches a fresh evaluation makes, so the very logits (``tests/test_kept_states.py``).
"""

from __future__ import annotations

from typing import Any, Sequence

__all__ = ["KeptPrefixes", "lean_state"]


def lean_state(llm: Any) -> Any:
    """``llm.save_state()`` holding one row of ``llm.scores`` instead of all ``n_batch`` of them.

    Those rows (n_batch x n_vocab floats: 297 MB for the default model) were copied into every kept state,
    about a second per call, and made a kept state 13 times its KV's size, which is all the RAM cache's
    capacity counts (so a chapter of 28 calls held 9 GB). Without ``logits_all`` nothing reads them: ``eval``
    does not write them, sampling reads llama.cpp's own logits, and every restore is followed by the
    evaluation of at least the prompt's last token. ``load_state`` spreads the kept row over the array. The
    KV state, the tokens and the seed are kept whole, so a restored state computes what it did before.
    """
    if llm._logits_all:
        return type(llm).save_state(llm)
    scores = llm.scores
    llm.scores = scores[:1]
    try:
        return type(llm).save_state(llm)
    finally:
        llm.scores = scores


def _shared(a: Sequence[int], b: Sequence[int]) -> int:
    """How many leading tokens ``a`` and ``b`` have in common."""
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


class KeptPrefixes:
    """The reusable prefixes of the llama.cpp context ``llm``: those its KV cache holds now, and the states
    kept in RAM (at most ``capacity_bytes`` of them; 0 keeps none), each under the tokens it holds in whole
    batches (module docstring)."""

    def __init__(self, llm: Any, capacity_bytes: int):
        import llama_cpp

        self.llm, self.block = llm, llm.n_batch
        self.kept = llama_cpp.LlamaRAMCache(capacity_bytes=capacity_bytes) if capacity_bytes > 0 else None
        self.whole = 0  # the context's leading tokens evaluated in whole batches

    def _aligned(self, n: int) -> int:
        return n // self.block * self.block

    def prepare(self, prompt: list[int]) -> int:
        """Leave in the context the longest prefix of ``prompt`` that it or a kept state holds in whole
        batches, cut to a multiple of ``n_batch`` and short of the prompt's last token (whose logits are
        needed); the number of tokens left. The caller then evaluates the rest of ``prompt``."""
        limit = self._aligned(len(prompt) - 1)
        here = self._aligned(min(_shared(self.llm._input_ids[:self.whole].tolist(), prompt), limit))
        key = self.kept._find_longest_prefix_key(tuple(prompt)) if self.kept is not None else None
        there = self._aligned(min(_shared(key, prompt), limit)) if key is not None else 0
        if there > here:
            self.llm.load_state(self.kept[key])  # the lookup also marks it as the most recently used
            here = there
        if not self.llm._ctx.kv_cache_seq_rm(-1, here, -1):  # a cache that cannot drop a tail: start afresh
            self.llm._ctx.kv_cache_clear()
            here = 0
        self.llm.n_tokens = here
        self.whole = 0  # until the rest is evaluated (:meth:`keep`)
        return here

    def keep(self, prompt: list[int]) -> None:
        """After ``prompt`` was evaluated from :meth:`prepare`'s prefix in batches of ``n_batch`` (and
        completed): note the whole batches it left in the context, and keep its state under them."""
        self.whole = self._aligned(len(prompt))
        if self.kept is not None and self.whole:
            self.kept[prompt[:self.whole]] = lean_state(self.llm)

    def forget(self) -> None:
        """The context was used otherwise (a measurement, an error mid-call): reuse nothing it holds now."""
        self.whole = 0
