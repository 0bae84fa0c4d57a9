"""Kept prefixes (SmolLM2, slow): a prompt evaluated after any history, in this process or after another's
states, has a fresh context's logits, and the states kept hold one row of logits."""

from __future__ import annotations

import numpy as np
import pytest

from cpdagthink.backends.local.kept_states import KeptPrefixes
from cpdagthink.backends.local.state_store import StateStore
from cpdagthink.method.chat import Request

pytestmark = pytest.mark.slow

BATCH = 64  # a batch of this many tokens: prompts of a few batches are quick to evaluate


@pytest.fixture(scope="module")
def smol(tmp_path_factory):
    from cpdagthink.backends import make_backend

    backend = make_backend("local", model="smollm2-135m", n_ctx=1024, n_batch=BATCH,
                           cache_dir=str(tmp_path_factory.mktemp("model-cache")))
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


def test_a_prompt_after_any_history_has_the_logits_of_a_fresh_context(smol, prompts, tmp_path):
    """Each prompt's logits, evaluated after the prefix :meth:`KeptPrefixes.prepare` leaves (from the context or
    a kept state), are bit for bit those of the prompt evaluated alone; and prefixes were reused."""
    llm = smol.llm
    expected = [fresh(llm, p) for p in prompts]
    kept = KeptPrefixes(llm, StateStore(tmp_path, ["smol"], 2**30))
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
    for path in kept.store.folder.glob("*.npz"):  # a file keeps its whole batches, not the completion after them
        with np.load(path) as data:
            assert int(data["numbers"][0]) == len(data["tokens"])
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
    completions = [smol.complete(request) for request in calls]
    files = list(smol._prefixes.store.folder.glob("*.npz"))
    assert files and all(np.load(f)["scores"].shape == (1, smol.llm.n_vocab()) for f in files)
    reused = [c.meta["prompt_tokens_reused"] for c in completions]  # what each record says prefill skipped
    assert reused[0] == 0 and reused[1] >= BATCH and reused[2] >= BATCH and all(n % BATCH == 0 for n in reused)
    alone = []
    for request in calls:
        smol.reset_context()
        out = smol.complete(request)
        assert out.meta["prompt_tokens_reused"] == 0
        alone.append(out.raw)
    assert [c.raw for c in completions] == alone


def test_a_state_kept_by_another_process_restores_a_fresh_context_s_logits(smol, prompts, tmp_path):
    """States on disk outlive their process: a new :class:`KeptPrefixes` (a chapter's new kernel) with an empty
    context restores a prefix the first one kept, and its prompt's logits are a fresh context's."""
    llm = smol.llm
    longest = prompts[-1]
    other = longest[:3 * BATCH + 10] + prompts[1][:20]
    expected = fresh(llm, other)
    try:
        first = KeptPrefixes(llm, StateStore(tmp_path, ["smol"], 2**30))
        first.prepare(longest)
        llm.eval(longest[llm.n_tokens:])
        first.keep(longest)
        llm._ctx.kv_cache_clear()  # what the next process starts with
        llm.n_tokens = 0
        second = KeptPrefixes(llm, StateStore(tmp_path, ["smol"], 2**30))
        assert second.prepare(other) == 3 * BATCH
        llm.eval(other[llm.n_tokens:])
        assert np.array_equal(last_logits(llm), expected)
        assert KeptPrefixes(llm, StateStore(tmp_path, ["another build"], 2**30)).prepare(other) == 0
    finally:
        smol.reset_context()
