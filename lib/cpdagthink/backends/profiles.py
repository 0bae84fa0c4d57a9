"""Model profiles: each model family's request rules, so a paper-scale run is accepted on first use.

A :class:`ModelProfile` says which token-budget parameter a family takes, whether sampling parameters may
be sent, how its reasoning is controlled (``reasoning_effort`` values, the chat template's
``enable_thinking``, or not at all) and how it is switched off, which vLLM reasoning and tool-call parsers
serve it, which tool-call envelope a regex-constrained call is wrapped in, and the sampling its publisher
recommends (with the source). For reasoning families it also names the default effort and the accepted values,
each with its source, which OpenAI API serves the family by default (``responses`` for the GPT-5 family and the
o-series, whose function tools cannot be combined with an effort on chat completions from gpt-5.4 on), and
whether the service enforces a function tool's schema (``strict``). Where a family's models have a published list
price, ``prices`` holds it per model (:class:`ListPrice`, with the date and the page it was read from;
:func:`list_price`). :func:`profile_for` matches a model name against :data:`PROFILES` (first
match wins; the last entry is the conservative default). Backends apply the profile; every rule can be
overridden by a backend option (see :func:`with_overrides`).

:func:`check_condition` refuses early what a family cannot do: a condition that asks for thinking off
(``no_thinking``) on a family whose reasoning cannot be switched off.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Literal, Mapping

from ..errors import CpdagthinkError

TokenParam = Literal["max_tokens", "max_completion_tokens"]
ReasoningControl = Literal["reasoning_effort", "chat_template_kwargs", "none"]
ToolEnvelope = Literal["hermes", "mistral"]
# switchable: on/off per request; always_on: reasons and cannot stop; absent: never reasons;
# unknown: a model no profile knows (its thinking cannot be switched off by a known parameter).
ThinkingSwitch = Literal["switchable", "always_on", "absent", "unknown"]
Api = Literal["chat", "responses"]  # OpenAI's /v1/chat/completions or /v1/responses
APIS = ("chat", "responses")

TOKEN_PARAMS = ("max_tokens", "max_completion_tokens")
REASONING_CONTROLS = ("reasoning_effort", "chat_template_kwargs", "none")
# OpenAI's documented reasoning_effort values (chat completions API reference, ReasoningEffort).
OPENAI_EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh")


class ProfileError(CpdagthinkError, ValueError):
    """A request, option or condition that the model family's rules do not allow."""


@dataclass(frozen=True)
class RecommendedSampling:
    """The sampling a model's publisher recommends, with where it says so.

    The fields mirror :class:`~cpdagthink.method.decoding.Sampling`'s (top_k 0, top_p 1, min_p 0 = that filter
    off). Settings the backends do not apply (e.g. a repetition penalty) are named in ``note`` rather than
    silently dropped.
    """

    temperature: float
    top_p: float = 1.0
    top_k: int = 0
    min_p: float = 0.0
    source: str = ""
    note: str = ""


@dataclass(frozen=True)
class ListPrice:
    """A model's list price on its publisher's service, in dollars per million tokens: direct (the standard
    tier at short context, which every request here is: prompts under a thousand tokens) and through the Batch
    API, as of the date ``source`` states, which reports the publisher's pricing page ``reported_from``."""

    input_per_m: float
    output_per_m: float
    batch_input_per_m: float
    batch_output_per_m: float
    as_of: str  # ISO date
    source: str  # the page read, a URL
    reported_from: str = ""  # the publisher's page it reports, a URL

    @property
    def citation(self) -> str:
        """Where the price comes from, as a page or a cost note says it."""
        reporting = f" (reporting {self.reported_from})" if self.reported_from else ""
        return f"list price as of {self.as_of}, {self.source}{reporting}"


