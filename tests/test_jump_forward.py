"""Jump-forward decoding: forced runs, drafts and draft lengths on toy inputs (fast); on real models (slow)
the batch check of the installed llama.cpp build, and output token for token that of plain constrained
decoding at temperature 0 (with drafts wherever the build computes batches exactly), seeded draws above."""

from __future__ import annotations

import json
import re

import pytest
from outlines_core import Index, Vocabulary

from cpdagthink.backends import make_backend
from cpdagthink.backends.local import backend as local, jump_forward
from cpdagthink.backends.local.jump_forward import DraftLength, IndexWalker, LookupDrafter, admitted_prefix, verified_rows

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
    drafter = LookupDrafter([1, 2, 3, 4, 5, 9, 1, 2], max_ngram=3)
    assert drafter.propose(3) == [3, 4, 5]
    drafter.extend([3, 7, 1, 2])  # the latest "1 2" is now followed by 3 7
    assert drafter.propose(2) == [3, 7]
    assert drafter.propose(0) == [] and LookupDrafter([5, 6]).propose(4) == []


def test_lookup_drafter_prefers_the_longest_match_and_looks_up_each_drafted_token_again():
    # "8 1 2" was followed by 5 once; "1 2" alone was followed by 3 most recently
    context = [8, 1, 2, 5, 6, 0, 1, 2, 3, 0, 8, 1, 2]
    assert LookupDrafter(context, max_ngram=3).propose(2) == [5, 6]
    assert LookupDrafter(context, max_ngram=2).propose(1) == [3]
    # each drafted token is looked up with the draft as context: "4 4" -> 4 -> 4 ... (a copy would stop at the end)
    assert LookupDrafter([4, 4, 4], max_ngram=2).propose(5) == [4, 4, 4, 4, 4]


def test_draft_length_grows_after_a_kept_draft_and_shrinks_to_the_kept_part():
    length = DraftLength(limit=6)
    assert length.current == 4
    length.update(drafted=4, kept=4)
    assert length.current == 5
    length.update(drafted=5, kept=5)
    length.update(drafted=6, kept=6)
    assert length.current == 6  # never above the limit
    length.update(drafted=6, kept=2)
    assert length.current == 3
    length.update(drafted=3, kept=0)
    assert length.current == 1
    length.update(drafted=0, kept=0)  # nothing drafted, nothing learned
    assert length.current == 1
    assert DraftLength(limit=0).current == 0


def test_verified_rows_is_the_largest_batch_with_exact_rows_below_it():
    assert verified_rows({2: 0.0, 3: 0.0, 4: 0.4, 5: 0.0}) == 3  # 5 does not count after 4 failed
    assert verified_rows({2: 0.28, 3: 0.0}) == 1
    assert verified_rows({2: 0.0, 3: float("nan")}) == 2
    assert verified_rows({}) == 1


def test_a_kept_batch_check_is_trusted_only_as_measured_for_this_build_and_model(tmp_path):
    """A batch-check file edited by hand (a difference set to 0) would let jump-forward batch on a build whose
    rows are not exact: its checksum no longer matches, so it is measured again."""
    setting = ["model-sha256", "0.3.16", "LLAMAFILE = 1 |", 2, False, jump_forward.INVARIANCE_CONTEXT,
               jump_forward.INVARIANCE_ROWS]
    measured = {2: 0.41, 3: 0.39, 4: 0.0}
    path = tmp_path / "batch-invariance" / "key.json"
    jump_forward.write_invariance(path, setting, measured)
    assert jump_forward.read_invariance(path, setting) == measured
    assert jump_forward.read_invariance(path, [*setting[:2], "LLAMAFILE = 0 |", *setting[3:]]) is None  # another build
    kept = json.loads(path.read_text())
    kept["max_abs_diff"] = {rows: 0 for rows in kept["max_abs_diff"]}
    path.write_text(json.dumps(kept))
    assert jump_forward.read_invariance(path, setting) is None
    for broken in ("", "[]", '{"max_abs_diff": {"2": 0}}', '{"max_abs_diff": {"two": 0}, "setting": [], "sha256": ""}',
                   "[" * 100_000):
        path.write_text(broken)
        assert jump_forward.read_invariance(path, setting) is None


def test_admitted_prefix_cuts_a_draft_where_the_constraint_refuses_it():
    walker = toy_walker(r'\{"ab"\}')
    start = walker.initial_state
    assert admitted_prefix(walker, start, [3, 2, 5, 7, EOS]) == [3, 2, 5, 7]  # EOS is never drafted
    assert admitted_prefix(walker, start, [3, 0, 0]) == [3, 0]  # '{"a' then a second 'a' is refused
    assert admitted_prefix(walker, start, [6, 3]) == []


