"""Model profiles: which family a model name falls in, the rules it gets, overrides and early refusals."""

from __future__ import annotations

import re

import pytest

from cpdagthink.backends.profiles import (
    PROFILES,
    ProfileError,
    check_condition,
    list_price,
    profile_for,
    recommended_sampling,
    with_overrides,
)


@pytest.mark.parametrize("model, family", [
    ("gpt-5", "gpt-5"), ("gpt-5-mini", "gpt-5"), ("gpt-5-nano-2025-08-07", "gpt-5"),
    ("gpt-5.1", "gpt-5.1"), ("gpt-5.1-mini", "gpt-5.1"), ("gpt-5.2", "gpt-5.2-5.4"), ("gpt-5.4-mini", "gpt-5.2-5.4"),
    ("gpt-5.5", "gpt-5.5+"), ("gpt-5.6-mini", "gpt-5.5+"), ("gpt-5.10", "gpt-5.5+"),
    ("gpt-5-pro", "gpt-5-pro"), ("gpt-5.2-pro", "gpt-5-pro"),
    ("gpt-5-codex", "codex (gpt-5-codex, gpt-5.1-codex)"), ("gpt-5.1-codex-mini", "codex (gpt-5-codex, gpt-5.1-codex)"),
    ("gpt-5.1-codex-max", "codex (gpt-5.1-codex-max and later)"), ("gpt-5.3-codex", "codex (gpt-5.1-codex-max and later)"),
    ("o1", "o-series"), ("o3-mini", "o-series"), ("o4-mini-2025-04-16", "o-series"),
    ("gpt-4o", "gpt-4"), ("gpt-4.1-mini", "gpt-4"),
    ("Qwen/Qwen3-8B", "qwen3"), ("Qwen3-32B", "qwen3"), ("Qwen/Qwen3.5-27B", "qwen3.5"), ("qwen3.6-35b-a3b", "qwen3.5"),
    ("Qwen/Qwen2.5-7B-Instruct", "qwen2.5"), ("mistralai/Mistral-Small-3.1-24B-Instruct-2503", "mistral"),
    ("smollm2", "default"), ("omni-model", "default"), ("gpt-50", "default"),
])
def test_model_names_fall_in_their_family(model, family):
    assert profile_for(model).family == family


def test_the_rules_of_each_family():
    gpt5, gpt51, o3, gpt4 = (profile_for(m) for m in ("gpt-5-mini", "gpt-5.4-mini", "o3", "gpt-4o"))
    assert gpt5.token_param == gpt51.token_param == o3.token_param == "max_completion_tokens"
    assert not (gpt5.sampling or gpt51.sampling or o3.sampling) and gpt4.sampling and gpt4.token_param == "max_tokens"
    assert gpt5.off_switch == "reasoning_effort=minimal" and gpt51.off_switch == "reasoning_effort=none"
    assert o3.off_switch is None and gpt4.off_switch is None
    qwen3, qwen35 = profile_for("Qwen/Qwen3-8B"), profile_for("Qwen/Qwen3.5-27B")
    for qwen in (qwen3, qwen35):
        assert qwen.reasoning_parser == "qwen3" and qwen.tool_call_parser == "hermes" and qwen.tool_envelope == "hermes"
        assert qwen.off_switch == "chat_template_kwargs.enable_thinking=false"
        assert qwen.recommended["thinking"].source and qwen.recommended["non_thinking"].top_k == 20
    assert qwen3.recommended["thinking"].temperature == 0.6
    mistral = profile_for("mistralai/Mistral-Small-3.1-24B-Instruct-2503")
    assert mistral.tool_envelope == "mistral" == mistral.tool_call_parser
    assert PROFILES[-1].family == "default" and PROFILES[-1].pattern == ""


@pytest.mark.parametrize("model, efforts, default", [
    ("gpt-5-mini", ("minimal", "low", "medium", "high"), "medium"),
    ("gpt-5.1", ("none", "low", "medium", "high"), "none"),  # no xhigh
    ("gpt-5.4-mini", ("none", "low", "medium", "high", "xhigh"), "none"),
    ("gpt-5.5", ("none", "low", "medium", "high", "xhigh"), "medium"),
    ("gpt-5.6-mini", ("none", "low", "medium", "high", "xhigh"), "medium"),
    ("gpt-5-codex", ("low", "medium", "high"), "medium"),  # codex: no none
    ("gpt-5.1-codex-max", ("low", "medium", "high", "xhigh"), "medium"),
    ("gpt-5-pro", ("high",), "high"),
    ("o3-mini", ("low", "medium", "high"), "medium"),
])
def test_each_reasoning_family_names_its_efforts_and_default_with_a_source(model, efforts, default):
    profile = profile_for(model)
    assert profile.efforts == efforts and profile.default_effort == default and profile.effort_source
    assert profile.api == "responses" and profile.strict_tools and profile.token_param == "max_completion_tokens"
    assert (profile.effort_off == "none") == ("none" in efforts and "codex" not in model)
    if "codex" in model:
        with pytest.raises(ProfileError, match="no off switch"):
            check_condition(profile, thinking=False, model=model)


def test_only_openai_reasoning_families_default_to_the_responses_api():
    for model in ("gpt-4o", "Qwen/Qwen3-8B", "mistralai/Mistral-Small-3.1-24B-Instruct-2503", "my-model"):
        assert profile_for(model).api == "chat"
    assert with_overrides(profile_for("gpt-5.4-mini"), api="chat").api == "chat"
    assert with_overrides(profile_for("gpt-5.4-mini"), api="responses") == profile_for("gpt-5.4-mini")
    with pytest.raises(ProfileError, match="api must be one of chat, responses"):
        with_overrides(profile_for("gpt-4o"), api="completions")


