"""Request payloads for OpenAI-compatible APIs, as pure functions of a :class:`Request` and a model profile:
the keyword arguments of ``chat.completions.create`` (:func:`chat_kwargs`) and of ``responses.create``
(:func:`responses_kwargs`), each with a note of what was enforced and sent. Tests check the exact payloads.

* Model profiles (:mod:`.profiles`) decide the shape: ``max_tokens`` or ``max_completion_tokens``, whether
  temperature/top_p are sent (never to OpenAI reasoning models), and the reasoning control:
  ``reasoning_effort`` (``Request.thinking=False`` sends the family's off value, e.g. ``minimal``/``none``) or
  the chat template's ``enable_thinking`` (vLLM servers).
* Responses API: ``input`` items, flat function tools, ``reasoning={"effort": ..., "summary": "auto"}``,
  ``max_output_tokens``, ``store=False`` with ``include=["reasoning.encrypted_content"]``: the service keeps
  nothing, so turn 1's reasoning items travel back with turn 2 (the assistant message's ``reasoning_items``,
  before its ``function_call``/``function_call_output`` items).
* Tools are sent as given (``strict`` with a strict-compatible schema, :func:`strict_schema`, where the profile
  says the service enforces it; ``note["schema_enforced"]``); ``tool_choice`` ``"auto"``/``"required"``/
  ``"none"`` pass through and any other string is a forced call of that function.
* Constraints: with ``regex_mode="vllm"`` the regex goes in ``extra_body={"structured_outputs": {"regex":
  ...}}``; when it constrains a tool's arguments it is wrapped in the family's envelope (Hermes ``<tool_call>``
  or Mistral ``[TOOL_CALLS]``) so the server's tool parser still sees a call. vLLM cannot combine a *named*
  tool choice with ``structured_outputs``, so a forced tool choice is sent as ``"auto"`` there (the regex
  forces the call anyway; ``note["tool_choice_requested"]`` records it). With ``regex_mode="none"`` a
  constraint is enforced only where the API can: a strict or forced tool call or, without tools, a
  json_schema response format; ``note["constraint"]`` says which, or ``"not enforced"``.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Literal, Sequence, get_args

from ...method.chat import Request
from ..profiles import ModelProfile, profile_for
from ..toolcalls import chat_messages, envelope_regex

RegexMode = Literal["none", "vllm"]
REGEX_MODES = get_args(RegexMode)
# The keywords a ``strict`` function schema may use (the service's structured-outputs subset).
_STRICT_KEYWORDS = frozenset({
    "type", "properties", "required", "additionalProperties", "items", "enum", "const", "anyOf", "$defs", "$ref",
    "description", "pattern", "format", "minItems", "maxItems", "minimum", "maximum", "exclusiveMinimum",
    "exclusiveMaximum", "multipleOf"})


def carries_reasoning(request: Request) -> bool:
    """Whether ``request``'s messages carry reasoning items back to the service."""
    return any(m.get("reasoning_items") for m in request.messages)


def without_reasoning_items(request: Request) -> Request:
    """``request`` with no reasoning items carried in its messages (each turn's text and calls kept)."""
    return dataclasses.replace(request, messages=tuple({k: v for k, v in m.items() if k != "reasoning_items"}
                                                       for m in request.messages))


def tool_choice_param(choice: str | None, *, flat: bool = False) -> Any:
    """``tool_choice`` as the API takes it: a mode, or a forced function (nested for chat completions, flat for
    the Responses API)."""
    if choice is None or choice in ("auto", "required", "none"):
        return choice
    return {"type": "function", "name": choice} if flat else {"type": "function", "function": {"name": choice}}


