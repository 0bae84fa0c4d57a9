"""A stand-in for ``vllm run-batch`` where vLLM is absent: ``python vllm_run_batch_standin.py run-batch -i INPUT
-o OUTPUT --model M [engine args]`` reads the Batch API's input lines and writes vLLM's output lines (``id``,
``custom_id``, ``response`` with ``status_code``, ``request_id`` and ``body``, ``error``), every line at the end,
as vLLM does.

Each body is answered by :func:`answer`, which a test also plants in a server to compare with direct calls: the
reference agent's answer (the exact oracle) as a chat completion, in vLLM's shape; a body naming another model
than the one served (``--served-model-name``, else ``--model``) gets vLLM's 404. A line that is not answered is
written as vLLM 0.32's ``run-batch`` writes it: ``response.body`` null and ``error`` the server's error response
(``{"error": {...}}``), or a bare string for a URL it does not serve (status 400).
``VLLM_STANDIN_EXIT=N`` exits with status N before writing anything (a crash); ``VLLM_STANDIN_ARGS=PATH`` writes
the arguments it was given to PATH.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from cpdagthink.backends.reference import ReferenceBackend
from cpdagthink.method.chat import Request

_REFERENCE = ReferenceBackend()


def answer(path: str, body: dict[str, Any], served: str | None = None) -> tuple[int, dict[str, Any]]:
    """(status, body) as ``vllm serve`` answers ``body`` at ``path`` (chat completions only)."""
    if served is not None and body.get("model") != served:
        return 404, {"error": {"message": f"The model `{body.get('model')}` does not exist.",
                               "type": "NotFoundError", "param": "model", "code": 404}}
    tools = tuple(body.get("tools") or ()) if body.get("tool_choice") != "none" else ()
    completion = _REFERENCE.complete(Request(messages=tuple(body["messages"]), tools=tools))
    message: dict[str, Any] = {"role": "assistant", "content": completion.text or None, "reasoning_content": None,
                               "tool_calls": [{"id": f"chatcmpl-tool-{i}", "type": "function",
                                               "function": {"name": c.name, "arguments": c.arguments}}
                                              for i, c in enumerate(completion.tool_calls)]}
    prompt = len(json.dumps(body["messages"])) // 4
    produced = max(1, len(completion.text + "".join(c.arguments for c in completion.tool_calls)) // 4)
    return 200, {"id": "chatcmpl-standin", "object": "chat.completion", "created": 0, "model": body["model"],
                 "choices": [{"index": 0, "message": message, "logprobs": None,
                              "finish_reason": "tool_calls" if completion.tool_calls else "stop"}],
                 "usage": {"prompt_tokens": prompt, "completion_tokens": produced, "total_tokens": prompt + produced}}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="vllm")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run-batch")
    run.add_argument("-i", "--input-file", required=True)
    run.add_argument("-o", "--output-file", required=True)
    run.add_argument("--model", required=True)
    run.add_argument("--served-model-name")
    args, engine = parser.parse_known_args(argv)
    if os.environ.get("VLLM_STANDIN_ARGS"):
        Path(os.environ["VLLM_STANDIN_ARGS"]).write_text(json.dumps(argv))
    if os.environ.get("VLLM_STANDIN_EXIT"):
        print("RuntimeError: CUDA out of memory (stand-in)", file=sys.stderr)
        return int(os.environ["VLLM_STANDIN_EXIT"])
    lines = []
    for number, raw in enumerate(Path(args.input_file).read_text().splitlines()):
        request = json.loads(raw)
        if request["url"] != "/v1/chat/completions":
            status, body = 400, f"URL {request['url']} was used. Supported endpoints: /v1/chat/completions, ..."
        else:
            status, body = answer(request["url"], request["body"], args.served_model_name or args.model)
        answered = status == 200
        lines.append({"id": f"vllm-{number}", "custom_id": request["custom_id"],
                      "response": {"status_code": status, "request_id": f"vllm-batch-{number}",
                                   "body": body if answered else None},
                      "error": None if answered else body})
    Path(args.output_file).write_text("".join(json.dumps(line) + "\n" for line in lines))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
