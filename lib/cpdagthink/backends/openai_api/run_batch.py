"""``vllm run-batch`` as a batch service (:class:`~.batches.BatchService`): the Batch API's input file run by
vLLM on the node where the job runs, without a server or a port.

``vllm run-batch -i INPUT -o OUTPUT --model M`` reads the same JSONL lines the OpenAI Batch API reads and writes
the same output lines, through vLLM's OpenAI serving layer: each answer is the one ``vllm serve M`` would give the
same body. So the openai backend (``regex_mode="vllm"``, as for a vLLM server) runs it: ``-o run_batch=vllm``
names the executable, and a turn's file is one process, its input, output and log kept in the run folder's
``batches/``. A process outlives nothing it was not started by: a session that finds a batch of an earlier one
reads its output file if the process finished writing it, and otherwise sends its lines again (they cost compute,
not money).
"""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path
from typing import Sequence

from .batch_state import BatchRecord, BatchState, read_lines
from .batches import Poll

LOG_CHARS = 2000  # of a failed process's log, in its message


class VLLMRunBatch:
    """``command -i INPUT -o OUTPUT --model model`` per batch (``command``, as words: ``"vllm run-batch"``, or
    ``"python -m vllm.entrypoints.openai.run_batch"``; a ``vllm`` executable alone means its ``run-batch``), with
    ``--revision`` and ``--reasoning-parser`` when given, then ``extra_args``: engine arguments such as
    ``--max-model-len 16384``; a later ``--model PATH`` with ``--served-model-name`` serves ``model`` from a
    local checkpoint, as for ``vllm serve``."""

    name = "vllm run-batch"

    def __init__(self, command: str, model: str, *, revision: str | None = None, reasoning_parser: str | None = None,
                 extra_args: Sequence[str] = ()):
        self.command = shlex.split(command)
        if not self.command:
            raise ValueError("run_batch names the command that runs a batch file, e.g. run_batch='vllm run-batch'")
        if len(self.command) == 1 and Path(self.command[0]).name == "vllm":
            self.command.append("run-batch")  # the executable alone: its subcommand
        self.model = model
        self.options = [*(["--revision", revision] if revision else []),
                        *(["--reasoning-parser", reasoning_parser] if reasoning_parser else []), *extra_args]
        self.where = f"{shlex.join(self.command)} --model {shlex.quote(model)}"
        self._running: dict[str, tuple[subprocess.Popen, Path, Path, int]] = {}

    def submit(self, endpoint: str, data: bytes, tag: str, state: BatchState, record: BatchRecord) -> str:
        """Write the input file and start the process (its output and log beside it)."""
        source, output = state.file(record, "input"), state.file(record, "output")
        log = source.with_name(f"{record.name}.log")
        source.parent.mkdir(parents=True, exist_ok=True)
        source.write_bytes(data)
        output.unlink(missing_ok=True)
        argv = [*self.command, "-i", str(source), "-o", str(output), "--model", self.model, *self.options]
        with log.open("wb") as handle:
            process = subprocess.Popen(argv, stdout=handle, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        batch_id = f"run-batch-{tag[:16]}"
        self._running[batch_id] = (process, output, log, len(record.custom_ids))
        return batch_id

    def find(self, tag: str) -> str | None:
        """A process whose id never reached the folder cannot be found: its lines are sent again."""
        return None

    def poll(self, record: BatchRecord, state: BatchState) -> Poll:
        found = self._running.get(str(record.batch_id))
        if found is None:  # started by an earlier session
            return self._earlier(state.file(record, "output"))
        process, output, log, total = found
        code = process.poll()
        if code is None:
            return Poll("in_progress", {"total": total, "completed": 0, "failed": 0})
        del self._running[str(record.batch_id)]
        if code != 0:
            tail = log.read_text(errors="replace")[-LOG_CHARS:] if log.is_file() else ""
            return Poll("failed", {"total": total, "completed": 0, "failed": total},
                        message=f"vllm run-batch exited with status {code}; its log ({log}) ends: {tail}")
        return Poll("completed", _counts(output, total), output.read_bytes() if output.is_file() else None)

    @staticmethod
    def _earlier(output: Path) -> Poll:
        """A batch of an earlier session: what its output file holds (a line cut by a kill is not an answer, so
        it is sent again), else expired: every line sent again."""
        if output.is_file():
            return Poll("completed", _counts(output, None), output.read_bytes())
        return Poll("expired", {})

    def cancel(self, batch_id: str) -> None:
        found = self._running.get(batch_id)
        if found is not None:
            found[0].terminate()


def _counts(output: Path, total: int | None) -> dict[str, int]:
    """request_counts read from an output file: lines answered 200, lines not."""
    lines = read_lines(output.read_text()) if output.is_file() else []
    ok = sum(1 for line in lines if (line.get("response") or {}).get("status_code") == 200)
    return {"total": total if total is not None else len(lines), "completed": ok, "failed": len(lines) - ok}


def run_batch_gpus(engine_args: str) -> int:
    """The GPUs a ``vllm run-batch`` with ``engine_args`` uses: its tensor-parallel size (1 when not given)."""
    words = shlex.split(engine_args)
    for i, word in enumerate(words):
        if word.startswith("--tensor-parallel-size="):
            return int(word.partition("=")[2])
        if word in ("--tensor-parallel-size", "-tp") and i + 1 < len(words):
            return int(words[i + 1])
    return 1
