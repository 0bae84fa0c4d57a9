"""Kept prefixes (SmolLM2, slow): a prompt evaluated after any history has a fresh context's logits, and the
states kept in RAM hold one row of logits."""

from __future__ import annotations

import numpy as np
import pytest

from cpdagthink.backends.kept_states import KeptPrefixes
from cpdagthink.method.chat import Request

pytestmark = pytest.mark.slow

BATCH = 64  # a batch of this many tokens: prompts of a few batches are quick to evaluate


@pytest.fixture(scope="module")
def smol():
    from cpdagthink.backends import make_backend

    backend = make_backend("local", model="smollm2-135m", n_ctx=1024, n_batch=BATCH)
    yield backend
    backend.close()


def last_logits(llm) -> np.ndarray:
    import llama_cpp

    return np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(llm._ctx.ctx, -1), shape=(llm.n_vocab(),)).copy()


def fresh(llm, prompt: list[int]) -> np.ndarray:
    llm._ctx.kv_cache_clear()
    llm.n_tokens = 0
    llm.eval(prompt)
    return last_logits(llm)


@pytest.fixture
def prompts(smol):
    """Prompts of a few batches that share prefixes of many lengths, in an order where each is best served by
    the context, a kept state or nothing."""
    body = " ".join(f"Variable X{i} correlates with X{i + 1}." for i in range(40))
    tokens = smol.tokenize(body)
    assert smol.llm.n_batch == BATCH and len(tokens) > 4 * BATCH
    return [tokens[:150], tokens[:90] + tokens[:7], tokens[:150] + tokens[5:12], tokens[:63], tokens[:65],
            tokens[:128], tokens[:131] + tokens[:3], tokens[:100] + tokens[200:230], tokens[:4 * BATCH + 1]]


def test_a_prompt_after_any_history_has_the_logits_of_a_fresh_context(smol, prompts):
    """Each prompt's logits, evaluated after the prefix :meth:`KeptPrefixes.prepare` leaves (from the context or
    a kept state), are bit for bit those of the prompt evaluated alone; and prefixes were reused."""
    llm = smol.llm
    expected = [fresh(llm, p) for p in prompts]
    kept = KeptPrefixes(llm, 2**30)
    loads = []
    original = llm.load_state
    llm.load_state = lambda state: loads.append(state) or original(state)
    try:
        reused = []
        for prompt, logits in zip(prompts, expected):
            reused.append(kept.prepare(prompt))
            llm.eval(prompt[llm.n_tokens:])
            assert np.array_equal(last_logits(llm), logits)
            llm.eval(prompt[:5])  # a completion: tokens the next prompt must not reuse
            kept.keep(prompt)
    finally:
        llm.load_state = original
        smol.reset_context()  # the test evaluated in the backend's context behind its back
    assert all(n % llm.n_batch == 0 for n in reused) and max(reused) == 2 * BATCH and loads
    kept.forget()
    assert kept.prepare(prompts[0]) == 2 * BATCH  # from the kept state, not from the context
    assert f"batches of {BATCH} tokens" in smol.identity()["prefill"]  # the batch size decides the results


def test_kept_states_hold_one_row_of_logits_and_a_restore_computes_the_same(smol):
    """A kept state leaves out llama-cpp-python's n_batch rows of logits, which nothing reads: calls that restore
    it give the same tokens as the same calls computed fresh."""
    long = "Record the causal analysis. " * 20  # more than a batch: a prefix to reuse
    hello = ({"role": "system", "content": long}, {"role": "user", "content": "Say hello."})
    colour = ({"role": "system", "content": long}, {"role": "user", "content": "Name a colour."})
    calls = [Request(messages=m, max_tokens=8, thinking=False) for m in (hello, colour, hello)]
    smol.reset_context()
    outputs = [smol.complete(request).raw for request in calls]
    states = list(smol._prefixes.kept.cache_state.values())
    assert states and all(state.scores.shape == (1, smol.llm.n_vocab()) for state in states)
    alone = []
    for request in calls:
        smol.reset_context()
        alone.append(smol.complete(request).raw)
    assert outputs == alone
