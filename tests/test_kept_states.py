"""The RAM cache's kept states (SmolLM2, slow): one row of logits, and restores that compute the same."""

from __future__ import annotations

import pytest

from cpdagthink.method.chat import Request


@pytest.mark.slow
def test_a_kept_state_holds_one_logits_row_and_a_restore_from_it_computes_the_same(smol, monkeypatch):
    """The RAM cache's states leave out llama-cpp-python's n_batch rows of logits, which nothing reads: the same
    calls (the last one restored from the cache, not from the context) give the same tokens and the same KV
    state as with whole states, which hold a row per token evaluated up to n_batch."""
    import llama_cpp

    llm = smol.llm
    hello = ({"role": "user", "content": "Say hello."},)
    calls = [Request(messages=hello, max_tokens=8, thinking=False),
             Request(messages=({"role": "user", "content": "Name a colour."},), max_tokens=8, thinking=False)]
    restores = []
    monkeypatch.setattr(llm, "load_state", lambda state: restores.append(state) or type(llm).load_state(llm, state))

    def history() -> tuple[list[str], list]:
        llm.reset()
        llm.set_cache(llama_cpp.LlamaRAMCache())
        restores.clear()
        outputs = [smol.complete(request).raw for request in calls]
        again = Request(messages=(*hello, {"role": "assistant", "content": outputs[0]},
                                  {"role": "user", "content": "Again."}), max_tokens=8, thinking=False)
        outputs.append(smol.complete(again).raw)  # shares more with the first call's state than with the context
        assert len(restores) == 1
        return outputs, list(llm.cache.cache_state.values())

    lean, kept = history()
    assert all(state.scores.shape == (1, llm.n_vocab()) for state in kept)
    monkeypatch.setattr(llm, "save_state", lambda: type(llm).save_state(llm))  # llama-cpp-python's own
    whole, full = history()
    assert lean == whole
    assert [state.llama_state for state in kept] == [state.llama_state for state in full]
    assert all(state.scores.shape[0] == min(state.n_tokens, llm.n_batch) > 1 for state in full)
