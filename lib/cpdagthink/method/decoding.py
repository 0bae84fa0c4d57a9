"""Decoding settings of a run: how the model samples (:class:`Sampling`) and the token budgets, tool choice and
seed shared by every turn (:class:`Decoding`). Conditions build their requests from them; a run configuration
holds one.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, NonNegativeInt, PositiveInt

from .budgets import DEFAULT


class Sampling(BaseModel):
    """Sampling settings; temperature 0 is greedy, and the filters are off at top_p 1, top_k 0, min_p 0."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    temperature: float = Field(0.0, ge=0.0, le=5.0)
    top_p: float = Field(1.0, gt=0.0, le=1.0)
    top_k: NonNegativeInt = 0
    min_p: float = Field(0.0, ge=0.0, le=1.0)

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0


class Decoding(Sampling):
    """Decoding settings shared by all turns of a run.

    Token budgets are matched across flows: a one-turn condition gets ``max_tokens_turn1 +
    max_tokens_answer``, the same total a two-turn condition can spend, so a baseline is never cut short
    where Structured Thinking would not be.
    """

    tool_choice: Literal["auto", "forced"] = "auto"  # auto (+ the prompt's instruction, the paper's API setting)
    narrow_regex: bool = True  # constrain variable names to the instance's own
    max_tokens_turn1: PositiveInt = DEFAULT.turn1  # the one default set (budgets.py says why)
    max_tokens_answer: PositiveInt = DEFAULT.answer
    seed: int = 0
    thinking: bool = True  # the backend's thinking switch, ANDed with the condition's

    @property
    def one_turn_budget(self) -> int:
        return self.max_tokens_turn1 + self.max_tokens_answer
