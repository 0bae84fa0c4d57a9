"""The spending limit of a run: its options, the worst case of a call, and the hold that stops a call before it
could pass the limit."""

from __future__ import annotations

import pytest

from cpdagthink.method.chat import Completion, Request
from cpdagthink.run.budget import TEMPLATE_TOKENS, Budget, BudgetSpent, Spending, worst_tokens
from cpdagthink.run.records import Spent

PRICES = {"price_input": 1.0, "price_output": 10.0}  # dollars per million tokens


def _request(text: str = "x" * 100, max_tokens: int = 1000) -> Request:
    return Request(messages=({"role": "user", "content": text},), max_tokens=max_tokens)


def test_a_limit_needs_both_prices_and_a_value_is_refused_by_its_option():
    assert Budget.of({"max_cost": "2", **PRICES, "timeout": 5}) == Budget(max_cost=2.0, **PRICES)
    with pytest.raises(ValueError, match="max_cost needs the prices"):
        Budget.of({"max_cost": 2, "price_input": 1})
    with pytest.raises(ValueError, match="option max_cost: .*greater than 0"):
        Budget.of({"max_cost": 0, **PRICES})
    with pytest.raises(ValueError, match="option price_output"):
        Budget.of({"price_output": "lots"})
    assert Budget.of({**PRICES}).max_cost is None and Budget().cost(10, 10) is None


def test_a_limit_without_prices_counts_at_the_models_list_price_on_its_publishers_service():
    from cpdagthink.run.config import RunConfig

    listed = RunConfig(backend="openai", model="gpt-5.4-mini", backend_options={"max_cost": 5}).budget()
    assert (listed.price_input, listed.price_output) == (0.75, 4.5)  # the profile's list price, direct
    batched = RunConfig(backend="openai", model="gpt-5.4-mini", backend_options={"max_cost": 5, "batch": True}).budget()
    assert (batched.price_input, batched.price_output) == (0.375, 2.25)
    given = RunConfig(backend="openai", model="gpt-5.4-mini", backend_options={"max_cost": 5, **PRICES}).budget()
    assert given == Budget(max_cost=5.0, **PRICES)  # prices given win
    with pytest.raises(ValueError, match="max_cost needs the prices"):  # a server of one's own has no list price
        RunConfig(backend="openai", model="gpt-5.4-mini", backend_options={"max_cost": 5, "base_url": "http://localhost:1/v1"})


def test_a_calls_worst_case_is_its_prompt_a_token_a_character_and_its_whole_ceiling():
    prompt, completion = worst_tokens(_request("abc", max_tokens=70))
    assert prompt == len('"abc"') + len("[]") + 2 * TEMPLATE_TOKENS and completion == 70


def test_a_call_is_refused_before_it_is_sent_when_its_worst_case_could_pass_the_limit():
    one = Budget(**PRICES).cost(*worst_tokens(_request()))
    spending = Spending(Budget(max_cost=2.5 * one, **PRICES))
    with spending.reserve([_request()]), spending.reserve([_request()]):
        held = r"stopped by the budget: spent \$0\.0000 of max_cost .* held by the calls in flight"
        with pytest.raises(BudgetSpent, match=held):
            spending.reserve([_request()]).__enter__()  # two in flight: a third could pass the limit
    spending.paid([_request()] * 2, [Completion(text="a", prompt_tokens=100, completion_tokens=50), None])
    assert (spending.prompt_tokens, spending.completion_tokens, spending.calls) == (100, 50, 1)
    with spending.reserve([_request()]), spending.reserve([_request()]):  # what was held is free again
        pass
    assert spending.stopped().startswith("stopped by the budget: spent $0.0006 of max_cost") and " held " not in \
        spending.stopped()


def test_an_answer_without_usage_counts_at_its_worst_and_earlier_sessions_count_toward_the_limit():
    spending = Spending(Budget(max_cost=1.0, **PRICES), Spent(prompt_tokens=10, completion_tokens=99_990, calls=3))
    spending.paid([_request(max_tokens=10)], [Completion(text="a")])
    spent = spending.spent()
    assert spent.prompt_tokens == 10 + worst_tokens(_request())[0] and spent.completion_tokens == 100_000
    assert spent.calls == 4 and spent.max_cost == 1.0 and spent.cost == pytest.approx(
        (spent.prompt_tokens * 1.0 + 100_000 * 10.0) / 1e6)
    with pytest.raises(BudgetSpent, match=r"spent \$1\.0001 of max_cost \$1 .* \$0\.0000 left"):
        spending.reserve([_request()]).__enter__()
