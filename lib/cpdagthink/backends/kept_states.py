"""What llama-cpp-python's RAM cache keeps of a prompt: its KV state, without the logits no call reads."""

from __future__ import annotations

from typing import Any

__all__ = ["lean_state"]


def lean_state(llm: Any) -> Any:
    """``llm.save_state()`` holding one row of ``llm.scores`` instead of all ``n_batch`` of them.

    Those rows (n_batch x n_vocab floats: 297 MB for the default model) were copied into every state the RAM
    cache keeps, about a second per call, and made a kept state 13 times its KV's size, which is all the cache's
    capacity counts (so a chapter of 28 calls held 9 GB). Without ``logits_all``
    nothing reads them: ``eval`` does not write them, sampling reads llama.cpp's own logits, and every
    restore is followed by the evaluation of at least the prompt's last token (``create_completion``, and
    :func:`.jump_forward.prefill`). ``load_state`` spreads the kept row over the array. The KV state, the
    tokens and the seed are kept whole, so a restored state computes what it did before.
    """
    if llm._logits_all:
        return type(llm).save_state(llm)
    scores = llm.scores
    llm.scores = scores[:1]
    try:
        return type(llm).save_state(llm)
    finally:
        llm.scores = scores