def test_overrides_replace_one_rule_and_say_so():
    p = with_overrides(profile_for("gpt-5-mini"), token_param="max_tokens", sampling=True)
    assert p.token_param == "max_tokens" and p.sampling and p.effort_off == "minimal"
    assert p.family == "gpt-5 (overridden: sampling, token_param)"
    assert with_overrides(profile_for("gpt-4o")) == profile_for("gpt-4o")
    switched = with_overrides(profile_for("some/local-model"), reasoning_control="chat_template_kwargs")
    assert switched.off_switch and switched.thinking == "switchable"
    assert with_overrides(profile_for("Qwen/Qwen3-8B"), reasoning_parser="deepseek_r1").reasoning_parser == "deepseek_r1"
    with pytest.raises(ProfileError, match="thinking_param must be one of"):
        with_overrides(profile_for("x"), reasoning_control="think_harder")


def test_check_condition_refuses_no_thinking_where_reasoning_cannot_be_switched_off():
    for model in ("gpt-5-mini", "gpt-5.4", "Qwen/Qwen3.5-27B", "gpt-4o", "Qwen/Qwen2.5-7B-Instruct"):
        check_condition(profile_for(model), thinking=False, model=model)  # an off switch, or nothing to switch
    with pytest.raises(ProfileError, match="o3 .*no off switch, so the no_thinking condition cannot be run"):
        check_condition(profile_for("o3"), thinking=False, model="o3")
    with pytest.raises(ProfileError, match="no known way to switch thinking off for my-model"):
        check_condition(profile_for("my-model"), thinking=False, model="my-model")
    with pytest.raises(ProfileError, match="use one of: none, low, medium, high, xhigh"):
        check_condition(profile_for("gpt-5.4"), thinking=True, effort="minimal")
    with pytest.raises(ProfileError, match="take no reasoning_effort"):
        check_condition(profile_for("Qwen/Qwen3-8B"), thinking=True, effort="high")
    check_condition(profile_for("my-model"), thinking=True)


def test_recommended_sampling_by_mode():
    assert recommended_sampling("Qwen/Qwen3-8B").temperature == 0.6
    assert recommended_sampling("Qwen/Qwen3-8B", thinking=False).temperature == 0.7
    assert recommended_sampling("Qwen/Qwen2.5-7B-Instruct", thinking=True).top_p == 0.8  # its only mode
    assert "Mistral-Small-3.1" in recommended_sampling("mistralai/Mistral-Small-3.1-24B-Instruct-2503").source
    assert recommended_sampling("gpt-5-mini") is None


def test_a_recommended_parameter_no_request_sends_is_said_to_be_not_sent():
    """A penalty a card recommends is not part of any request (``Sampling`` has no penalty field): where a
    source names one, in the profiles and in the book's family table ("Your own model and server"), it says it is
    not sent."""
    import re
    from pathlib import Path

    from cpdagthink.method.decoding import Sampling

    penalty = re.compile(r"\b(\w+_penalty)\b")
    for profile in PROFILES:
        for mode, sampling in profile.recommended.items():
            for name in penalty.findall(sampling.source):
                assert name not in Sampling.model_fields, name
                assert re.search(rf"{name} [\d.]+ is not sent", sampling.source), (profile.family, mode, sampling.source)
    page = (Path(__file__).parents[1] / "book" / "using" / "own-model-and-server.md").read_text()
    rows = [line for line in page.splitlines() if line.startswith("| `Qwen") or line.startswith("| `mistral")]
    assert rows
    for row in rows:
        for name in set(penalty.findall(row)):
            assert re.search(rf"{name} [\d.]+ is not sent", row), row


def test_a_list_price_is_the_models_own_with_its_date_and_source():
    """The paper's API model is priced at OpenAI's list price as a dated page reports it; its Batch API price is
    half (OpenAI's batch pricing); a dated snapshot takes its model's price, any other name none."""
    price = list_price("gpt-5.4-mini")
    assert (price.input_per_m, price.output_per_m) == (0.75, 4.50)
    assert (price.batch_input_per_m, price.batch_output_per_m) == (price.input_per_m / 2, price.output_per_m / 2)
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", price.as_of) and price.source.startswith("https://")
    assert price.citation.startswith(f"list price as of {price.as_of}, {price.source}")
    assert list_price("gpt-5.4-mini-2026-03-17") == price and list_price("GPT-5.4-mini") == price
    assert list_price("gpt-5.4") != price and list_price("gpt-5.4-nano") != price
    assert list_price("gpt-5.4-minis") is list_price("gpt-4o-mini") is list_price("Qwen/Qwen3.5-27B") is None


def test_only_a_run_on_the_publishers_service_has_its_list_price():
    from cpdagthink.backends import backend_class

    openai, vllm = backend_class("openai"), backend_class("vllm")
    assert openai.list_price("gpt-5.4-mini", {}) == list_price("gpt-5.4-mini")
    assert openai.list_price("gpt-5.4-mini", {"base_url": "https://api.openai.com/v1"}) == list_price("gpt-5.4-mini")
    assert openai.list_price("gpt-5.4-mini", {"base_url": "http://127.0.0.1:8000/v1"}) is None  # another server
    assert openai.list_price("gpt-5.4-mini", {"base_url": ["https://api.openai.com/v1", "http://h/v1"]}) is None
    assert openai.list_price("gpt-5.4-mini", {"run_batch": "vllm"}) is None  # vLLM on this node
    assert vllm.list_price("Qwen/Qwen3.5-27B", {}) is None and backend_class("reference").list_price(None, {}) is None