@dataclass(frozen=True)
class ModelProfile:
    """One model family's request rules (see the module docstring)."""

    family: str
    pattern: str  # regular expression matched at the start of the model name, case-insensitive
    token_param: TokenParam = "max_tokens"
    sampling: bool = True  # may temperature / top_p (and top_k / min_p on vLLM) be sent
    reasoning_control: ReasoningControl = "none"
    efforts: tuple[str, ...] = ()  # allowed reasoning_effort values (reasoning_control "reasoning_effort")
    effort_off: str | None = None  # the reasoning_effort value that switches reasoning off, if any
    thinking: ThinkingSwitch = "absent"
    reasoning_parser: str | None = None  # vLLM --reasoning-parser / structured_outputs_config
    tool_envelope: ToolEnvelope = "hermes"  # text envelope of a regex-constrained tool call
    tool_call_parser: str | None = None  # vLLM --tool-call-parser that reads that envelope back
    recommended: dict[str, RecommendedSampling] = field(default_factory=dict)  # by mode: "thinking" / "non_thinking"
    default_effort: str | None = None  # the effort the service applies when none is sent
    effort_source: str = ""  # where ``efforts`` and ``default_effort`` come from
    api: Api = "chat"  # the OpenAI API the openai backend uses for this family (``api`` option overrides)
    strict_tools: bool = False  # the service enforces a function tool's schema when it is marked ``strict``
    prices: dict[str, ListPrice] = field(default_factory=dict)  # by model name (a dated snapshot takes its own)
    notes: str = ""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def off_switch(self) -> str | None:
        """What a request sends to switch reasoning off (None: there is no such switch)."""
        if self.reasoning_control == "chat_template_kwargs":
            return "chat_template_kwargs.enable_thinking=false"
        if self.reasoning_control == "reasoning_effort" and self.effort_off:
            return f"reasoning_effort={self.effort_off}"
        return None


_QWEN3_SOURCE = "Qwen3 model card (huggingface.co/Qwen/Qwen3-8B), Best Practices"
_QWEN35_SOURCE = "Qwen3.5 model card (huggingface.co/Qwen/Qwen3.5-27B), recommended sampling parameters"
# The card's presence_penalty is not part of this project's sampling: no backend sends a presence penalty.
_NOT_SENT = "; the card's presence_penalty 1.5 is not sent (no request sets a presence penalty)"
_REASONING_NOTE = ("OpenAI reasoning model: temperature/top_p other than the default 1 and max_tokens are "
                   "rejected with HTTP 400; the budget covers reasoning and visible tokens.")
# OpenAI API reference, ReasoningEffort (chat completions reasoning_effort, responses reasoning.effort):
_EFFORT_REF = "OpenAI API reference, ReasoningEffort"
_SRC_BEFORE_51 = _EFFORT_REF + ": models before gpt-5.1 default to medium and do not support none"
_SRC_51 = (_EFFORT_REF + ": gpt-5.1 defaults to none; its values are none, low, medium, high (the service's "
           "refusal of 'minimal' lists the same four)")
_SRC_XHIGH = _EFFORT_REF + ": xhigh is supported for all models after gpt-5.1-codex-max"
_SRC_55 = ("reported from the service: gpt-5.5 and gpt-5.6 apply a default effort (medium), so they reason "
           "unless sent none")
_SRC_CODEX = "reported from the service: codex models take no none (no off switch); Codex CLI docs: default medium"
_OPENAI_REASONING = dict(token_param="max_completion_tokens", sampling=False, reasoning_control="reasoning_effort",
                         api="responses", strict_tools=True)
_ALL_EFFORTS_51 = ("none", "low", "medium", "high", "xhigh")
# OpenAI's list prices of the GPT-5.4 family (standard tier under 270K context; Batch API half of it), as a
# dated page reports them from OpenAI's pricing page. Read before a run: prices change, a given price wins.
_OPENAI_PRICING = "https://developers.openai.com/api/docs/pricing"
_PRICES_54 = dict(as_of="2026-04-13", source="https://benchlm.ai/blog/posts/openai-api-pricing",
                  reported_from=_OPENAI_PRICING)
