"""A stand-in for the OpenAI Batch API (and the direct endpoints beside it) on 127.0.0.1, keeping the service's rules.

``/v1/files``: a multipart upload (``purpose=batch``; a file over the upload limit is refused at once), the file
object, its content. ``/v1/batches``: create (the input file must exist and have ``purpose=batch``, the endpoint
be one the service batches, the window ``24h``), retrieve, cancel, list (newest first, ``after``/``limit``).

A batch goes ``validating`` -> ``in_progress`` -> ``finalizing`` -> ``completed``. Validation is the service's:
every line JSON with ``custom_id``, ``method`` ``POST``, ``url`` and ``body``; ``url`` the batch's endpoint; one
model in the whole file; each ``custom_id`` once; at most :data:`MAX_REQUESTS` lines and :data:`MAX_BYTES`
bytes. A file that breaks a rule ends ``failed`` with the service's ``errors`` (code, line, message), and none of
its requests is run. Lines are answered ``per_second`` at a time, each by the planted ``answer(path, body)``
(``(status, payload)``, the same function that serves the direct ``/v1/chat/completions`` and
``/v1/responses``); a 200 goes to the output file, anything else to the error file; both files list their lines
out of order (seeded). The 24-hour window is ``window_s`` seconds: a batch not done by then ends ``expired``,
its finished lines in the output file and every other one in the error file (``batch_expired``). ``cancel``
makes it ``cancelling`` and, a step later, ``cancelled``, with what finished kept the same way.

``hold`` (an :class:`threading.Event`, set by default) keeps batches ``in_progress`` while it is cleared, so a
test can kill a client mid-wait. Everything is bounded: bodies over :data:`MAX_UPLOAD` are refused, handler
threads are daemons, and :meth:`BatchAPIServer.close` stops the server.
"""

from __future__ import annotations

import email.parser
import email.policy
import json
import random
import re
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any, Callable

from loopback_server import LoopbackServer
from reasoning_api_server import api_error, send_bytes, send_json

MAX_REQUESTS = 50_000  # requests in one batch's input file
MAX_BYTES = 200 * 1024 * 1024  # bytes of one batch's input file
MAX_UPLOAD = 512 * 1024 * 1024  # bytes of any uploaded file
ENDPOINTS = ("/v1/chat/completions", "/v1/responses", "/v1/embeddings", "/v1/completions")
TERMINAL = ("completed", "failed", "expired", "cancelled")
EXPIRED = {"code": "batch_expired", "message": "This request could not be executed before the completion window expired."}
CANCELLED = {"code": "batch_cancelled", "message": "This request was not executed because the batch was cancelled."}

Answer = Callable[[str, dict[str, Any]], tuple[int, dict[str, Any]]]


@dataclass
class _Batch:
    """One batch as the service keeps it."""

    id: str
    input_file_id: str
    endpoint: str
    metadata: dict[str, str] | None
    created_at: float
    status: str = "validating"
    lines: list[dict[str, Any]] = field(default_factory=list)
    done: dict[int, dict[str, Any]] = field(default_factory=dict)  # line index -> its output or error line
    errors: list[dict[str, Any]] = field(default_factory=list)
    stamps: dict[str, float] = field(default_factory=dict)  # in_progress_at, completed_at, ...
    output_file_id: str | None = None
    error_file_id: str | None = None
    model: str | None = None


