"""Run a condition over instances: cached model calls, one JSON line per finished instance, resumable.

Work proceeds in chunks: turn 1 for the whole chunk in one batched backend call, then turn 2, then the
chunk's records are appended and flushed. A run killed midway restarts after its last written record; a
finished run re-run makes zero model calls because every call is content-addressed in the cache.
"""

from __future__ import annotations

import hashlib
import json
import platform
import random
import subprocess
import time
from dataclasses import dataclass, replace
from importlib import metadata as importlib_metadata
from pathlib import Path
from typing import Any, Iterable, Sequence

from tqdm.auto import tqdm

from .backends.base import Backend, Completion, Request, RequestRejected
from .cache import DEFAULT_CACHE, CallCache
from .conditions import (
    Condition,
    Decoding,
    Flow,
    Intervention,
    Turn2Input,
    describe,
    first_request,
    parse_answer,
    read_emitted,
    second_request,
)
from .data import PROJECT_ROOT, Instance
from .oracle import label_text

RECORDS = "records.jsonl"
METADATA = "metadata.json"
_PACKAGES = ("cpdagthink", "llama_cpp_python", "outlines", "outlines_core", "openai", "vllm", "networkx", "pydantic")


class RunMismatchError(ValueError):
    """An output folder already holds records of a run configured differently from the one asked for."""


# What makes two runs the same run: resuming is only allowed when all of these match.
_RUN_IDENTITY = ("condition", "intervention", "backend", "decoding")


def _check_resumable(out_dir: Path, metadata: dict[str, Any], records: int) -> None:
    """Refuse to append to records written under another condition, prompt, model or decoding."""
    path = out_dir / METADATA
    if not records or not path.is_file():
        return
    old = json.loads(path.read_text(encoding="utf-8"))
    new = json.loads(json.dumps({k: metadata[k] for k in _RUN_IDENTITY}))
    differs = [k for k in _RUN_IDENTITY if old.get(k) != new[k]]
    if differs:
        raise RunMismatchError(
            f"{out_dir} already holds {records} records of a run with a different {', '.join(differs)}; "
            "resuming would mix the two. Choose another output folder or remove this one."
        )


@dataclass
class CachedBackend:
    """A backend behind the call cache; counts the calls it really made."""

    backend: Backend
    cache: CallCache
    calls: int = 0

    def complete_batch(self, requests: Sequence[Request]) -> list[tuple[Completion, bool]]:
        """Completions in order, each with ``cache_hit``; only misses reach the model, in one batch."""
        identity = self.backend.identity()
        if not self.backend.thinking_supported:
            # The switch cannot change what such a model sees: one request, one cache entry.
            requests = [replace(r, thinking=False) for r in requests]
        keys = [r.cache_key(identity) for r in requests]
        found = [self.cache.get(k) for k in keys]
        missing = [i for i, c in enumerate(found) if c is None]
        if missing:
            try:
                fresh = self.backend.complete_batch([requests[i] for i in missing])
            except RequestRejected:
                fresh = [self._one(requests[i]) for i in missing]
            self.calls += len(missing)
            for i, completion in zip(missing, fresh):
                if "rejected" not in completion.meta:  # not cached: a later run (e.g. a longer context) retries
                    self.cache.put(keys[i], completion)
                found[i] = completion
        return [(c, i not in missing) for i, c in enumerate(found)]

    def _one(self, request: Request) -> Completion:
        try:
            return self.backend.complete(request)
        except RequestRejected as error:
            return Completion(text="", meta={"rejected": str(error)})


def _hash(data: Any) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()


def _turn_record(request: Request, completion: Completion, cache_hit: bool) -> dict[str, Any]:
    return {
        "messages_sha256": _hash(list(request.messages)),
        "request_sha256": _hash(request.to_json()),
        "raw": completion.raw or completion.text,
        "text": completion.text,
        "reasoning": completion.reasoning,
        "tool_calls": [c.__dict__ for c in completion.tool_calls],
        "finish_reason": completion.finish_reason,
        "cache_hit": cache_hit,
        "prompt_tokens": completion.prompt_tokens,
        "completion_tokens": completion.completion_tokens,
        "latency_s": completion.latency_s,
        "meta": completion.meta,
    }


def _git_commit() -> str | None:
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], cwd=PROJECT_ROOT, capture_output=True, text=True,
                              timeout=5).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def _versions() -> dict[str, str]:
    found = {}
    for name in _PACKAGES:
        try:
            found[name] = importlib_metadata.version(name)
        except importlib_metadata.PackageNotFoundError:
            continue
    return found


def read_records(out_dir: str | Path) -> list[dict[str, Any]]:
    """The records of a run; a torn last line (a kill mid-write) is ignored and later overwritten."""
    path = Path(out_dir) / RECORDS
    if not path.is_file():
        return []
    records = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            break
    return records