def strict_schema(schema: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """``schema`` made acceptable to the service's ``strict`` function tools, and what that loosened.

    Every object lists all its properties as required (an optional one is sent as nullable) and allows no
    others; tuple positions (``prefixItems``) become ``items`` (exact when every position takes the same
    schema, as the CausalAnalysis pairs and triples do); keywords outside the strict subset are dropped."""
    loosened: list[str] = []
    strict = _strict_node(schema, "", loosened)
    return strict, list(dict.fromkeys(loosened))  # each loosening once, however many branches share it


def _strict_node(node: Any, path: str, loosened: list[str]) -> Any:
    """One node of :func:`strict_schema` at JSON-pointer ``path``; each loosening is appended to ``loosened``."""
    if isinstance(node, list):
        return [_strict_node(v, path, loosened) for v in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in ("properties", "$defs"):
            out[key] = {name: _strict_node(v, f"{path}/{key}/{name}", loosened) for name, v in value.items()}
        elif key in _STRICT_KEYWORDS:
            out[key] = _strict_node(value, f"{path}/{key}", loosened)
        elif key != "prefixItems":
            loosened.append(f"{path or '/'}: {key} dropped")
    if "prefixItems" in node:
        out["items"] = _one_item(_strict_node(node["prefixItems"], f"{path}/prefixItems", loosened), path, loosened)
    if out.get("type") == "object" or "properties" in out:
        _close_object(out, node.get("required", ()), path, loosened)
    return out


def _one_item(positions: list[Any], path: str, loosened: list[str]) -> Any:
    """The one ``items`` schema for a tuple's positions: theirs where they agree, else any of them."""
    distinct = [p for i, p in enumerate(positions) if p not in positions[:i]]
    if len(distinct) > 1:
        loosened.append(f"{path or '/'}: tuple positions merged into one item schema")
    return distinct[0] if len(distinct) == 1 else {"anyOf": distinct}


def _close_object(out: dict[str, Any], required: Sequence[str], path: str, loosened: list[str]) -> None:
    """Make the object schema ``out`` require all its properties (the optional ones nullable) and no others."""
    properties = out.setdefault("properties", {})
    for name in [n for n in properties if n not in required]:
        properties[name] = {"anyOf": [properties[name], {"type": "null"}]}
        loosened.append(f"{path}/properties/{name}: optional, sent as nullable")
    out["required"] = list(properties)
    out["additionalProperties"] = False


def _add_tools(kwargs: dict[str, Any], note: dict[str, Any], request: Request, profile: ModelProfile, *,
               flat: bool) -> str | None:
    """Put the request's tools into ``kwargs`` as the API takes them (chat: nested under ``function``; Responses:
    flat), ``strict`` with a strict-compatible schema where the service enforces it, and say so in ``note``.
    Returns the tool choice to send (None without tools)."""
    if not request.tools:
        return None
    tools, loosened = [], []
    for tool in request.tools:
        fn = dict(tool.get("function", tool))
        if profile.strict_tools:
            fn["parameters"], changes = strict_schema(fn.get("parameters") or {"type": "object", "properties": {}})
            fn["strict"] = True
            loosened += [f"{fn.get('name')}: {c}" for c in changes]
        elif flat:
            fn["strict"] = False  # the Responses API makes function tools strict unless told otherwise
        tools.append({"type": "function", **fn} if flat else {**tool, "function": fn})
    kwargs["tools"] = tools
    note["schema_enforced"] = profile.strict_tools
    if loosened:
        note["schema_loosened"] = loosened
    return request.tool_choice


def _effort(request: Request, profile: ModelProfile, reasoning_effort: str | None) -> str | None:
    """The reasoning effort to send: the family's off value on a thinking-off request, else the chosen one."""
    if profile.reasoning_control != "reasoning_effort":
        return None
    return profile.effort_off if (not request.thinking and profile.effort_off) else reasoning_effort


def _sampling(request: Request, profile: ModelProfile, vllm_server: bool) -> tuple[dict[str, Any], dict[str, Any], list[str]]:
    """(top-level sampling kwargs, vLLM extra_body sampling, settings not sent)."""
    top: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    not_sent: list[str] = []
    if profile.sampling:
        top["temperature"] = request.temperature
        if request.top_p != 1.0:
            top["top_p"] = request.top_p
    else:  # the family takes only the API's default (1); anything else is rejected with HTTP 400
        not_sent += [f"{k}={v}" for k, v in (("temperature", request.temperature), ("top_p", request.top_p)) if v != 1.0]
    for name, value, off in (("top_k", request.top_k, 0), ("min_p", request.min_p, 0.0)):
        if value == off:
            continue
        if vllm_server and profile.sampling:
            extra[name] = value
        else:
            not_sent.append(f"{name}={value}")
    return top, extra, not_sent


def chat_kwargs(
    request: Request,
    model: str,
    *,
    profile: ModelProfile | None = None,
    regex_mode: str = "none",
    reasoning_effort: str | None = None,
    send_seed: bool = True,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The ``chat.completions.create`` keyword arguments for ``request`` and a note of what was enforced
    and sent. ``profile`` defaults to the model's (:func:`profiles.profile_for`). Pure: tests check the
    exact payload."""
    if regex_mode not in REGEX_MODES:
        raise ValueError(f"regex_mode must be one of {REGEX_MODES}, got {regex_mode!r}")
    profile = profile or profile_for(model)
    vllm_server = regex_mode == "vllm"
    kwargs: dict[str, Any] = {
        "model": model,
        "messages": chat_messages(request.messages, arguments_as="str"),
        profile.token_param: request.max_tokens,
    }
    sampling, extra, not_sent = _sampling(request, profile, vllm_server)
    kwargs.update(sampling)
    if send_seed:
        kwargs["seed"] = request.seed
    note: dict[str, Any] = {"api": "chat"}
    if not_sent:
        note["sampling_not_sent"] = not_sent
    choice = _add_tools(kwargs, note, request, profile, flat=False)
    choice = _chat_constraint(kwargs, extra, note, request, profile, choice, vllm_server=vllm_server)
    if choice is not None:
        kwargs["tool_choice"] = tool_choice_param(choice)
        note["tool_choice_sent"] = choice
    effort = _effort(request, profile, reasoning_effort)
    if effort is not None:
        kwargs["reasoning_effort"] = effort
        note["reasoning_effort_sent"] = effort
    if profile.reasoning_control == "chat_template_kwargs":
        extra["chat_template_kwargs"] = {"enable_thinking": bool(request.thinking)}
    if extra:
        kwargs["extra_body"] = extra
    return kwargs, note


def _chat_constraint(kwargs: dict[str, Any], extra: dict[str, Any], note: dict[str, Any], request: Request,
                     profile: ModelProfile, choice: str | None, *, vllm_server: bool) -> str | None:
    """Put the request's constraint into ``kwargs`` (or a vLLM server's ``extra``) and say in ``note`` how it is
    enforced. Returns the tool choice to send: a vLLM server cannot combine a named one with a regex."""
    c = request.constraint
    if c is None:
        return choice
    if not vllm_server:
        if c.json_schema is not None and not request.tools:
            kwargs["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": c.tool or "output", "schema": c.json_schema, "strict": True},
            }
            note["constraint"] = "response_format json_schema"
        else:
            note["constraint"] = _tool_constraint(request, choice, profile)
        return choice
    if c.tool and request.tools:
        regex = envelope_regex(c.tool, c.regex, style=profile.tool_envelope)
        if choice not in (None, "auto"):
            note["tool_choice_requested"] = choice
            choice = "auto"  # vLLM: a named tool choice cannot be combined with structured_outputs
        note["constraint"] = f"regex ({profile.tool_envelope} envelope)"
        note["schema_enforced"] = True
    else:
        regex = c.regex
        note["constraint"] = "regex"
    extra["structured_outputs"] = {"regex": regex}
    return choice


def _tool_constraint(request: Request, choice: str | None, profile: ModelProfile) -> str:
    """How an API without regex support enforces a constraint on a tool's arguments, if at all."""
    if not (request.constraint and request.constraint.tool and request.tools):
        return "not enforced"
    forced = choice not in (None, "auto", "none")
    if profile.strict_tools:
        return "tool schema (strict function tool" + (", forced call)" if forced else ")")
    return "tool schema (forced tool call)" if forced else "not enforced"


def response_input(messages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Chat messages as Responses API ``input`` items: messages stay messages, an assistant's tool calls become
    ``function_call`` items preceded by the reasoning items that produced them, tool results become
    ``function_call_output`` items (call ids as the messages carry them)."""
    items: list[dict[str, Any]] = []
    for message in chat_messages(messages, arguments_as="str"):
        role = message["role"]
        if role == "assistant":
            items += [dict(item) for item in message.get("reasoning_items", ())]
            if message["content"]:
                items.append({"role": "assistant", "content": message["content"]})
            items += [{"type": "function_call", "call_id": call["id"], "name": call["function"]["name"],
                       "arguments": call["function"]["arguments"]} for call in message.get("tool_calls", ())]
        elif role == "tool":
            items.append({"type": "function_call_output", "call_id": message["tool_call_id"],
                          "output": message["content"]})
        else:
            items.append({"role": role, "content": message["content"]})
    return items


def responses_kwargs(
    request: Request,
    model: str,
    *,
    profile: ModelProfile | None = None,
    reasoning_effort: str | None = None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The ``responses.create`` keyword arguments for ``request`` and a note of what was enforced and sent.
    Nothing is stored by the service (``store=False``); a reasoning family's reasoning comes back encrypted
    (``include``) with a summary, so the next turn can carry it. Pure: tests check the exact payload."""
    profile = profile or profile_for(model)
    kwargs: dict[str, Any] = {"model": model, "input": response_input(request.messages),
                              "max_output_tokens": request.max_tokens, "store": False}
    sampling, _, not_sent = _sampling(request, profile, vllm_server=False)
    kwargs.update(sampling)
    note: dict[str, Any] = {"api": "responses", "sampling_not_sent": [*not_sent, f"seed={request.seed}"]}  # no seed here
    choice = _add_tools(kwargs, note, request, profile, flat=True)
    c = request.constraint
    if c is not None:
        if c.json_schema is not None and not request.tools:
            kwargs["text"] = {"format": {"type": "json_schema", "name": c.tool or "output", "schema": c.json_schema,
                                         "strict": True}}
            note["constraint"] = "text format json_schema"
        else:
            note["constraint"] = _tool_constraint(request, choice, profile)
    if choice is not None:
        kwargs["tool_choice"] = tool_choice_param(choice, flat=True)
        note["tool_choice_sent"] = choice
    if profile.reasoning_control == "reasoning_effort":
        _add_reasoning(kwargs, note, request, profile, reasoning_effort)
    return kwargs, note


def _add_reasoning(kwargs: dict[str, Any], note: dict[str, Any], request: Request, profile: ModelProfile,
                   reasoning_effort: str | None) -> None:
    """The Responses API's reasoning settings: the effort, a summary unless reasoning is off, and the
    encrypted reasoning to carry into the next turn."""
    effort = _effort(request, profile, reasoning_effort)
    reasoning: dict[str, Any] = {}
    if effort is not None:
        reasoning["effort"] = note["reasoning_effort_sent"] = effort
    if (effort or profile.default_effort) != "none":
        reasoning["summary"] = "auto"
    if reasoning:
        kwargs["reasoning"] = reasoning
    kwargs["include"] = ["reasoning.encrypted_content"]
