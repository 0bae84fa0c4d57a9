"""The token budgets runs are made with: one default set for every front door, and the named sets a user picks.

Budgets are part of a run's identity (its folder, its cache keys): two commands that differ only in their
budgets make two disjoint sets of runs. So every front door (``cpdagthink run``, ``prompt``, ``plan``,
``book``, ``reproduce``, ``make grid``) defaults to one set, :data:`DEFAULT_BUDGETS`: the book's, sized for
the CPU model, under which the committed book's records were made (changing it would make every one of them a
different run, never re-served). A paper-scale run names the set ``paper`` (``--budgets paper``, ``make
BUDGETS=paper``), so that every page that documents such a run asks for the very same runs.
"""

from __future__ import annotations

from typing import NamedTuple


class Budgets(NamedTuple):
    """Completion-token ceilings: turn 1 (its thinking included) and the answer turn; a one-turn condition gets
    their sum (:attr:`cpdagthink.method.decoding.Decoding.one_turn_budget`)."""

    turn1: int
    answer: int
    why: str

    def as_parameters(self) -> dict[str, int]:
        """The two budgets under the parameter names of the notebooks, ``RunParameters`` and the grid."""
        return {"max_tokens_turn1": self.turn1, "max_tokens_answer": self.answer}


BUDGET_SETS: dict[str, Budgets] = {
    "book": Budgets(512, 128, "the committed book's: the CPU model answers in a few hundred tokens, and every "
                              "record of the default book was made under them"),
    "paper": Budgets(16384, 8192, "paper scale: the paper states no budget; a thinking model's turn 1 may "
                                  "reason for many thousand tokens before its call, and a cut-off turn 1 "
                                  "leaves turn 2 no graph. On vLLM they need max_model_len 32768"),
}
DEFAULT_BUDGETS = "book"


def budget_set(name: str) -> Budgets:
    """The named set; an unknown name is refused with the choices."""
    if name not in BUDGET_SETS:
        raise ValueError(f"unknown budget set {name!r}; choose one of {', '.join(BUDGET_SETS)}")
    return BUDGET_SETS[name]


DEFAULT = budget_set(DEFAULT_BUDGETS)