GPT_54_PRICES = {
    "gpt-5.4": ListPrice(2.50, 15.00, 1.25, 7.50, **_PRICES_54),
    "gpt-5.4-mini": ListPrice(0.75, 4.50, 0.375, 2.25, **_PRICES_54),
    "gpt-5.4-nano": ListPrice(0.20, 1.25, 0.10, 0.625, **_PRICES_54),
}

PROFILES: tuple[ModelProfile, ...] = (
    ModelProfile(
        "gpt-5-pro", r"gpt-5(\.\d+)?-pro", efforts=("high",), default_effort="high", thinking="always_on",
        effort_source=_EFFORT_REF + ": gpt-5-pro defaults to (and only supports) high", **_OPENAI_REASONING,
        notes=_REASONING_NOTE + " gpt-5-pro defaults to and only supports reasoning_effort=high."),
    ModelProfile(
        "codex (gpt-5.1-codex-max and later)", r"gpt-5\.(1-codex-max|([2-9]|\d\d+)-codex)",
        efforts=("low", "medium", "high", "xhigh"), default_effort="medium", thinking="always_on",
        effort_source=f"{_SRC_CODEX}; {_SRC_XHIGH}", **_OPENAI_REASONING,
        notes=_REASONING_NOTE + " Codex models reason at every effort: no off switch."),
    ModelProfile(
        "codex (gpt-5-codex, gpt-5.1-codex)", r"gpt-5(\.1)?-codex", efforts=("low", "medium", "high"),
        default_effort="medium", thinking="always_on", effort_source=f"{_SRC_CODEX}; {_SRC_XHIGH}",
        **_OPENAI_REASONING, notes=_REASONING_NOTE + " Codex models reason at every effort: no off switch."),
    ModelProfile(
        "gpt-5.5+", r"gpt-5\.([5-9]|\d\d+)(?!\d)", efforts=_ALL_EFFORTS_51, default_effort="medium",
        effort_off="none", thinking="switchable", effort_source=f"{_SRC_55}; {_SRC_XHIGH}", **_OPENAI_REASONING,
        notes=_REASONING_NOTE + " gpt-5.5 and later reason at medium unless sent none; on chat completions "
              "they refuse function tools unless reasoning_effort is none."),
    ModelProfile(
        "gpt-5.2-5.4", r"gpt-5\.[2-4](?!\d)", efforts=_ALL_EFFORTS_51, default_effort="none", effort_off="none",
        thinking="switchable", effort_source=f"{_SRC_51} (and later models); {_SRC_XHIGH}", **_OPENAI_REASONING,
        prices=GPT_54_PRICES,
        notes=_REASONING_NOTE + " Default none (no reasoning): send reasoning_effort to make them reason. From "
              "gpt-5.4 on, chat completions refuse function tools together with an effort: use the Responses API."),
    ModelProfile(
        "gpt-5.1", r"gpt-5\.1(?!\d)", efforts=("none", "low", "medium", "high"), default_effort="none",
        effort_off="none", thinking="switchable", effort_source=_SRC_51, **_OPENAI_REASONING,
        notes=_REASONING_NOTE + " Default none (no reasoning); no minimal and no xhigh."),
    ModelProfile(
        "gpt-5", r"gpt-5(?![.\d])", efforts=("minimal", "low", "medium", "high"), default_effort="medium",
        effort_off="minimal", thinking="switchable", effort_source=_SRC_BEFORE_51, **_OPENAI_REASONING,
        notes=_REASONING_NOTE + " Models before gpt-5.1 default to medium and do not support none; "
              "minimal is the lowest effort (a few reasoning tokens may remain). gpt-5-chat-* is not a "
              "reasoning model: pass token_param/reasoning options to override."),
    ModelProfile(
        "o-series", r"o[134](-|$)", efforts=("low", "medium", "high"), default_effort="medium", thinking="always_on",
        effort_source=_SRC_BEFORE_51 + "; the reasoning guide lists low, medium, high", **_OPENAI_REASONING,
        notes=_REASONING_NOTE + " o1/o3/o4 reason at every effort: no off switch."),
    ModelProfile(
        "gpt-4", r"(chatgpt-4|gpt-4)", strict_tools=True, notes="Classic chat model: max_tokens and sampling parameters accepted."),
    ModelProfile(
        "qwen3.5", r"(qwen/)?qwen3\.[5-9]", reasoning_control="chat_template_kwargs", thinking="switchable",
        reasoning_parser="qwen3", tool_envelope="hermes", tool_call_parser="hermes",
        recommended={
            "thinking": RecommendedSampling(1.0, 0.95, 20, 0.0, _QWEN35_SOURCE + " (thinking, general)" + _NOT_SENT),
            "non_thinking": RecommendedSampling(0.7, 0.8, 20, 0.0, _QWEN35_SOURCE + " (instruct, general)" + _NOT_SENT),
        },
        notes="Qwen3.5/3.6 templates write tool calls as XML (<function=...>, vLLM parser qwen3_coder); the "
              "constrained call is the Hermes JSON envelope, which the hermes parser reads back."),
    ModelProfile(
        "qwen3", r"(qwen/)?qwen3(?![.\d])", reasoning_control="chat_template_kwargs", thinking="switchable",
        reasoning_parser="qwen3", tool_envelope="hermes", tool_call_parser="hermes",
        recommended={
            "thinking": RecommendedSampling(0.6, 0.95, 20, 0.0, _QWEN3_SOURCE + " (thinking mode; do not use greedy)"),
            "non_thinking": RecommendedSampling(0.7, 0.8, 20, 0.0, _QWEN3_SOURCE + " (non-thinking mode)"),
        },
        notes="Hybrid thinking switched by the chat template's enable_thinking."),
    ModelProfile(
        "qwen2.5", r"(qwen/)?qwen2\.5", tool_envelope="hermes", tool_call_parser="hermes",
        recommended={"non_thinking": RecommendedSampling(0.7, 0.8, 20, 0.0,
                                              "Qwen2.5 generation_config.json; its repetition_penalty 1.05 is not sent "
                                              "(no request sets a repetition penalty)")},
        notes="No thinking mode; Qwen's docs name hermes as the vLLM tool parser for Qwen2.5."),
    ModelProfile(
        "mistral", r"mistralai/", tool_envelope="mistral", tool_call_parser="mistral",
        recommended={"non_thinking": RecommendedSampling(0.15, 1.0, 0, 0.0,
                                              "Mistral-Small-3.1-24B-Instruct-2503 model card (temperature 0.15)")},
        notes="Tool calls as [TOOL_CALLS][{...}]; vLLM serves Mistral checkpoints with --tokenizer-mode mistral "
              "--tool-call-parser mistral. Magistral (reasoning) models: override reasoning_parser=mistral."),
    ModelProfile(
        "default", r"", thinking="unknown",
        notes="Unknown family: max_tokens, sampling sent, no reasoning control; no_thinking is refused until "
              "a reasoning control is given (reasoning_effort or thinking_param=chat_template_kwargs)."),
)


