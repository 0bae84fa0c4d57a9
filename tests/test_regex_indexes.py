"""The regex indexes: built over the tokens a regex can read, they are outlines-core's full index, state for
state; kept on disk, they are compiled once."""

from __future__ import annotations

import pytest
from outlines_core import Index, Vocabulary

from cpdagthink.backends.local.regex_indexes import RegexIndexes, compile_index, regex_alphabet

EOS = 99
# ASCII, a JSON-ish mix, and UTF-8 tokens: whole two-byte characters, a character split across two tokens
# (the byte-level pieces a BPE vocabulary has), and tokens mixing both
TEXTS = {text: [i] for i, text in enumerate([
    "a", "b", "ab", "ba", "abc", "c", "{", "}", '"', '":', ":", ": ", " ", "  ", '{"', "x", "é", "aé", "éa", "ü", "\n",
    "\u00c3", "\u00a9", "1", "12", "[", "]", ",", ", ", '", "', "A", "B", '"A"', "null", "true"])}


def _same(small, full) -> bool:
    return (small.get_initial_state() == full.get_initial_state() and small.get_final_states() ==
            full.get_final_states() and small.get_transitions() == full.get_transitions())


@pytest.mark.parametrize("regex", [
    r"a+b?",                       # a few letters of many
    r'\{"[AB]": (null|true)\}',    # a little JSON
    r'"[^"]*"',                    # a negated class: every byte but the quote, UTF-8 included
    r"é(a|b)+",                    # a non-ASCII literal: its second byte is read only after the first
    r"[0-9]{1,3}(, [0-9]+)*",
    r"x|ü\n",
    r"[]a]+|[^]a]",                # a leading ] is a class member
])
def test_the_index_over_the_readable_tokens_is_the_full_index(regex):
    small = compile_index(regex, EOS, TEXTS)
    full = Index(regex, Vocabulary(EOS, TEXTS))
    assert _same(small, full)
    assert small.get_transitions()  # not vacuous: every regex here admits some token


def test_the_alphabet_is_every_byte_the_regex_can_match_or_none_where_it_cannot_be_bounded():
    assert regex_alphabet(r"a+b?") == {ord("a"), ord("b")}
    assert regex_alphabet(r"é|[x-z]{2}") == set("éxyz".encode())
    assert regex_alphabet(r"\\u[0-9a-f]{4}") == set(b"\\u0123456789abcdef")
    # what a syntax reading cannot bound, or what Rust's regex crate reads otherwise than Python's parser
    for regex in [r'"[^"]*"', r"a.b", r"\d+", r"[a-é]", r"(?i)ab", r"[[:alpha:]]", r"[a[^b]]", r"[a-z&&[^x]]",
                  r"(?P<n>a)", r"\p{L}"]:
        assert regex_alphabet(regex) is None, regex


@pytest.mark.slow
def test_the_turn1_regex_index_on_a_real_vocabulary_is_the_full_index(smol):
    """SmolLM2's 49 152 tokens and the schema-derived tool-call regex of a three-variable instance."""
    import outlines

    from cpdagthink.backends.local.regex_indexes import token_texts
    from cpdagthink.backends.toolcalls import envelope_regex
    from cpdagthink.method.schema import analysis_regex

    regex = envelope_regex("record_causal_analysis", analysis_regex(["A", "B", "C"]))
    eos_id, texts = token_texts(outlines.from_llamacpp(smol.llm, chat_mode=False).tokenizer)
    small = compile_index(regex, eos_id, texts)
    assert _same(small, Index(regex, Vocabulary(eos_id, texts)))
    assert len(small.get_transitions()) > 100


def test_an_index_is_compiled_once_then_read_from_memory_or_disk(tmp_path):
    compiled = []

    def compile(regex):
        compiled.append(regex)
        return compile_index(regex, EOS, TEXTS)

    first = RegexIndexes(tmp_path, "sha", EOS, capacity=1, compile=compile)
    walker, seconds = first.walker("a+b?")
    assert compiled == ["a+b?"] and seconds > 0
    assert first.walker("a+b?") == (walker, 0.0)  # memory
    again = RegexIndexes(tmp_path, "sha", EOS, capacity=1, compile=compile)  # another process: disk
    restored, seconds = again.walker("a+b?")
    assert compiled == ["a+b?"] and seconds == 0.0
    assert _same(restored.index, walker.index)
