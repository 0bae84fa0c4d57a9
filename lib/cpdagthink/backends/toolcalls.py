"""Tool-call envelopes shared by chat-template backends (llama.cpp, vLLM offline, raw servers).

Hermes/Qwen-style templates write a call as (``style="hermes"``, vLLM's ``hermes`` tool parser)::

    <tool_call>
    {"name": "record_causal_analysis", "arguments": {...}}
    </tool_call>

and Mistral's as (``style="mistral"``, vLLM's ``mistral`` tool parser)::

    [TOOL_CALLS][{"name": "record_causal_analysis", "arguments": {...}}]

:func:`envelope_regex` wraps an *arguments* regex in exactly that text, so a regex-constrained decoder emits
a call the template and the server's tool parser recognise. :func:`parse_tool_calls` takes raw model
text apart again without ever raising: a call whose JSON is malformed keeps its raw arguments text so the
caller can record the parse error. :func:`split_reasoning` separates a ``<think>...</think>`` block, and
:func:`chat_messages` normalises OpenAI-style messages for templates and APIs.
"""

from __future__ import annotations

import json
import re
from typing import Any, Iterable

from ..method.chat import Completion, ToolCall

OPEN, CLOSE = "<tool_call>", "</tool_call>"
MISTRAL_OPEN = "[TOOL_CALLS]"
ENVELOPES = ("hermes", "mistral")
THINK_OPEN, THINK_CLOSE = "<think>", "</think>"

# Characters with a meaning in regex syntax; escaping only these keeps the pattern valid for Python ``re``,
# Rust ``regex`` (outlines_core) and xgrammar/guidance (vLLM) alike.
_META = set(r"\.^$|?*+()[]{}")


def regex_escape(text: str) -> str:
    """Escape a literal for Python ``re`` and the Rust-style engines used by outlines_core and vLLM."""
    out = []
    for ch in text:
        if ch in _META:
            out.append("\\" + ch)
        elif ch == "\n":
            out.append(r"\n")
        elif ch == "\t":
            out.append(r"\t")
        else:
            out.append(ch)
    return "".join(out)


def _envelope_parts(style: str) -> tuple[str, str]:
    """The text before ``{"name": ...`` and after the call's closing brace, for an envelope style."""
    if style == "hermes":
        return OPEN + "\n", "\n" + CLOSE
    if style == "mistral":
        return MISTRAL_OPEN + "[", "]"
    raise ValueError(f"unknown tool-call envelope {style!r}; choose one of {', '.join(ENVELOPES)}")


def envelope_text(name: str, arguments: str, *, style: str = "hermes") -> str:
    """One call as the template writes it (``arguments`` is JSON text, inserted verbatim)."""
    before, after = _envelope_parts(style)
    return f'{before}{{"name": {json.dumps(name)}, "arguments": {arguments}}}{after}'


def envelope_regex(tool_name: str, arguments_regex: str, *, style: str = "hermes") -> str:
    """Regex for one call in the envelope ``style``, e.g. hermes:
    ``<tool_call>\\n{"name": "<tool_name>", "arguments": ARGS}\\n</tool_call>``."""
    before, after = _envelope_parts(style)
    return (
        regex_escape(before + '{"name": ')
        + regex_escape(json.dumps(tool_name))
        + regex_escape(', "arguments": ')
        + f"(?:{arguments_regex})"
        + regex_escape("}" + after)
    )


_BLOCK = re.compile(re.escape(OPEN) + r"(.*?)(?:" + re.escape(CLOSE) + r"|\Z)", re.DOTALL)
_HEAD = re.compile(r'\A\s*\{\s*"name"\s*:\s*"((?:[^"\\]|\\.)*)"\s*,\s*"arguments"\s*:\s*(.*?)\s*\}\s*\Z', re.DOTALL)
_NAME = re.compile(r'"name"\s*:\s*"((?:[^"\\]|\\.)*)"')


def _unquote(raw: str) -> str:
    try:
        return json.loads(f'"{raw}"')
    except ValueError:
        return raw


def _parse_block(body: str) -> ToolCall:
    """One call from the text between the tags; arguments stay raw text (exactly as emitted) when possible."""
    head = _HEAD.match(body)
    if head:
        return ToolCall(name=_unquote(head.group(1)), arguments=head.group(2))
    try:
        obj = json.loads(body)
    except ValueError:
        obj = None
    if isinstance(obj, dict) and isinstance(obj.get("name"), str):
        args = obj.get("arguments", obj.get("parameters", {}))
        return ToolCall(name=obj["name"], arguments=args if isinstance(args, str) else json.dumps(args))
    name = _NAME.search(body)
    return ToolCall(name=_unquote(name.group(1)) if name else "", arguments=body.strip())


def _parse_mistral(body: str) -> list[ToolCall]:
    """Calls after ``[TOOL_CALLS]``: a JSON list of ``{"name", "arguments"}`` objects (v3 tokenizers), or
    ``name[ARGS]{...}`` (v11+ tokenizers). Arguments stay raw text where the JSON does not parse."""
    body = body.strip()
    if "[ARGS]" in body and not body.startswith("["):
        name, _, arguments = body.partition("[ARGS]")
        return [ToolCall(name=name.strip(), arguments=arguments.strip())]
    try:
        calls, _ = json.JSONDecoder().raw_decode(body)
    except ValueError:
        return [_parse_block(body.lstrip("[").rstrip("]"))]
    calls = calls if isinstance(calls, list) else [calls]
    return [ToolCall(name=str(c.get("name", "")), arguments=json.dumps(c.get("arguments", {})))
            for c in calls if isinstance(c, dict)]