def profile_for(model: str) -> ModelProfile:
    """The first profile whose pattern matches the start of ``model`` (case-insensitive); the default last."""
    for profile in PROFILES:
        if re.match(profile.pattern, model, re.IGNORECASE):
            return profile
    return PROFILES[-1]


def list_price(model: str) -> ListPrice | None:
    """``model``'s list price from its profile's ``prices`` (a dated snapshot, ``gpt-5.4-mini-2026-03-17``,
    takes its model's); None where none is recorded."""
    for name, price in profile_for(model).prices.items():
        if re.fullmatch(re.escape(name) + r"(-\d{4}-\d{2}-\d{2})?", model, re.IGNORECASE):
            return price
    return None


def recommended_sampling(model: str, thinking: bool = True) -> RecommendedSampling | None:
    """The publisher's recommended sampling for ``model`` in the thinking or non-thinking mode (a family
    with one mode only answers with it); None where no recommendation is recorded."""
    found = profile_for(model).recommended
    order = ("thinking", "non_thinking") if thinking else ("non_thinking", "thinking")
    return next((found[mode] for mode in order if mode in found), None)


def with_overrides(
    profile: ModelProfile,
    *,
    token_param: str | None = None,
    reasoning_control: str | None = None,
    reasoning_parser: str | None = None,
    sampling: bool | None = None,
    api: str | None = None,
) -> ModelProfile:
    """``profile`` with the backend options that override its rules (None keeps the rule)."""
    changes: dict[str, Any] = {}
    if api is not None and api != profile.api:
        if api not in APIS:
            raise ProfileError(f"api must be one of {', '.join(APIS)}, got {api!r}")
        changes["api"] = api
    if token_param is not None:
        if token_param not in TOKEN_PARAMS:
            raise ProfileError(f"token_param must be one of {', '.join(TOKEN_PARAMS)}, got {token_param!r}")
        changes["token_param"] = token_param
    if reasoning_control is not None:
        if reasoning_control not in REASONING_CONTROLS:
            raise ProfileError(f"thinking_param must be one of {', '.join(REASONING_CONTROLS)}, got {reasoning_control!r}")
        changes["reasoning_control"] = reasoning_control
        if reasoning_control == "chat_template_kwargs":
            changes["thinking"] = "switchable"
        elif reasoning_control == "reasoning_effort" and not profile.efforts:
            changes["efforts"] = OPENAI_EFFORTS
    if reasoning_parser is not None:
        changes["reasoning_parser"] = reasoning_parser or None
    if sampling is not None:
        changes["sampling"] = bool(sampling)
    if not changes:
        return profile
    return replace(profile, family=f"{profile.family} (overridden: {', '.join(sorted(changes))})", **changes)


