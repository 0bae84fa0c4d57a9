"""Jump-forward decoding: forced runs on a toy index (fast), and equality with plain constrained decoding on
SmolLM2 (slow): token for token at temperature 0, the same draws at temperature > 0."""

from __future__ import annotations

import re

import pytest
from outlines_core import Index, Vocabulary

from cpdagthink.backends import make_backend
from cpdagthink.backends.jump_forward import IndexWalker, LookupDrafter, admitted_prefix

EOS = 9
# A toy vocabulary where some positions admit one token and others several spellings of the same text.
TOY = {'{"': [3], "{": [4], '"': [5], "a": [0], "b": [1], "ab": [2], "}": [7], "x": [6]}


def toy_walker(regex: str) -> IndexWalker:
    return IndexWalker(Index(regex, Vocabulary(EOS, TOY)), EOS)


def test_forced_run_stops_where_the_constraint_admits_a_choice():
    walker = toy_walker(r'\{"ab"\}')
    start = walker.initial_state
    assert walker.allowed(start).tolist() == [3, 4]  # '{"' or '{': a choice, nothing forced
    assert walker.forced_run(start, 10) == ([], start)
    after_ab = walker.advance(walker.advance(start, 3), 2)
    run, end = walker.forced_run(after_ab, 10)
    assert run == [5, 7]  # '"' then '}' are the only tokens admitted
    assert walker.only_end(end) and walker.forced_run(end, 10) == ([], end)  # EOS is never forced


def test_forced_run_respects_the_limit_and_refuses_inadmissible_tokens():
    walker = toy_walker(r'\{"ab"\}')
    after_ab = walker.advance(walker.advance(walker.initial_state, 3), 2)
    run, state = walker.forced_run(after_ab, 1)
    assert run == [5] and walker.allowed(state).tolist() == [7]
    with pytest.raises(ValueError, match="not allowed"):
        walker.advance(walker.initial_state, 6)


def test_allowed_is_cached_and_sorted():
    walker = toy_walker(r"(x|b|a)")
    first = walker.allowed(walker.initial_state)
    assert first.tolist() == [0, 1, 6]
    assert walker.allowed(walker.initial_state) is first


def test_lookup_drafter_copies_what_followed_the_latest_matching_ngram():
    drafter = LookupDrafter([1, 2, 3, 4, 5, 9, 1, 2])
    assert drafter.propose(3) == [3, 4, 5]
    drafter.extend([3, 7, 1, 2])  # the latest "1 2" is now followed by 3 7
    assert drafter.propose(2) == [3, 7]
    assert drafter.propose(0) == [] and LookupDrafter([5, 6]).propose(4) == []


def test_admitted_prefix_cuts_a_draft_where_the_constraint_refuses_it():
    walker = toy_walker(r'\{"ab"\}')
    start = walker.initial_state
    assert admitted_prefix(walker, start, [3, 2, 5, 7, EOS]) == [3, 2, 5, 7]  # EOS is never drafted
    assert admitted_prefix(walker, start, [3, 0, 0]) == [3, 0]  # '{"a' then a second 'a' is refused
    assert admitted_prefix(walker, start, [6, 3]) == []


# ----------------------------------------------------------------------------------------- SmolLM2 (slow)
def _rows(n: int):
    from cpdagthink.conditions import CONDITIONS, Decoding, first_request
    from cpdagthink.data import load_split, sample

    decoding = Decoding(max_tokens_turn1=160, tool_choice="forced")
    return [first_request(CONDITIONS["structured"], i, decoding) for i in sample(load_split("test"), n, seed=0)]


@pytest.fixture(scope="module")
def smol_pair():
    plain = make_backend("local", model="smollm2-135m", n_ctx=4096, jump_forward=False, ram_cache_gib=0)
    jumping = make_backend("local", model="smollm2-135m", n_ctx=4096, jump_forward=True, ram_cache_gib=0)
    yield plain, jumping
    plain.close()
    jumping.close()


def _tokens(backend, raw: str) -> list[int]:
    return backend.llm.tokenize(raw.encode(), add_bos=False, special=True)


@pytest.mark.slow
def test_jump_forward_skips_forced_tokens_inside_the_constraint_deterministically(smol_pair, test_csv):
    """Not token-for-token plain decoding: llama.cpp's batched logits differ slightly from one-token steps, so
    a near-tie after a forced run may flip (the reason jump-forward is off by default, see local.py)."""

    from cpdagthink.backends.local import output_regex

    plain, jumping = smol_pair
    forced = 0
    for request in _rows(3):
        a, b = plain.complete(request), jumping.complete(request)
        assert "forced_tokens" not in a.meta
        if b.finish_reason == "stop":
            assert re.fullmatch(output_regex(request), b.raw), b.raw
        assert jumping.complete(request).raw == b.raw  # greedy jump-forward is deterministic
        forced += b.meta["forced_tokens"]
    assert forced > 0  # the runs were really skipped, not sampled


@pytest.mark.slow
def test_sampling_is_seeded_and_reproducible_with_and_without_jump_forward(smol_pair, test_csv):
    from dataclasses import replace

    plain, jumping = smol_pair
    rows = [replace(r, temperature=0.8, top_p=0.95, top_k=40, max_tokens=80) for r in _rows(3)]
    for backend in (plain, jumping):
        seed0 = [backend.complete(replace(r, seed=0)).raw for r in rows]
        assert [backend.complete(replace(r, seed=0)).raw for r in rows] == seed0
        seed1 = [backend.complete(replace(r, seed=1)).raw for r in rows]
        assert seed1 != seed0
        for raw in seed0 + seed1:  # still inside the constraint
            assert raw.startswith('<tool_call>\n{"name": "record_causal_analysis"')
