"""What the local backend keeps of the prompts it evaluated, and how it reuses it so that every prompt's logits
are the ones a fresh context computes, whatever was evaluated before it.

Why reuse is aligned: llama.cpp's CPU kernels compute a token's keys and values a little differently
depending on its place in its batch (llamafile's sgemm tiles a batch's tokens, and a batch's partial tiles
take other kernels). So a prompt evaluated after a restored prefix of any length is not the prompt evaluated
from the start: on the default model, splitting a 714-token prompt at token 511 moved its last logits by up
to 0.35, at 512 by nothing, and which calls ran before a call decided its near-tied greedy tokens. Here a
prefix is reused only up to a multiple of the context's ``n_batch``, within the part of an earlier prompt that
was evaluated in whole batches, and the rest is evaluated from there in batches of ``n_batch``: the very
batches a fresh evaluation makes, so the very logits (``tests/test_kept_states.py``). The states are kept on
disk (:mod:`.state_store`), so every process of the same model and build reuses them.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .state_store import StateStore, shared_prefix

__all__ = ["KeptPrefixes", "lean_state"]


def lean_state(llm: Any) -> Any:
    """``llm.save_state()`` holding one row of ``llm.scores`` instead of all ``n_batch`` of them.

    Those rows (n_batch x n_vocab floats: 297 MB for the default model at batches of 512) would be copied
    into every kept state, about a second per call, and make it many times its KV's size. Without
    ``logits_all`` nothing reads them: ``eval`` does not write them, sampling reads llama.cpp's own logits,
    and every restore is followed by the evaluation of at least the prompt's last token. ``load_state`` spreads the kept row over the array. The
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


class KeptPrefixes:
    """The reusable prefixes of the llama.cpp context ``llm``: those its KV cache holds now, and the states kept
    in ``store`` (None: none), each under the tokens it holds in whole batches (module docstring)."""

    def __init__(self, llm: Any, store: StateStore | None):
        self.llm, self.block, self.store = llm, llm.n_batch, store
        self.whole = 0  # the context's leading tokens evaluated in whole batches
        self.fresh = False  # the next prompt reuses nothing (:meth:`forget`)

    def _aligned(self, n: int) -> int:
        return n // self.block * self.block

    def prepare(self, prompt: list[int]) -> int:
        """Leave in the context the longest prefix of ``prompt`` that it or a kept state holds in whole
        batches, cut to a multiple of ``n_batch`` and short of the prompt's last token (whose logits are
        needed); the number of tokens left. The caller then evaluates the rest of ``prompt``."""
        import llama_cpp

        limit = self._aligned(len(prompt) - 1)
        tokens = np.asarray(prompt, dtype=np.int32)
        here = self._aligned(min(shared_prefix(self.llm._input_ids[:self.whole], tokens), limit))
        found = self.store.longest(prompt) if self.store is not None and not self.fresh else None
        there = self._aligned(min(found[1], limit)) if found is not None else 0
        if there > here:
            state = self.store.load(found[0], llama_cpp.LlamaState)
            if state is not None:
                self.llm.load_state(state)
                here = there
        if not self.llm._ctx.kv_cache_seq_rm(-1, here, -1):  # a cache that cannot drop a tail: start afresh
            self.llm._ctx.kv_cache_clear()
            here = 0
        self.llm.n_tokens = here
        self.whole, self.fresh = 0, False  # until the rest is evaluated (:meth:`keep`)
        return here

    def keep(self, prompt: list[int]) -> None:
        """After ``prompt`` was evaluated from :meth:`prepare`'s prefix in batches of ``n_batch`` (and
        completed): note the whole batches it left in the context, and keep its state under them."""
        self.whole = self._aligned(len(prompt))
        if self.store is None or not self.whole or self.store.covered(prompt[:self.whole]):
            return
        # Nothing reuses the tokens past the whole batches (the completion was decoded a token at a time):
        # dropping them first keeps only the reusable KV, a smaller file.
        if self.llm._ctx.kv_cache_seq_rm(-1, self.whole, -1):
            self.llm.n_tokens = self.whole
        self.store.save(prompt[:self.whole], lean_state(self.llm))

    def forget(self, *, states: bool = False) -> None:
        """The context was used otherwise (a measurement, an error mid-call): reuse nothing it holds now; with
        ``states``, nor any kept state for the next prompt (a measurement from an empty context)."""
        self.whole = 0
        self.fresh = states
