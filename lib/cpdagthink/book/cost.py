"""The price of a plan before it runs: per planned run and in total, the calls still to make, their prompt tokens,
the completion-token ceiling the budgets allow and the completion tokens earlier runs of the same model lead to
expect, a price range at given prices and a wall-time estimate (``cpdagthink plan --cost``, ``cpdagthink
reproduce --dry-run``).

What is done is not priced: the records a run folder holds and the calls the call cache answers
(:func:`cpdagthink.run.estimate.pending`). Prompt tokens are the model's own tokenizer's counts where an earlier
run of the same backend, model and condition recorded them (their mean per call), else estimated from the
requests' characters (:data:`~cpdagthink.run.estimate.CHARS_PER_TOKEN` a token); each run says which.

A run is priced at the prices given (``--price-input``, ``--price-output``), else at its model's list price where
the backend calls a service whose price the model's profile records (``Backend.list_price``, with its date and
source); a model served by one's own engine has no list price (its cost is the machine's time).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from ..backends import answers_without_model, backend_class
from ..backends.profiles import ListPrice
from ..run.config import RunConfig
from ..run.estimate import CHARS_PER_TOKEN, Measured, Pending, earlier_runs, measured, pending
from .plan import PlannedRun, Samples
# The Batch API's price as a share of the direct one (OpenAI's batch pricing: half), for a backend that offers
# batch files (``-o batch=true``).
BATCH_SHARE = 0.5

@dataclass(frozen=True)
class Pricing:
    """Prices in dollars per million tokens (None: not priced), and a given latency per call in seconds and
    concurrency (None: measured, or the backend's)."""

    input_per_m: float | None = None
    output_per_m: float | None = None
    latency_s: float | None = None
    concurrency: int | None = None


@dataclass(frozen=True)
class Rates:
    """The prices one run is priced at, dollars per million tokens, and where they come from: given, or the
    model's list price (its citation); ``batch`` the Batch API's (input, output) where the backend offers it."""

    input_per_m: float
    output_per_m: float
    batch: tuple[float, float] | None
    source: str

    def of(self, prompt: int, completion: tuple[int, int], batch: bool = False) -> tuple[float, float] | None:
        """The price of ``prompt`` tokens and a range of completion tokens (None: no batch price)."""
        rates = self.batch if batch else (self.input_per_m, self.output_per_m)
        if rates is None:
            return None
        return (prompt * rates[0] + completion[0] * rates[1]) / 1e6, (prompt * rates[0] + completion[1] * rates[1]) / 1e6


def rates(config: RunConfig, pricing: Pricing) -> Rates | None:
    """What ``config``'s run is priced at: the prices given, else its model's list price
    (:meth:`Backend.list_price <cpdagthink.backends.base.Backend.list_price>`); None where neither is known or
    the backend answers without a model."""
    family = backend_class(config.backend)
    if answers_without_model(config.backend):
        return None
    if pricing.input_per_m is not None and pricing.output_per_m is not None:
        half = (pricing.input_per_m * BATCH_SHARE, pricing.output_per_m * BATCH_SHARE)
        return Rates(pricing.input_per_m, pricing.output_per_m, half if family.offers_batches else None, "given")
    listed: ListPrice | None = family.list_price(config.model, config.backend_options)
    if listed is None:
        return None
    batch = (listed.batch_input_per_m, listed.batch_output_per_m) if family.offers_batches else None
    return Rates(listed.input_per_m, listed.output_per_m, batch, listed.citation)


@dataclass(frozen=True)
class RunCost:
    """What one planned run still costs."""

    run: PlannedRun
    pending: Pending
    measured: Measured
    prompt_tokens: int
    tokens_measured: bool
    ceiling: int
    expected: int | None
    price: tuple[float, float] | None
    wall_s: float | None
    latency_source: str
    batch_price: tuple[float, float] | None = None  # the same calls through batch files, where the backend offers them
    rates: Rates | None = None  # what it is priced at (None: not priced)


def _prompt_tokens(p: Pending, m: Measured) -> tuple[int, bool]:
    """The calls' prompt tokens: measured means per turn where earlier runs recorded them, else characters;
    a turn 2 whose request needs turn 1's answer is estimated as twice the turn 1 it repeats."""
    first = p.calls_by_turn[0]
    if m.prompt[0] is not None and (m.prompt[1] is not None or not p.calls_by_turn[1]):
        return round(first * m.prompt[0] + p.calls_by_turn[1] * (m.prompt[1] or 0)), True
    chars = p.prompt_chars_by_turn[0] + p.prompt_chars_by_turn[1] + p.second_unbuilt * 2 * p.first_chars_mean
    return round(chars / CHARS_PER_TOKEN), False


def _expected(p: Pending, m: Measured, answer_budget: int) -> int | None:
    """Completion tokens the measured means per turn lead to expect (never above a call's budget); None where no
    earlier run of the condition measured them."""
    if m.completion[0] is None or (p.calls_by_turn[1] and m.completion[1] is None):
        return None
    first_budget = (p.ceiling - p.calls_by_turn[1] * answer_budget) / max(p.calls_by_turn[0], 1)
    return round(p.calls_by_turn[0] * min(m.completion[0], first_budget)
                 + p.calls_by_turn[1] * min(m.completion[1] or 0, answer_budget))


def run_cost(run: PlannedRun, instances: Sequence, pricing: Pricing, planned: set[str] | None = None) -> RunCost:
    """The cost of one planned run on its rows (``planned``: the calls of the runs planned before it,
    :func:`cpdagthink.run.estimate.pending`)."""
    config = run.config
    earlier = earlier_runs(config)
    p = pending(config, instances, run.folder, earlier, planned)
    m = measured(config, earlier)
    prompt, from_records = _prompt_tokens(p, m)
    expected = _expected(p, m, config.decoding.max_tokens_answer)
    priced = rates(config, pricing)
    completion = (expected or 0, p.ceiling)
    price = priced.of(prompt, completion) if priced else None
    latency, source = ((pricing.latency_s, "given") if pricing.latency_s is not None else
                       (m.latency_s, "measured") if m.latency_s is not None else (None, "unknown"))
    concurrency = pricing.concurrency or backend_class(config.backend).calls_in_flight(config.backend_options)
    wall = None if latency is None else math.ceil(p.calls / int(concurrency)) * latency
    if config.backend_options.get("batch"):  # its batches end within the service's window, whatever the latency
        wall = None
    return RunCost(run, p, m, prompt, from_records, p.ceiling, expected, price, wall, source,
                   priced.of(prompt, completion, batch=True) if priced else None, priced)


def plan_cost(runs: Sequence[PlannedRun], pricing: Pricing = Pricing()) -> list[RunCost]:
    """:func:`run_cost` of every planned run (each sample drawn once)."""
    samples, planned = Samples(), set()
    return [run_cost(r, samples.of(r.config), pricing, planned) for r in runs]


def _money(price: tuple[float, float] | None) -> str:
    return "—" if price is None else f"${price[0]:,.2f}–${price[1]:,.2f}"


def _hours(seconds: float | None) -> str:
    return "—" if seconds is None else f"{seconds / 3600:,.2f} h"


def cost_lines(costs: Sequence[RunCost]) -> list[str]:
    """The costs as text: one line per run, the total, and how each figure was made."""
    lines = ["calls   cached  prompt tok  ceiling tok  expected tok  price          batch price    wall      run"]
    for c in costs:
        r = c.run.config
        what = f"{r.condition}{' / ' + r.probe if r.probe else ''} {r.label} seed {r.seed}"
        lines.append(f"{c.pending.calls:>6}  {c.pending.cached:>6}  {c.prompt_tokens:>10,}{'' if c.tokens_measured else '*'}"
                     f"  {c.ceiling:>11,}  {'—' if c.expected is None else format(c.expected, ','):>12}  "
                     f"{_money(c.price):<13}  {_money(c.batch_price):<13}  {_hours(c.wall_s):<8}  {what} ({c.pending.done} of {c.pending.rows} "
                     "rows recorded)")
    lines.append(total_line(costs))
    return [*lines, *notes(costs)]


def total_line(costs: Sequence[RunCost]) -> str:
    """The plan's totals; a total of expected tokens or times only where every run has one, the price of the runs
    that have one (saying how many of those that call a model have none)."""
    def whole(values: list) -> str | None:
        return None if any(v is None for v in values) else sum(values)

    expected = whole([c.expected for c in costs])
    return (f"total: {sum(c.pending.calls for c in costs):,} calls ({sum(c.pending.cached for c in costs):,} "
            f"answered by the cache or a run planned before), {sum(c.prompt_tokens for c in costs):,} prompt tokens, completion ceiling "
            f"{sum(c.ceiling for c in costs):,} tokens, expected {'—' if expected is None else format(expected, ',')}, "
            f"price {_total_price(costs)}, wall {_hours(whole([c.wall_s for c in costs]))} one run after another")


def _total_price(costs: Sequence[RunCost]) -> str:
    """The sum of the priced runs' price ranges, the batch one beside it, and how many runs of a model are not
    priced where some are."""
    priced = [c for c in costs if c.price is not None]
    unpriced = sum(c.price is None and not answers_without_model(c.run.config.backend) for c in costs)
    batch = _summed([c.batch_price or c.price for c in priced])
    return (_money(_summed([c.price for c in priced]))
            + (f" ({_money(batch)} with batch files where a backend offers them)" if any(c.batch_price for c in costs)
               else "") + (f" of the {len(priced)} priced run(s), {unpriced} not priced" if priced and unpriced else ""))


def _summed(prices: list[tuple[float, float] | None]) -> tuple[float, float] | None:
    """The sum of price ranges; None where there are none or one is missing."""
    if not prices or any(p is None for p in prices):
        return None
    return sum(p[0] for p in prices), sum(p[1] for p in prices)


def notes(costs: Sequence[RunCost]) -> list[str]:
    """How the figures were made: which prompt counts are estimates, how the cache and the latency were read."""
    estimated = sum(not c.tokens_measured for c in costs)
    cache = sorted({c.pending.cache for c in costs})
    return [f"prompt tokens: {len(costs) - estimated} run(s) by the model's own tokenizer (means of earlier runs' "
            f"records), {estimated} estimated from characters ({CHARS_PER_TOKEN} a token), marked *",
            f"call cache: {'; '.join(cache) or 'no run'}",
            f"wall time: latency {', '.join(sorted({c.latency_source for c in costs})) or 'none'} per call "
            "(--latency S to give one), calls spread over the backend's concurrency (--concurrency N)",
            *price_notes(costs),
            *(["batch price: the Batch API's (the listed one, or half a given price; -o batch=true); a run in batch "
               "mode has no wall time here: each of its turns ends within the service's 24 h"]
              if any(c.batch_price for c in costs) else [])]


def _dollars(value: float) -> str:
    """A price per million tokens: cents, or tenths of a cent where a list has them ($0.375)."""
    return f"${value:,.2f}" if round(value, 2) == value else f"${value:,.3f}"


def price_notes(costs: Sequence[RunCost]) -> list[str]:
    """What each model is priced at and where the price comes from, one line per model; and the models with
    no price (no list price recorded, none given)."""
    lines, unpriced = {}, []
    for c in costs:
        label, r = c.run.config.label, c.rates
        if r is None:
            unpriced += [] if answers_without_model(c.run.config.backend) or label in unpriced else [label]
            continue
        batch = f", batch {_dollars(r.batch[0])} and {_dollars(r.batch[1])}" if r.batch else ""
        lines.setdefault(label, f"price of {label}: {_dollars(r.input_per_m)} a million prompt tokens, "
                                f"{_dollars(r.output_per_m)} a million completion tokens{batch}; "
                                + ("given (--price-input, --price-output)" if r.source == "given" else r.source))
    if unpriced:
        lines["unpriced"] = (f"no price for {', '.join(unpriced)}: no list price recorded (a model served by one's "
                             "own engine or server costs its machine's time: see wall), none given "
                             "(--price-input, --price-output)")
    return list(lines.values())
