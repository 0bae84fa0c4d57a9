"""Token-level view of a compiled regex constraint, and the forced runs that jump-forward decoding skips.

An outlines-core ``Index`` maps each automaton state to the tokens it admits. Where a state admits exactly
one token (and that token is not end-of-sequence), the constraint gives that token probability 1 whatever
the logits are, so sampling it is pointless: the decoder appends it and, if the next state is again
single-token, the next one, and evaluates the whole run as one batch (prefill speed) before it samples
again. Skipping these positions changes neither a greedy output nor the distribution of a sampled one.

Only strictly forced tokens are taken. A forced *string* that the vocabulary can spell in several ways
(``"record`` + ``_causal`` or ``"`` + ``record_c`` ...) is left to the model, so the tokenization, and
hence the output, stays exactly that of plain constrained decoding.
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