# ----------------------------------------------------------------------------------------- SmolLM2 (slow)
def _rows(n: int, max_tokens: int = 160):
    """Turn 1 of the structured condition on the first ``n`` two-variable rows: the full turn-1 prompt, the
    shortest instances and constrained answers (SmolLM2 ends each in about 110 tokens, inside the budget)."""
    from cpdagthink.method.conditions import CONDITIONS, first_request
    from cpdagthink.method.decoding import Decoding
    from cpdagthink.run.data import load_split

    decoding = Decoding(max_tokens_turn1=max_tokens, tool_choice="forced")
    shortest = [i for i in load_split("test") if i.num_variables == 2][:n]
    assert len(shortest) == n
    return [first_request(CONDITIONS["structured"], i, decoding) for i in shortest]


@pytest.fixture(scope="module")
def smol_pair():
    plain = make_backend("local", model="smollm2-135m", n_ctx=4096, jump_forward=False, kept_states_gib=0)
    jumping = make_backend("local", model="smollm2-135m", n_ctx=4096, jump_forward=True, draft_tokens=6, kept_states_gib=0)
    yield plain, jumping
    plain.close()
    jumping.close()


def _tokens(backend, raw: str) -> list[int]:
    return backend.llm.tokenize(raw.encode(), add_bos=False, special=True)


@pytest.mark.slow
def test_batch_check_is_measured_once_and_read_back_from_disk(smol_pair, tmp_path, monkeypatch):
    _, jumping = smol_pair
    diffs = jumping.batch_invariance()
    assert sorted(diffs) == list(range(2, jump_forward.INVARIANCE_ROWS + 1))
    assert all(d >= 0 for d in diffs.values())
    assert jumping.batch_rows == verified_rows(diffs)

    def measured_again(*args, **kwargs):
        raise AssertionError("the batch check was measured again instead of read from disk")

    monkeypatch.setattr(local, "batch_invariance", measured_again)  # the name the backend measures through
    assert jumping.batch_invariance() == diffs
    assert f"batches of up to {jumping.batch_rows} token" in jumping.identity()["decoder"]


@pytest.mark.slow
def test_jump_forward_output_is_token_for_token_plain_constrained_decoding(smol_pair, test_csv):
    """Greedy output equal to plain decoding's on every build: batches never exceed the measured exact size
    (one token on the stock build, where the loop still skips forced tokens' sampling). The first row is
    prefilled from an empty KV cache, the second after the first's shared prefix."""
    from cpdagthink.backends.local.backend import output_regex

    plain, jumping = smol_pair
    forced = 0
    for request in _rows(2):
        a, b = plain.complete(request), jumping.complete(request)
        assert "forced_tokens" not in a.meta
        assert b.raw == a.raw and b.completion_tokens == a.completion_tokens and b.finish_reason == a.finish_reason
        assert b.finish_reason == "stop" and re.fullmatch(output_regex(request), b.raw), b.raw
        forced += b.meta["forced_tokens"]
        if jumping.batch_rows > 1:
            assert b.meta["drafted_tokens"] > 0 and b.meta["forward_passes"] < b.completion_tokens
    assert forced > 0  # the runs were really skipped, not sampled


@pytest.mark.slow
def test_jump_forward_with_drafts_equals_plain_decoding_on_the_default_model(test_csv):
    """One turn-1 request, cut after the envelope and the variable list: where the build batches exactly,
    drafts copied from the prompt's tool definition are accepted within it."""
    plain = make_backend("local", n_ctx=4096, kept_states_gib=0)
    jumping = make_backend("local", n_ctx=4096, jump_forward=True, draft_tokens=6, kept_states_gib=0)
    try:
        [request] = _rows(1, max_tokens=32)
        a, b = plain.complete(request), jumping.complete(request)
        assert b.raw == a.raw and b.completion_tokens == a.completion_tokens == 32
        assert b.raw.startswith('<tool_call>\n{"name": "record_causal_analysis"'), b.raw
        if jumping.batch_rows > 1:
            assert b.meta["drafted_tokens"] > 0 and b.meta["forward_passes"] < b.completion_tokens
    finally:
        plain.close()
        jumping.close()


@pytest.mark.slow
def test_sampling_is_seeded_and_reproducible_with_and_without_jump_forward(smol_pair, test_csv):
    from dataclasses import replace

    plain, jumping = smol_pair
    rows = [replace(r, temperature=0.8, top_p=0.95, top_k=40) for r in _rows(2, max_tokens=48)]
    for backend in (plain, jumping):
        seed0 = [backend.complete(replace(r, seed=0)).raw for r in rows]
        assert [backend.complete(replace(r, seed=0)).raw for r in rows] == seed0
        seed1 = [backend.complete(replace(r, seed=1)).raw for r in rows]
        assert seed1 != seed0
        for raw in seed0 + seed1:  # still inside the constraint
            assert raw.startswith('<tool_call>\n{"name": "record_causal_analysis"')