def check_effort(profile: ModelProfile, effort: str | None) -> None:
    """Refuse a ``reasoning_effort`` the family does not take, naming the ones it does."""
    if effort is None:
        return
    if profile.reasoning_control != "reasoning_effort":
        raise ProfileError(f"{profile.family} models take no reasoning_effort (their reasoning control is "
                           f"{profile.reasoning_control}); pass thinking_param=reasoning_effort to send it anyway")
    if profile.efforts and effort not in profile.efforts:
        raise ProfileError(f"reasoning_effort={effort!r} is not supported by {profile.family} models; "
                           f"use one of: {', '.join(profile.efforts)}")


def check_condition(profile: ModelProfile, thinking: bool, *, model: str = "", effort: str | None = None) -> None:
    """Refuse early a condition the family cannot serve: thinking off (``no_thinking``) where reasoning
    cannot be switched off. ``effort``: a user's reasoning_effort override (a value that is itself an off
    switch, e.g. ``minimal``, makes every request of the run thinking-off)."""
    check_effort(profile, effort)
    if thinking:
        return
    name = model or profile.family
    if profile.off_switch is not None or profile.thinking == "absent":
        return
    if profile.thinking == "always_on":
        raise ProfileError(f"{name} ({profile.family}) reasons on every request and has no off switch, so the "
                           "no_thinking condition cannot be run on it; leave it out for this model")
    raise ProfileError(f"no known way to switch thinking off for {name}: no profile matches it. Pass "
                       "thinking_param=chat_template_kwargs (vLLM chat templates with enable_thinking) or "
                       "thinking_param=reasoning_effort with a family that has an off value")


class ProfiledFamily:
    """The family answers (:class:`~cpdagthink.backends.base.Backend`) of a backend whose models are read
    through :data:`PROFILES`, the OpenAI-compatible services and vLLM: mixed in before ``Backend``. A run
    with no model named has no profile to read, so it is checked and sampled as any backend's."""

    @classmethod
    def recommended_sampling(cls, model: str | None, thinking: bool) -> RecommendedSampling | None:
        return recommended_sampling(model, thinking) if model else None

    @classmethod
    def sends_sampling(cls, model: str | None) -> bool:
        return profile_for(model).sampling if model else True

    @classmethod
    def check_condition(cls, model: str | None, thinking: bool, options: Mapping[str, Any]) -> None:
        if model:
            check_condition(profile_for(model), thinking, model=model, effort=options.get("reasoning_effort"))
