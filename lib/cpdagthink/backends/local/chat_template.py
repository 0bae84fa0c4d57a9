"""A GGUF model's chat template, rendered as ``llama_cpp.llama_chat_format.Jinja2ChatFormatter`` renders it,
with ``tools``, ``enable_thinking`` and ``add_generation_prompt=True``.

A template without tool support (SmolLM2's plain ChatML) gets the Qwen/Hermes tool block appended to its
system message, assistant calls written as ``<tool_call>`` text and tool results as a user
``<tool_response>`` message (:func:`fallback_messages`), so every model sees the same protocol.
"""

from __future__ import annotations

import json
from typing import Any

from ...method.chat import Request
from ..base import BackendError
from ..toolcalls import chat_messages, envelope_text, render_unparsed_calls

# Appended to the system message when the chat template cannot render tools itself (same text as Qwen2.5's).
TOOLS_PREAMBLE = (
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>"
)
TOOLS_POSTAMBLE = (
    "\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
    '<tool_call></tool_call> XML tags:\n<tool_call>\n{"name": <function-name>, "arguments": '
    "<args-json-object>}\n</tool_call>"
)
# The template of a GGUF that carries none.
CHATML = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


def template_variables(template: str) -> set[str]:
    """Names the template reads from its context (``tools``, ``enable_thinking``, ...)."""
    import jinja2
    import jinja2.ext
    import jinja2.meta
    from jinja2.sandbox import ImmutableSandboxedEnvironment
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter

    try:
        env = ImmutableSandboxedEnvironment(
            loader=jinja2.BaseLoader(),
            trim_blocks=True,
            lstrip_blocks=True,
            extensions=[Jinja2ChatFormatter.IgnoreGenerationTags, jinja2.ext.loopcontrols],
        )
        return set(jinja2.meta.find_undeclared_variables(env.parse(template)))
    except Exception:  # noqa: BLE001 - an unparsable template is reported when rendering
        return {name for name in ("tools", "enable_thinking") if name in template}


def tools_system_block(tools: list[dict[str, Any]]) -> str:
    """The Hermes tool description for templates without tool support."""
    return TOOLS_PREAMBLE + "".join("\n" + json.dumps(t, ensure_ascii=False) for t in tools) + TOOLS_POSTAMBLE


def fallback_messages(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Messages for a template without tool support: tools in the system message, calls and results as text.

    ``messages`` are already normalised by :func:`chat_messages` (arguments as text).
    """
    out: list[dict[str, Any]] = []
    for msg in messages:
        role = msg.get("role")
        if role == "assistant" and msg.get("tool_calls"):
            calls = "\n".join(envelope_text(c["function"]["name"], c["function"]["arguments"]) for c in msg["tool_calls"])
            content = msg.get("content") or ""
            out.append({"role": "assistant", "content": (content + "\n" if content else "") + calls})
        elif role == "tool":
            _add_tool_result(out, msg.get("content") or "")
        else:
            out.append({"role": role, "content": msg.get("content") or ""})
    for msg in out:
        msg.pop("_tool_results", None)
    if tools:
        _add_tools_block(out, tools_system_block(tools))
    return out


def _add_tool_result(out: list[dict[str, Any]], content: str) -> None:
    """A tool result as a user ``<tool_response>`` message, results in a row sharing one message."""
    block = f"<tool_response>\n{content}\n</tool_response>"
    if out and out[-1].get("role") == "user" and out[-1].get("_tool_results"):
        out[-1]["content"] += "\n" + block
    else:
        out.append({"role": "user", "content": block, "_tool_results": True})


def _add_tools_block(out: list[dict[str, Any]], block: str) -> None:
    """The tool description at the end of the system message (one is added where there is none)."""
    if out and out[0]["role"] == "system":
        out[0] = {"role": "system", "content": (out[0]["content"] + "\n\n" if out[0]["content"] else "") + block}
    else:
        out.insert(0, {"role": "system", "content": block})


class ChatTemplate:
    """One model's chat template (``source``, jinja2) and what it can render: ``native_tools`` (it reads
    ``tools``) and ``thinking_supported`` (it reads ``enable_thinking``). ``name`` names the model in errors."""

    def __init__(self, source: str, *, eos_token: str, bos_token: str, name: str):
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter

        self.source, self.name = source, name
        self._formatter = Jinja2ChatFormatter(template=source, eos_token=eos_token, bos_token=bos_token)
        variables = template_variables(source)
        self.native_tools = "tools" in variables
        self.thinking_supported = "enable_thinking" in variables

    def render(self, request: Request, thinking: bool) -> str:
        """The prompt text for ``request`` (ends with the assistant generation prompt); ``thinking`` is sent
        as ``enable_thinking`` where the template reads it."""
        tools = [dict(t) for t in request.tools]
        if self.native_tools:
            messages = render_unparsed_calls(chat_messages(request.messages, arguments_as="dict"))
        else:
            messages = fallback_messages(chat_messages(request.messages, arguments_as="str"), tools)
            tools = []
        kwargs: dict[str, Any] = {}
        if self.thinking_supported:
            kwargs["enable_thinking"] = thinking
        try:
            return self._formatter(messages=messages, tools=tools or None, **kwargs).prompt
        except Exception as exc:  # noqa: BLE001
            raise BackendError(f"the chat template of {self.name} failed to render: {exc}") from exc
