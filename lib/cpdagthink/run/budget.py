"""A spending limit while a run runs: ``-o max_cost=DOLLARS`` with ``-o price_input=...`` and ``-o price_output=...``
(dollars per million prompt and completion tokens). Transport options, never part of a run's identity, read by the
runner for every backend alike (the backend never sees them).

Before each fresh model call is sent (a batch: before the batch), :meth:`Spending.reserve` checks that what the run
has spent (the tokens of the answers received, in this session and the earlier ones its ``metadata.json``
records) plus the worst case of every call in flight, this one included, stays within ``max_cost``; a call's worst
case is its prompt counted as one token a character (a token covers at least one, bar a chat template's few
markers, which :data:`TEMPLATE_TOKENS` allows for) and its whole ``max_tokens`` ceiling of completion. When it would
not, the call is not sent and the run stops, resumably (:class:`BudgetSpent`): its records so far are kept, and a
rerun with a higher ``max_cost`` goes on where it stopped. So a run never passes its limit, as far as the service
bills the tokens it reports. Prices alone (no ``max_cost``) price what the metadata records. A ``max_cost`` given
without prices counts at the model's list price where it calls its publisher's service
(:meth:`Backend.list_price <cpdagthink.backends.base.Backend.list_price>`; the Batch API's with ``batch``).
"""

from __future__ import annotations

import contextlib
import json
import threading
from typing import Annotated, Any, Iterator, Mapping, Sequence

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from ..backends.profiles import ListPrice
from ..method.chat import Completion, Request
from .records import Spent
from .streaming import BudgetSpent

__all__ = ["BUDGET_OPTIONS", "Budget", "BudgetSpent", "Spending", "worst_tokens"]

BUDGET_OPTIONS = frozenset({"max_cost", "price_input", "price_output"})
TEMPLATE_TOKENS = 16  # a chat template's markers around one message (role, start and end), at most

Dollars = Annotated[float, Field(ge=0, le=1e9, allow_inf_nan=False)]


class Budget(BaseModel):
    """The spending options of a run: ``max_cost`` (dollars; None: no limit) and the prices it is counted at
    (dollars per million prompt and completion tokens; None: not given)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_cost: Annotated[float, Field(gt=0, le=1e9, allow_inf_nan=False)] | None = None
    price_input: Dollars | None = None
    price_output: Dollars | None = None

    @model_validator(mode="after")
    def _priced(self) -> "Budget":
        if self.max_cost is not None and (self.price_input is None or self.price_output is None):
            raise ValueError("max_cost needs the prices it is counted at: give -o price_input=... and "
                             "-o price_output=... (dollars per million prompt and completion tokens; a model "
                             "with a list price on its publisher's service is counted at it)")
        return self

    @classmethod
    def of(cls, options: Mapping[str, Any], listed: ListPrice | None = None) -> "Budget":
        """The budget ``options`` give (the backend options; the others are ignored), each value checked; a
        ``ValueError`` names the option and why, never the value. A ``max_cost`` without prices is counted at
        the ``listed`` price of the run's model where there is one (its Batch API price with ``batch``)."""
        given = {k: v for k, v in options.items() if k in BUDGET_OPTIONS}
        if listed is not None and "max_cost" in given and not {"price_input", "price_output"} & set(given):
            batch = bool(options.get("batch"))
            given["price_input"] = listed.batch_input_per_m if batch else listed.input_per_m
            given["price_output"] = listed.batch_output_per_m if batch else listed.output_per_m
        try:
            return cls.model_validate(given)
        except ValidationError as error:
            first = error.errors(include_url=False, include_input=False)[0]
            where = ".".join(map(str, first["loc"]))
            reason = first["msg"].removeprefix("Value error, ")
            raise ValueError(f"option {where}: {reason}" if where else reason) from None

    def cost(self, prompt_tokens: float, completion_tokens: float) -> float | None:
        """What ``prompt_tokens`` and ``completion_tokens`` cost at the prices (None: a price not given)."""
        if self.price_input is None or self.price_output is None:
            return None
        return (prompt_tokens * self.price_input + completion_tokens * self.price_output) / 1e6


