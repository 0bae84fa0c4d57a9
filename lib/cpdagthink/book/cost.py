"""The price of a plan before it runs: per planned run and in total, the calls still to make, their prompt tokens,
the completion-token ceiling the budgets allow and the completion tokens earlier runs of the same model lead to
expect, a price range at given prices and a wall-time estimate (``cpdagthink plan --cost``, ``cpdagthink
reproduce --dry-run``).

What is done is not priced: the records a run folder holds and the calls the call cache answers
(:func:`cpdagthink.run.estimate.pending`). Prompt tokens are the model's own tokenizer's counts where an earlier
run of the same backend, model and condition recorded them (their mean per call), else estimated from the
requests' characters (:data:`~cpdagthink.run.estimate.CHARS_PER_TOKEN` a token); each run says which.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from ..backends import answers_without_model, backend_class
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
    price = None
    priced = pricing.input_per_m is not None and pricing.output_per_m is not None
    if priced and not answers_without_model(config.backend):
        paid = prompt * pricing.input_per_m
        price = ((paid + (expected or 0) * pricing.output_per_m) / 1e6, (paid + p.ceiling * pricing.output_per_m) / 1e6)
    latency, source = ((pricing.latency_s, "given") if pricing.latency_s is not None else
                       (m.latency_s, "measured") if m.latency_s is not None else (None, "unknown"))
    concurrency = pricing.concurrency or backend_class(config.backend).calls_in_flight(config.backend_options)
    wall = None if latency is None else math.ceil(p.calls / int(concurrency)) * latency
    if config.backend_options.get("batch"):  # its batches end within the service's window, whatever the latency
        wall = None
    return RunCost(run, p, m, prompt, from_records, p.ceiling, expected, price, wall, source, _batch_price(config, price))


def _batch_price(config: RunConfig, price: tuple[float, float] | None) -> tuple[float, float] | None:
    """``price`` at the batch price, where the run's backend offers batch files (None elsewhere)."""
    if price is None or not backend_class(config.backend).offers_batches:
        return None
    return price[0] * BATCH_SHARE, price[1] * BATCH_SHARE


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
    """The plan's totals; a total of expected tokens, prices or times only where every run has one."""
    def whole(values: list) -> str | None:
        return None if any(v is None for v in values) else sum(values)

    expected = whole([c.expected for c in costs])
    priced = [c for c in costs if not answers_without_model(c.run.config.backend)]
    price, batch = _summed([c.price for c in priced]), _summed([c.batch_price or c.price for c in priced])
    return (f"total: {sum(c.pending.calls for c in costs):,} calls ({sum(c.pending.cached for c in costs):,} "
            f"answered by the cache or a run planned before), {sum(c.prompt_tokens for c in costs):,} prompt tokens, completion ceiling "
            f"{sum(c.ceiling for c in costs):,} tokens, expected {'—' if expected is None else format(expected, ',')}, "
            f"price {_money(price)}"
            + (f" ({_money(batch)} with batch files where a backend offers them)" if any(c.batch_price for c in costs)
               else "") + f", wall {_hours(whole([c.wall_s for c in costs]))} one run after another")


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
            *(["batch price: the Batch API's, half the direct one (-o batch=true); a run in batch mode has no wall "
               "time here: each of its turns ends within the service's 24 h"] if any(c.batch_price for c in costs)
              else [])]
