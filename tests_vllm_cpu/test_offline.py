"""The offline ``VLLMBackend`` on the converted default model: ``structured``, ``baseline_enhanced`` and a
probe through the project's runner, every constrained turn-1 object parsed."""

from __future__ import annotations

import pytest

from conftest import DECODING, ENGINE, MAX_MODEL_LEN, RUNS, run_and_check
from cpdagthink.backends.vllm_offline import VLLMBackend, constraint_regex
from cpdagthink.method.conditions import CONDITIONS


@pytest.fixture(scope="module")
def backend(checkpoint):
    engine = VLLMBackend(str(checkpoint), **ENGINE)
    yield engine
    engine.close()


@pytest.mark.parametrize("name, probe", RUNS)
def test_runs_on_real_tokens(backend, checkpoint, rows, cache, tmp_path, name, probe):
    run_and_check(backend, rows, cache, tmp_path, name, probe,
                  lambda request: constraint_regex(request, backend.profile.tool_envelope), model=str(checkpoint))


def test_forced_tool_choice_and_an_oversized_budget_on_the_engine(backend, rows):
    """Offline vLLM has no tool_choice of its own: the backend's forced choice still yields the call, and a
    budget past the context is refused rather than cut."""
    from dataclasses import replace

    from cpdagthink.method.conditions import first_request

    request = replace(first_request(CONDITIONS["no_constrained_decoding"], rows[0], DECODING),
                      tool_choice="record_causal_analysis")
    forced = backend.complete(request)
    assert forced.finish_reason == "stop" and [c.name for c in forced.tool_calls] == ["record_causal_analysis"]
    too_long = backend.complete(replace(request, max_tokens=MAX_MODEL_LEN))
    assert too_long.meta["rejected"].startswith("prompt of") and too_long.completion_tokens == 0