def worst_tokens(request: Request) -> tuple[int, int]:
    """The most prompt and completion tokens ``request`` can be billed: one token a character of what it sends
    (its messages and tools) plus a template's markers a message, and its ``max_tokens`` ceiling."""
    chars = sum(len(json.dumps(m.get("content") or "")) for m in request.messages) + len(json.dumps(list(request.tools)))
    return chars + TEMPLATE_TOKENS * (len(request.messages) + 1), request.max_tokens


class Spending:
    """What one run has spent (``earlier``: its former sessions', from its metadata) and holds in flight, against
    its :class:`Budget`; shared by the lanes of a streaming run, so every count is taken under a lock."""

    def __init__(self, budget: Budget, earlier: Spent | None = None):
        self.budget = budget
        earlier = earlier or Spent()
        self.prompt_tokens, self.completion_tokens, self.calls = (earlier.prompt_tokens, earlier.completion_tokens,
                                                                   earlier.calls)
        self._reserved = 0.0
        self.refused = 0.0  # the worst case of the call the budget refused (0: none yet)
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def reserve(self, requests: Sequence[Request]) -> Iterator[None]:
        """Hold the worst case of ``requests`` while the block sends them; :class:`BudgetSpent` instead, before
        anything is sent, when it would take the run past ``max_cost``."""
        worst = sum(self.budget.cost(*worst_tokens(r)) or 0.0 for r in requests)
        with self._lock:
            limit = self.budget.max_cost
            if limit is not None and (self.cost() or 0.0) + self._reserved + worst > limit:
                self.refused = max(self.refused, worst)
                raise BudgetSpent(self._stop_message())
            self._reserved += worst
        try:
            yield
        finally:
            with self._lock:
                self._reserved -= worst

    def stopped(self) -> str:
        """Why the run stopped, with what it has spent once the calls in flight at the stop have landed."""
        with self._lock:
            return self._stop_message()

    def _stop_message(self) -> str:
        spent = self.cost() or 0.0
        left = max(0.0, self.budget.max_cost - spent)  # type: ignore[operator]
        held = f" (${self._reserved:.4f} of it held by the calls in flight)" if self._reserved > 1e-9 else ""
        return (f"stopped by the budget: spent ${spent:.4f} of max_cost ${self.budget.max_cost:g} "
                f"({self.prompt_tokens} prompt and {self.completion_tokens} completion tokens in {self.calls} calls), "
                f"${left:.4f} left{held}; the next call, which could cost up to ${self.refused:.4f}, and those in "
                "flight could have passed it. Every finished record is kept: run again with a higher max_cost to "
                "resume")

    def paid(self, requests: Sequence[Request], completions: Sequence[Completion | None]) -> None:
        """Count the answers received (None: no answer, nothing billed); one that reports no usage is counted at
        its worst case, a refusal at what it reports."""
        with self._lock:
            for request, completion in zip(requests, completions):
                if completion is None:
                    continue
                self.calls += 1
                reported = completion.prompt_tokens or completion.completion_tokens or "rejected" in completion.meta
                prompt, answer = ((completion.prompt_tokens, completion.completion_tokens) if reported
                                  else worst_tokens(request))
                self.prompt_tokens += prompt
                self.completion_tokens += answer

    def cost(self) -> float | None:
        """What the tokens spent cost at the budget's prices (None: prices not given)."""
        return self.budget.cost(self.prompt_tokens, self.completion_tokens)

    def spent(self) -> Spent:
        """The spending so far, as ``metadata.json`` records it."""
        with self._lock:
            cost = self.cost()
            return Spent(prompt_tokens=self.prompt_tokens, completion_tokens=self.completion_tokens, calls=self.calls,
                         price_input=self.budget.price_input, price_output=self.budget.price_output,
                         cost=None if cost is None else round(cost, 6), max_cost=self.budget.max_cost)