def validation_errors(lines: list[bytes], endpoint: str, size: int, max_requests: int = MAX_REQUESTS,
                      max_bytes: int = MAX_BYTES) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(the service's errors, the parsed lines) for a batch input file of ``size`` bytes on ``endpoint``."""
    if size > max_bytes:
        return [{"code": "file_too_large", "line": None, "param": None,
                 "message": f"The batch input file is larger than the {max_bytes} maximum for batches."}], []
    if len(lines) > max_requests:
        return [{"code": "too_many_requests", "line": None, "param": None,
                 "message": f"The batch input file contains {len(lines)} requests; a batch holds at most "
                            f"{max_requests}."}], []
    parsed: list[dict[str, Any]] = []
    errors: list[dict[str, Any]] = []
    seen: set[str] = set()
    models: set[str] = set()
    for number, raw in enumerate(lines, start=1):
        problem = _line_problem(raw, endpoint, seen, models, parsed)
        if problem:
            errors.append({"code": problem[0], "line": number, "param": problem[1], "message": problem[2]})
    return errors, parsed


def _line_problem(raw: bytes, endpoint: str, seen: set[str], models: set[str],
                  parsed: list[dict[str, Any]]) -> tuple[str, str | None, str] | None:
    try:
        line = json.loads(raw)
    except ValueError:
        return "invalid_json_line", None, "This line is not parseable as valid JSON."
    if not isinstance(line, dict) or not {"custom_id", "method", "url", "body"} <= set(line):
        return "missing_required_parameter", None, "Each line must hold custom_id, method, url and body."
    if line["method"] != "POST":
        return "invalid_method", "method", "The method must be POST."
    if line["url"] != endpoint:
        return ("mismatched_endpoint", "url",
                f"The URL provided for this request does not match the batch endpoint {endpoint}.")
    if line["custom_id"] in seen:
        return ("duplicate_custom_id", "custom_id", "The custom_id for this request is a duplicate of another "
                "request. The custom_id parameter must be unique for each individual request in a batch.")
    model = (line["body"] or {}).get("model")
    if models and model not in models:
        return ("model_mismatch", "body.model", f"The provided model '{model}' does not match the model of the "
                "other requests in this file. Every request in a batch input file must use the same model.")
    seen.add(line["custom_id"])
    models.add(model)
    parsed.append(line)
    return None


def multipart_fields(content_type: str, body: bytes) -> dict[str, tuple[str | None, bytes]]:
    """The fields of a ``multipart/form-data`` body: name -> (file name, bytes)."""
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
        f"Content-Type: {content_type}\r\n\r\n".encode() + body)
    fields = {}
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        fields[name] = (part.get_filename(), part.get_payload(decode=True) or b"")
    return fields