def _rewrite_complete(path: Path, records: list[dict[str, Any]]) -> None:
    """Drop a torn tail so appends start on a clean line."""
    text = "".join(json.dumps(r) + "\n" for r in records)
    if path.is_file() and path.read_text(encoding="utf-8") != text:
        path.write_text(text, encoding="utf-8")


@dataclass
class RunResult:
    out_dir: Path
    records: list[dict[str, Any]]
    model_calls: int
    cache_hits: int


def run_condition(
    condition: Condition,
    backend: Backend,
    instances: Iterable[Instance],
    out_dir: str | Path,
    *,
    decoding: Decoding = Decoding(),
    cache_dir: str | Path = DEFAULT_CACHE,
    chunk_size: int = 8,
    intervention: Intervention | None = None,
    intervention_name: str | None = None,
    progress: bool = True,
    extra_metadata: dict[str, Any] | None = None,
) -> RunResult:
    """Run ``condition`` on ``instances`` with ``backend``; append one record per instance to
    ``out_dir/records.jsonl`` and describe the run in ``out_dir/metadata.json``."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    instances = list(instances)
    done_records = read_records(out_dir)
    _rewrite_complete(out_dir / RECORDS, done_records)
    done = {r["id"] for r in done_records}
    todo = [i for i in instances if i.id not in done]

    started = time.time()
    metadata = {
        "condition": describe(condition),
        "intervention": intervention_name,
        "backend": backend.identity(),
        "decoding": decoding.__dict__,
        "instances": len(instances),
        "instance_ids_sha256": _hash([i.id for i in instances]),
        "sources": sorted({i.source for i in instances}),
        "seed": decoding.seed,
        "git_commit": _git_commit(),
        "packages": _versions(),
        "python": platform.python_version(),
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(started)),
        **(extra_metadata or {}),
    }
    _check_resumable(out_dir, metadata, len(done_records))
    (out_dir / METADATA).write_text(json.dumps(metadata, indent=2), encoding="utf-8")

    cached = CachedBackend(backend, CallCache(cache_dir))
    hits = 0
    bar = tqdm(total=len(instances), initial=len(instances) - len(todo), desc=f"{condition.name}", unit="inst",
               disable=not progress)
    with (out_dir / RECORDS).open("a", encoding="utf-8") as sink:
        for start in range(0, len(todo), max(chunk_size, 1)):
            chunk = todo[start:start + chunk_size]
            first = [first_request(condition, inst, decoding) for inst in chunk]
            turns = [[(req, *res)] for req, res in zip(first, cached.complete_batch(first))]
            if condition.flow is not Flow.ONE_TURN:
                given = [_intervene(intervention, inst, turn[0][1], decoding.seed) for inst, turn in zip(chunk, turns)]
                second = [second_request(condition, inst, decoding, turn[0][1], g)
                          for inst, turn, g in zip(chunk, turns, given)]
                for turn, req, res in zip(turns, second, cached.complete_batch(second)):
                    turn.append((req, *res))
            else:
                given = [None] * len(chunk)
            for inst, turn, g in zip(chunk, turns, given):
                record = _record(condition, inst, turn, g)
                hits += sum(t["cache_hit"] for t in record["turns"])
                sink.write(json.dumps(record) + "\n")
                sink.flush()
                bar.update(1)
    bar.close()
    metadata.update(finished_at=time.strftime("%Y-%m-%dT%H:%M:%S%z"), wall_clock_s=round(time.time() - started, 3),
                    model_calls_this_session=cached.calls)
    (out_dir / METADATA).write_text(json.dumps(metadata, indent=2), encoding="utf-8")
    return RunResult(out_dir, read_records(out_dir), cached.calls, hits)


def _intervene(intervention: Intervention | None, instance: Instance, turn1: Completion, seed: int) -> Turn2Input | None:
    if intervention is None:
        return None
    rng = random.Random(f"{seed}:{instance.id}")  # per instance, so resuming never shifts the draws
    return intervention(instance, read_emitted(turn1, instance).analysis, rng)


def _record(condition: Condition, instance: Instance, turns: list[tuple[Request, Completion, bool]],
            given: Turn2Input | None) -> dict[str, Any]:
    records = [_turn_record(*t) for t in turns]
    if condition.flow is Flow.TOOL:
        emitted = read_emitted(turns[0][1], instance)
        records[0]["parsed"] = emitted.analysis.model_dump(mode="json") if emitted.analysis else None
        records[0]["parse_error"] = emitted.error
    answer = parse_answer(turns[-1][1].text)
    return {
        "id": instance.id,
        "condition": condition.name,
        "split": instance.split,
        "num_variables": instance.num_variables,
        "template": instance.template,
        "turns": records,
        "prompt_sha256": condition.prompt_files(),
        "intervention": None if given is None else {
            "note": given.note, "include_premise": given.include_premise,
            "analysis": given.analysis.model_dump(mode="json") if given.analysis else None},
        "answer": answer,
        "unparsed": answer is None,
        "prediction": int(answer == "YES"),
        "gold_label": instance.label,
        "oracle_label": label_text(instance.text).label,
    }