def parse_tool_calls(text: str | None) -> tuple[str, list[ToolCall]]:
    """Split raw text into (visible text, tool calls). Never raises.

    Every ``<tool_call>...</tool_call>`` block becomes a :class:`ToolCall` (an unterminated final block, as
    left by ``max_tokens``, too); blocks are removed from the visible text, which is stripped. A Mistral
    ``[TOOL_CALLS]`` section (to the end of the text) is read the same way.
    """
    if not text:
        return "", []
    if MISTRAL_OPEN in text and OPEN not in text:
        visible, _, body = text.partition(MISTRAL_OPEN)
        return visible.strip(), _parse_mistral(body)
    calls: list[ToolCall] = []
    pieces: list[str] = []
    last = 0
    for match in _BLOCK.finditer(text):
        pieces.append(text[last : match.start()])
        calls.append(_parse_block(match.group(1)))
        last = match.end()
    pieces.append(text[last:])
    return "".join(pieces).strip(), calls


def split_reasoning(text: str | None, *, started: bool = False) -> tuple[str | None, str]:
    """Separate a leading ``<think>...</think>`` block: returns (reasoning or None, the rest).

    ``started``: the prompt already opened ``<think>`` (Qwen3-style templates), so text up to the first
    ``</think>`` is reasoning. An unterminated block is all reasoning (the budget ran out while thinking).
    """
    if not text:
        return None, ""
    body = text.lstrip()
    if body.startswith(THINK_OPEN):
        body = body[len(THINK_OPEN) :]
    elif not started:
        return None, text
    if THINK_CLOSE in body:
        reasoning, rest = body.split(THINK_CLOSE, 1)
        return reasoning.strip(), rest.lstrip()
    return body.strip(), ""


def chat_messages(messages: Iterable[dict[str, Any]], *, arguments_as: str = "str") -> list[dict[str, Any]]:
    """Copies of OpenAI-style messages safe to send or render.

    * ``content`` None becomes ``""`` (an assistant message with tool calls must carry ``""``, not null);
    * assistant tool calls get the full ``{"id", "type": "function", "function": {...}}`` shape, with
      deterministic ids ``call_<n>`` when missing, and following ``tool`` messages without a
      ``tool_call_id`` get the id of the call they answer (in order);
    * ``arguments_as="dict"`` parses arguments JSON into a dict for chat templates that apply ``tojson``
      (HF/Qwen); arguments that do not parse stay text (see :func:`render_unparsed_calls`).
    """
    out: list[dict[str, Any]] = []
    pending: list[str] = []  # ids of the last assistant turn's calls that no tool message has answered yet
    counter = 0
    for message in messages:
        msg = dict(message)
        if msg.get("content") is None:
            msg["content"] = ""
        if msg.get("role") == "assistant" and msg.get("tool_calls"):
            msg["tool_calls"] = [_full_call(call, call.get("id") or f"call_{counter + i}", arguments_as)
                                 for i, call in enumerate(msg["tool_calls"])]
            counter += len(msg["tool_calls"])
            pending = [call["id"] for call in msg["tool_calls"]]
        elif msg.get("role") == "tool":
            if not msg.get("tool_call_id") and pending:
                msg["tool_call_id"] = pending.pop(0)
            elif msg.get("tool_call_id") in pending:
                pending.remove(msg["tool_call_id"])
        out.append(msg)
    return out


def _full_call(call: dict[str, Any], call_id: str, arguments_as: str) -> dict[str, Any]:
    """One tool call in the full OpenAI shape, its arguments as :func:`chat_messages` says."""
    fn = dict(call.get("function", call))
    args = fn.get("arguments", {})
    if arguments_as == "dict" and isinstance(args, str):
        try:
            args = json.loads(args)
        except ValueError:
            pass
    elif arguments_as == "str" and not isinstance(args, str):
        args = json.dumps(args)
    return {"id": call_id, "type": "function", "function": {"name": fn.get("name", ""), "arguments": args}}


def render_unparsed_calls(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Assistant tool calls whose arguments are still text (unparseable) move into ``content`` verbatim.

    A template that applies ``tojson`` to a string would quote it; writing the raw envelope keeps the
    conversation exactly as the model produced it.
    """
    out = []
    for msg in messages:
        calls = msg.get("tool_calls") or []
        if msg.get("role") == "assistant" and any(isinstance(c["function"]["arguments"], str) for c in calls):
            text = "\n".join(envelope_text(c["function"]["name"], c["function"]["arguments"]
                                           if isinstance(c["function"]["arguments"], str)
                                           else json.dumps(c["function"]["arguments"], ensure_ascii=False))
                             for c in calls)
            msg = {k: v for k, v in msg.items() if k != "tool_calls"}
            msg["content"] = (msg.get("content") + "\n" if msg.get("content") else "") + text
        out.append(msg)
    return out


def completion_from_text(
    text: str,
    *,
    prompt_tokens: int,
    completion_tokens: int,
    finish_reason: str | None,
    latency_s: float,
    thinking_started: bool = False,
    meta: dict[str, Any] | None = None,
) -> Completion:
    """Split generated text into reasoning, visible text and tool calls."""
    reasoning, rest = split_reasoning(text, started=thinking_started)
    visible, calls = parse_tool_calls(rest)
    return Completion(
        text=visible,
        tool_calls=calls,
        reasoning=reasoning,
        raw=text,
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        latency_s=latency_s,
        finish_reason=finish_reason,
        meta=dict(meta or {}),
    )