class BatchAPIServer(LoopbackServer):
    """The stand-in on a free loopback port; ``url`` ends in ``/v1``. ``answer(path, body)`` plants every answer.

    ``per_second``: lines a batch answers a second once in progress; ``step_s``: how long ``validating``,
    ``finalizing`` and ``cancelling`` last; ``window_s``: the completion window; ``max_requests`` and ``max_bytes``
    the input file's limits (the service's by default). ``created`` lists each batch
    created, ``uploads`` each input file received, ``direct`` each direct call's path."""

    def __init__(self, answer: Answer, *, per_second: float = 1000.0, step_s: float = 0.05, window_s: float = 60.0,
                 seed: int = 0, max_requests: int = MAX_REQUESTS, max_bytes: int = MAX_BYTES):
        self.answer, self.per_second, self.step_s, self.window_s = answer, per_second, step_s, window_s
        self.max_requests, self.max_bytes = max_requests, max_bytes
        self.hold = threading.Event()
        self.hold.set()
        self.files: dict[str, dict[str, Any]] = {}
        self.contents: dict[str, bytes] = {}
        self.batches: dict[str, _Batch] = {}
        self.created: list[str] = []
        self.uploads: list[str] = []
        self.direct: list[str] = []
        self._rng = random.Random(seed)
        self._lock = threading.RLock()
        self.start(_handler(self))

    # ------------------------------------------------------------------------------------------------ files
    def _new_file(self, data: bytes, purpose: str, filename: str) -> dict[str, Any]:
        with self._lock:
            file_id = f"file-{len(self.files) + 1:06d}"
            self.files[file_id] = {"id": file_id, "object": "file", "bytes": len(data), "created_at": int(time.time()),
                                   "filename": filename, "purpose": purpose, "status": "processed"}
            self.contents[file_id] = data
            return self.files[file_id]

    def upload(self, content_type: str, body: bytes) -> tuple[int, dict[str, Any]]:
        fields = multipart_fields(content_type, body)
        purpose = fields.get("purpose", (None, b""))[1].decode()
        if "file" not in fields:
            return 400, api_error("Missing required parameter: 'file'.", "file", "missing_required_parameter")
        if purpose not in ("batch", "assistants", "fine-tune", "vision", "user_data"):
            return 400, api_error(f"'{purpose}' is not one of the supported purposes.", "purpose", "invalid_value")
        name, data = fields["file"]
        made = self._new_file(data, purpose, name or "upload.jsonl")
        with self._lock:
            self.uploads.append(made["id"])
        return 200, made

    # ---------------------------------------------------------------------------------------------- batches
    def create(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        file = self.files.get(body.get("input_file_id", ""))
        if file is None:
            return 404, api_error(f"No such File object: {body.get('input_file_id')}", "input_file_id", None)
        if file["purpose"] != "batch":
            return 400, api_error("The input file must be uploaded with purpose 'batch'.", "input_file_id", None)
        if body.get("endpoint") not in ENDPOINTS:
            return 400, api_error(f"Invalid endpoint: {body.get('endpoint')}", "endpoint", "invalid_value")
        if body.get("completion_window") != "24h":
            return 400, api_error("completion_window must be '24h'.", "completion_window", "invalid_value")
        with self._lock:
            batch = _Batch(id=f"batch_{len(self.batches) + 1:06d}", input_file_id=file["id"],
                           endpoint=body["endpoint"], metadata=body.get("metadata"), created_at=time.time())
            self.batches[batch.id] = batch
            self.created.append(batch.id)
            return 200, self._view(batch)

    def retrieve(self, batch_id: str, cancel: bool = False) -> tuple[int, dict[str, Any]]:
        """The batch as it stands now; ``cancel``: what the dashboard's and the API's cancel do (``cancelling``,
        then ``cancelled``)."""
        with self._lock:
            batch = self.batches.get(batch_id)
            if batch is None:
                return 404, api_error(f"No batch found with id '{batch_id}'.", None, None)
            self._advance(batch)
            if cancel and batch.status not in TERMINAL and batch.status != "cancelling":
                batch.status = "cancelling"
                batch.stamps["cancelling_at"] = time.time()
            return 200, self._view(batch)

    def cancel(self, batch_id: str) -> tuple[int, dict[str, Any]]:
        """Cancel the batch, as a user does in the dashboard."""
        return self.retrieve(batch_id, cancel=True)

    def listing(self, query: dict[str, str]) -> tuple[int, dict[str, Any]]:
        with self._lock:
            ids = list(reversed(self.created))
            if query.get("after") in ids:
                ids = ids[ids.index(query["after"]) + 1:]
            limit = int(query.get("limit", 20))
            page = [self.retrieve(i)[1] for i in ids[:limit]]
        return 200, {"object": "list", "data": page, "first_id": page[0]["id"] if page else None,
                     "last_id": page[-1]["id"] if page else None, "has_more": len(ids) > limit}

    def _advance(self, batch: _Batch) -> None:
        """Move ``batch`` along its lifecycle as far as the time elapsed allows."""
        now = time.time()
        if batch.status == "validating" and now - batch.created_at >= self.step_s:
            self._validate(batch, now)
        if batch.status in ("in_progress", "cancelling"):
            self._run_lines(batch, now)
        if batch.status == "in_progress" and len(batch.done) == len(batch.lines):
            batch.status = "finalizing"
            batch.stamps["finalizing_at"] = now
        if batch.status == "finalizing" and now - batch.stamps["finalizing_at"] >= self.step_s:
            self._finish(batch, "completed", now)
        elif batch.status == "cancelling" and now - batch.stamps["cancelling_at"] >= self.step_s:
            self._finish(batch, "cancelled", now)
        elif batch.status in ("validating", "in_progress") and now - batch.created_at >= self.window_s:
            self._finish(batch, "expired", now)

    def _validate(self, batch: _Batch, now: float) -> None:
        data = self.contents[batch.input_file_id]
        errors, lines = validation_errors(data.splitlines(), batch.endpoint, len(data), self.max_requests,
                                          self.max_bytes)
        if errors:
            batch.status, batch.errors = "failed", errors
            batch.stamps["failed_at"] = now
            return
        batch.status, batch.lines = "in_progress", lines
        batch.model = lines[0]["body"].get("model") if lines else None
        batch.stamps["in_progress_at"] = now

    def _run_lines(self, batch: _Batch, now: float) -> None:
        if not self.hold.is_set() or batch.status == "cancelling":
            return
        due = min(len(batch.lines), int((now - batch.stamps["in_progress_at"]) * self.per_second) + 1)
        for index in range(len(batch.done), due):
            line = batch.lines[index]
            status, payload = self.answer(batch.endpoint, line["body"])
            batch.done[index] = {"id": f"batch_req_{batch.id}_{index}", "custom_id": line["custom_id"],
                                 "response": {"status_code": status, "request_id": f"req_{index}", "body": payload},
                                 "error": None}

    def _finish(self, batch: _Batch, status: str, now: float) -> None:
        """End ``batch`` as ``status``, writing its output and error files (lines out of order)."""
        batch.status = status
        batch.stamps[f"{status}_at"] = now
        finished = list(batch.done.values())
        unfinished = {"expired": EXPIRED, "cancelled": CANCELLED}.get(status)
        if unfinished:
            finished += [{"id": f"batch_req_{batch.id}_{i}", "custom_id": line["custom_id"], "response": None,
                          "error": unfinished} for i, line in enumerate(batch.lines) if i not in batch.done]
        self._rng.shuffle(finished)
        good = [line for line in finished if line["response"] and line["response"]["status_code"] == 200]
        bad = [line for line in finished if line not in good]
        if good:
            batch.output_file_id = self._jsonl(good, f"{batch.id}_output.jsonl")
        if bad:
            batch.error_file_id = self._jsonl(bad, f"{batch.id}_error.jsonl")

    def _jsonl(self, lines: list[dict[str, Any]], name: str) -> str:
        data = "".join(json.dumps(line) + "\n" for line in lines).encode()
        return self._new_file(data, "batch_output", name)["id"]

    def _view(self, batch: _Batch) -> dict[str, Any]:
        done = list(batch.done.values())
        ok = sum(1 for line in done if line["response"]["status_code"] == 200)
        stamp = {f"{k}_at": int(batch.stamps[f"{k}_at"]) if f"{k}_at" in batch.stamps else None
                 for k in ("in_progress", "finalizing", "completed", "failed", "expired", "cancelling", "cancelled")}
        return {"id": batch.id, "object": "batch", "endpoint": batch.endpoint, "errors": (
                    {"object": "list", "data": batch.errors} if batch.errors else None),
                "input_file_id": batch.input_file_id, "completion_window": "24h", "status": batch.status,
                "output_file_id": batch.output_file_id, "error_file_id": batch.error_file_id,
                "created_at": int(batch.created_at), "expires_at": int(batch.created_at + 86400), **stamp,
                "request_counts": {"total": len(batch.lines), "completed": ok, "failed": len(done) - ok},
                "metadata": batch.metadata, "model": batch.model}

    # ------------------------------------------------------------------------------------------------ HTTP
    def route(self, method: str, path: str, headers: Any, body: bytes) -> tuple[int, Any]:
        """(status, JSON payload or raw bytes) for one request."""
        path, _, query = path.partition("?")
        params = dict(p.split("=", 1) for p in query.split("&") if "=" in p)
        if method == "POST" and path == "/v1/files":
            return self.upload(headers.get("Content-Type", ""), body)
        if method == "GET" and (found := re.fullmatch(r"/v1/files/([\w-]+)(/content)?", path)):
            if found.group(1) not in self.files:
                return 404, api_error(f"No such File object: {found.group(1)}", "id", None)
            return 200, self.contents[found.group(1)] if found.group(2) else self.files[found.group(1)]
        if method == "POST" and path == "/v1/batches":
            return self.create(json.loads(body))
        if method == "GET" and path == "/v1/batches":
            return self.listing(params)
        if found := re.fullmatch(r"/v1/batches/([\w-]+)(/cancel)?", path):
            return (self.cancel if found.group(2) and method == "POST" else self.retrieve)(found.group(1))
        if method == "POST" and path in ("/v1/chat/completions", "/v1/responses"):
            with self._lock:
                self.direct.append(path)
            return self.answer(path, json.loads(body))
        return 404, api_error(f"Invalid URL ({method} {path})", None, "unknown_url")

    def close(self) -> None:
        self.hold.set()
        super().close()


def _handler(server: BatchAPIServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True

        def log_message(self, *args: Any) -> None:
            pass

        def _serve(self, method: str) -> None:
            size = int(self.headers.get("Content-Length") or 0)
            if size > MAX_UPLOAD:
                self.close_connection = True
                send_json(self, 413, api_error(f"The file is larger than {MAX_UPLOAD} bytes.", "file", None))
                return
            body = self.rfile.read(size) if size else b""
            code, payload = server.route(method, self.path, self.headers, body)
            if isinstance(payload, bytes):
                send_bytes(self, code, payload)
            else:
                send_json(self, code, payload)

        def do_GET(self) -> None:
            self._serve("GET")

        def do_POST(self) -> None:
            self._serve("POST")

    return Handler


TRANSPORT_META = {"attempts", "base_url", "batch", "wall_s"}  # how a call travelled, not what it answered


def batch_backend(server: BatchAPIServer, **options: Any) -> Any:
    """The openai backend on GPT-5.4-mini against ``server``, polling its batches every 50 ms."""
    from cpdagthink.backends import make_backend

    return make_backend("openai", model="gpt-5.4-mini", base_url=server.url, reasoning_effort="medium",
                        batch_poll_s=0.05, **options)


def comparable(record: Any) -> dict[str, Any]:
    """A record without how its calls travelled (where, which batch, how long, whether from the cache)."""
    data = record.model_dump(mode="json")
    for turn in data["turns"]:
        turn["meta"] = {k: v for k, v in turn["meta"].items() if k not in TRANSPORT_META}
        turn["latency_s"], turn["cache_hit"] = 0.0, False
    return data


def interrupt_once_submitted(server: BatchAPIServer) -> None:
    """Ctrl-C in the main thread 0.3 s after ``server`` took its first batch (from a daemon thread)."""
    import _thread

    def interrupt() -> None:
        while not server.created:
            time.sleep(0.02)
        time.sleep(0.3)
        _thread.interrupt_main()

    threading.Thread(target=interrupt, daemon=True).start()
