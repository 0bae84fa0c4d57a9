"""Token-level view of a compiled regex constraint, and the forced runs that jump-forward decoding skips.

An outlines-core ``Index`` maps each automaton state to the tokens it admits. Where a state admits exactly
one token (and that token is not end-of-sequence), the constraint gives that token probability 1 whatever
the logits are, so sampling it is pointless: the decoder appends it and, if the next state is again
single-token, the next one, and evaluates the whole run as one batch (prefill speed) before it samples
again. Skipping these positions changes neither a greedy output nor the distribution of a sampled one.

Only strictly forced tokens are taken. A forced *string* that the vocabulary can spell in several ways
(``"record`` + ``_causal`` or ``"`` + ``record_c`` ...) is left to the model, so the tokenization, and
hence the output, stays exactly that of plain constrained decoding. With Qwen2.5's large vocabulary almost
every position has such a choice (0 forced tokens in four measured answers), so :class:`LookupDrafter` adds
verified guesses: drafted tokens are evaluated in one batch and kept while they equal the decoder's own
choice. The logic is exact, but llama.cpp's logits for the later rows of a batch differ slightly from
one-token steps (up to 0.45 measured on SmolLM2 Q4_1), enough to flip near-ties; so drafting is off unless
asked for (``LocalBackend(draft_tokens=N)``).
"""

from __future__ import annotations

from typing import Any

import numpy as np


class IndexWalker:
    """Allowed tokens and transitions of one outlines-core ``Index``, cached per state.

    An index never changes once compiled, so one walker can serve every call that uses its regex.
    """

    def __init__(self, index: Any, eos_id: int):
        self.index = index
        self.eos_id = eos_id
        self._allowed: dict[int, np.ndarray] = {}

    @property
    def initial_state(self) -> int:
        return int(self.index.get_initial_state())

    def allowed(self, state: int) -> np.ndarray:
        """The token ids ``state`` admits, ascending (end-of-sequence included where the regex may end)."""
        tokens = self._allowed.get(state)
        if tokens is None:
            tokens = np.array(sorted(self.index.get_allowed_tokens(state) or ()), dtype=np.intc)
            self._allowed[state] = tokens
        return tokens

    def advance(self, state: int, token: int) -> int:
        """The state after ``token``; a token the state does not admit is a decoder bug, reported as such."""
        following = self.index.get_next_state(state, token)
        if following is None:
            raise ValueError(f"token {token} is not allowed in constraint state {state}")
        return int(following)

    def only_end(self, state: int) -> bool:
        """Whether the only thing ``state`` admits is end-of-sequence (the regex is complete)."""
        tokens = self.allowed(state)
        return len(tokens) == 1 and int(tokens[0]) == self.eos_id

    def forced_run(self, state: int, limit: int) -> tuple[list[int], int]:
        """The tokens forced from ``state`` (at most ``limit``) and the state after them.

        A token is forced when it is the one token its state admits; end-of-sequence never is (it is not
        appended to the text, the decoder stops on it).
        """
        run: list[int] = []
        while len(run) < limit:
            tokens = self.allowed(state)
            if len(tokens) != 1 or int(tokens[0]) == self.eos_id:
                break
            token = int(tokens[0])
            run.append(token)
            state = self.advance(state, token)
        return run, state


class LookupDrafter:
    """Proposes the next tokens by copying what followed the latest earlier occurrence of the last n tokens
    (n = ``max_ngram`` down to 2) in the prompt or the output so far ("prompt lookup" drafting).

    A structured answer repeats itself (``"], ["``, key names, the variable list) and copies the prompt's
    names, so the copied continuation is often what the model writes next. A draft is only a guess: the
    decoder evaluates it in the same batch as the last token and keeps the longest prefix that equals what
    it would have chosen anyway, so drafts change the speed, never the output.
    """

    def __init__(self, context: list[int], max_ngram: int = 3):
        self.max_ngram = max_ngram
        self.tokens: list[int] = []
        self._after: dict[tuple[int, ...], int] = {}  # n-gram -> index just after its latest occurrence
        self.extend(context)

    def extend(self, tokens: list[int]) -> None:
        for token in tokens:
            self.tokens.append(token)
            end = len(self.tokens)
            # record the n-grams ending one token earlier, so the latest n-gram never points at itself
            for n in range(2, self.max_ngram + 1):
                if end - 1 >= n:
                    self._after[tuple(self.tokens[end - 1 - n:end - 1])] = end - 1

    def propose(self, limit: int) -> list[int]:
        """Up to ``limit`` tokens that followed the longest n-gram the context currently ends with."""
        if limit <= 0:
            return []
        for n in range(self.max_ngram, 1, -1):
            start = self._after.get(tuple(self.tokens[-n:]))
            if start is not None:
                return self.tokens[start:start + limit]
        return []


def admitted_prefix(walker: IndexWalker, state: int, draft: list[int]) -> list[int]:
    """The longest prefix of ``draft`` the constraint admits from ``state`` (end-of-sequence excluded)."""
    kept: list[int] = []
    for token in draft:
        if token == walker.eos_id:
            break
        following = walker.index.get_next_state(state, token)
        if following is None:
            break
        kept.append(token)
        state = int(following)
    return kept
