"""Batch mode (``-o batch=true``) against a stand-in that keeps the Batch API's rules (:mod:`batch_api_server`):
the same records as direct calls on the same answers, nothing submitted twice across a kill, each ending handled,
files split at the service's limits."""

from __future__ import annotations

import json
import re
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from batch_api_server import BatchAPIServer, batch_backend, comparable, interrupt_once_submitted
from reasoning_api_server import ReasoningAPIServer

from cpdagthink.backends import make_backend
from cpdagthink.backends.openai_api.batches import MAX_BYTES, MAX_REQUESTS, input_line, split_lines
from cpdagthink.method.decoding import Decoding
from cpdagthink.run.data import read_csv
from cpdagthink.run.runner import run_config
from conftest import configured

TESTS = Path(__file__).parent
# What only says how a call travelled: where it went, how many attempts, which batch, how long it took.
DECODING = Decoding(max_tokens_turn1=8192, max_tokens_answer=4096)


@pytest.fixture
def answers():
    """The planted answers: the reasoning-model stand-in's, named by content so order does not matter."""
    with ReasoningAPIServer(content_ids=True) as planted:
        yield planted


@pytest.fixture
def rows(test_csv):
    found = read_csv(test_csv)
    return [i for i in found if i.num_variables == 3][:3] + [i for i in found if i.num_variables == 4][:2]


def run(condition: str, made, rows, out, *, cache_dir, decoding=Decoding(), progress=False, **options):
    """``condition`` run on ``rows`` with the backend ``made`` into the folder ``out``."""
    return run_config(configured(condition, cache_dir=cache_dir, decoding=decoding), made, rows, out,
                      progress=progress, **options)


@pytest.mark.parametrize("condition", ["structured", "baseline_enhanced"])
def test_batches_make_the_records_direct_calls_make(answers, rows, tmp_path, condition):
    with BatchAPIServer(answers.answer) as server:
        direct = run(condition, batch_backend(server), rows, tmp_path / "direct", decoding=DECODING,
                     cache_dir=tmp_path / "cache-direct", progress=False)
        assert len(server.direct) == result_calls(condition, rows) and not server.created
        batched = run(condition, batch_backend(server, batch=True), rows, tmp_path / "batched",
                      decoding=DECODING, cache_dir=tmp_path / "cache", progress=False)
        assert len(server.direct) == result_calls(condition, rows)  # no direct call in batch mode
        assert len(server.created) == (2 if condition == "structured" else 1)  # one batch per turn
    assert [comparable(r) for r in batched.records] == [comparable(r) for r in direct.records]
    assert all(t.meta["batch"].startswith("batch_") for r in batched.records for t in r.turns)
    assert all(r.prediction == r.oracle_label for r in batched.records)
    metadata = json.loads((tmp_path / "batched" / "metadata.json").read_text())
    assert metadata["batched_calls"] == batched.model_calls == result_calls(condition, rows)
    assert json.loads((tmp_path / "direct" / "metadata.json").read_text())["batched_calls"] == 0


def result_calls(condition: str, rows: list) -> int:
    return len(rows) * (2 if condition == "structured" else 1)


def test_a_rerun_without_batch_serves_every_batched_answer_from_the_cache(answers, rows, tmp_path):
    with BatchAPIServer(answers.answer) as server:
        run("structured", batch_backend(server, batch=True), rows, tmp_path / "batched",
            decoding=DECODING, cache_dir=tmp_path / "cache", progress=False)
        again = run("structured", batch_backend(server), rows, tmp_path / "direct",
                    decoding=DECODING, cache_dir=tmp_path / "cache", progress=False)
        assert again.model_calls == 0 and not server.direct and again.cache_hits == 2 * len(rows)


# ------------------------------------------------------------------------------------------------ endings
def test_an_expired_batch_keeps_its_finished_lines_and_sends_only_the_rest(answers, rows, tmp_path):
    with BatchAPIServer(answers.answer, per_second=2, window_s=0.6) as server:
        result = run("baseline_enhanced", batch_backend(server, batch=True), rows, tmp_path / "run",
                     decoding=DECODING, cache_dir=tmp_path / "cache", progress=False)
        first, *later = [server.batches[b] for b in server.created]
        assert first.status == "expired" and 0 < len(first.done) < len(rows)
        resent = sum(len(b.lines) for b in later)
        assert resent == len(rows) - len(first.done) + sum(len(b.lines) - len(b.done) for b in later[:-1])
        assert later[-1].status == "completed"
    assert all(not r.rejected and r.prediction == r.oracle_label for r in result.records)


def test_error_lines_are_sent_again_then_recorded_as_not_answered_with_the_reason(rows, tmp_path):
    failures: dict[str, int] = {}

    def flaky(path, body):  # the first row fails twice (then answers), the second always
        text = json.dumps(body)
        for row, times in ((rows[0], 2), (rows[1], 99)):
            if row.hypothesis in text and failures.get(row.id, 0) < times:
                failures[row.id] = failures.get(row.id, 0) + 1
                return 500, {"error": {"message": "The server had an error while processing your request."}}
        return planted.answer(path, body)

    with ReasoningAPIServer(content_ids=True) as planted, BatchAPIServer(flaky) as server:
        result = run("baseline_enhanced", batch_backend(server, batch=True, retries=2), rows,
                     tmp_path / "run", decoding=DECODING, cache_dir=tmp_path / "cache", progress=False,
                     abort_after=0)
        assert len(server.created) == 3  # the first round, then two more for the error lines
    by_id = {r.id: r for r in result.records}
    assert by_id[rows[0].id].prediction == by_id[rows[0].id].oracle_label and not by_id[rows[0].id].rejected
    refused = by_id[rows[1].id].turns[0].rejected
    assert "not answered by 3 batch rounds" in refused and "The server had an error" in refused
    assert all(not by_id[r.id].rejected for r in rows[2:])


def test_a_refused_line_is_recorded_at_once_like_a_refused_direct_call(rows, tmp_path):
    with ReasoningAPIServer(content_ids=True) as planted, BatchAPIServer(planted.answer) as server:
        chat = make_backend("openai", model="gpt-5.5", base_url=server.url, api="chat", batch=True, batch_poll_s=0.05)
        result = run("structured", chat, rows[:2], tmp_path / "run", cache_dir=tmp_path / "c",
                     progress=False, abort_after=0)
        assert len(server.created) == 1  # turn 1 refused: no retry round, no turn 2
    for record in result.records:
        assert record.rejected and "HTTP 400: Function tools with reasoning_effort" in record.turns[0].rejected


def test_a_file_that_fails_validation_stops_the_run_and_is_never_sent_again(answers, rows, tmp_path):
    from cpdagthink.backends.base import PartialBatchError

    with BatchAPIServer(answers.answer, max_bytes=200) as server:  # a service whose limit the file passes
        for attempt in range(2):
            with pytest.raises(PartialBatchError, match="larger than the 200 maximum") as stopped:
                run("baseline_enhanced", batch_backend(server, batch=True), rows, tmp_path / "run",
                    decoding=DECODING, cache_dir=tmp_path / "cache", progress=False)
            assert len(server.created) == 1  # the rerun did not send the same file again
        named = re.search(r"remove (\S+\.json)\)", str(stopped.value)).group(1)
        Path(named).unlink()  # the user says the cause has gone
        with pytest.raises(PartialBatchError, match="larger than the 200 maximum"):
            run("baseline_enhanced", batch_backend(server, batch=True), rows, tmp_path / "run",
                decoding=DECODING, cache_dir=tmp_path / "cache", progress=False)
        assert len(server.created) == 2
    assert server.batches[server.created[0]].status == "failed"


def test_a_batch_cancelled_at_the_service_stops_the_run_and_a_rerun_goes_on(answers, rows, tmp_path):
    import threading

    from cpdagthink.backends.base import PartialBatchError

    with BatchAPIServer(answers.answer, per_second=2) as server:
        def cancel_when_submitted():
            while not server.created:
                time.sleep(0.02)
            time.sleep(0.3)
            server.cancel(server.created[0])

        threading.Thread(target=cancel_when_submitted, daemon=True).start()
        with pytest.raises(PartialBatchError, match="was cancelled at the service"):
            run("baseline_enhanced", batch_backend(server, batch=True), rows, tmp_path / "run",
                decoding=DECODING, cache_dir=tmp_path / "cache", progress=False)
        answered = len(server.batches[server.created[0]].done)
        assert 0 < answered < len(rows)
        result = run("baseline_enhanced", batch_backend(server, batch=True), rows, tmp_path / "run",
                     decoding=DECODING, cache_dir=tmp_path / "cache", progress=False)
        assert len(server.batches[server.created[1]].lines) == len(rows) - answered  # only what was not answered
    assert len(result.records) == len(rows) and not any(r.rejected for r in result.records)


# ------------------------------------------------------------------------------------------ kill and resume
KILLED_RUN = """
import sys
sys.path.insert(0, {tests!r})
from conftest import configured
from cpdagthink.backends import make_backend
from cpdagthink.method.decoding import Decoding
from cpdagthink.run.data import read_csv
from cpdagthink.run.runner import run_config
rows = [r for r in read_csv({csv!r}) if r.id in {ids!r}]
backend = make_backend("openai", model="gpt-5.4-mini", base_url={url!r}, reasoning_effort="medium", batch=True,
                       batch_poll_s=0.05)
decoding = Decoding(max_tokens_turn1=8192, max_tokens_answer=4096)
run_config(configured("structured", cache_dir={cache!r}, decoding=decoding), backend, rows, {out!r}, progress=False)
"""


def test_a_run_killed_while_batches_run_submits_nothing_again(answers, rows, tmp_path, test_csv):
    with BatchAPIServer(answers.answer) as server:
        server.hold.clear()  # batches stay in progress until the run is killed
        script = KILLED_RUN.format(tests=str(TESTS), csv=str(test_csv), ids=[r.id for r in rows], url=server.url,
                                   out=str(tmp_path / "run"), cache=str(tmp_path / "cache"))
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS.parent / "lib"), os.environ.get("PYTHONPATH", "")])}
        child = subprocess.Popen([sys.executable, "-c", script], env=env, stderr=subprocess.PIPE, text=True)
        deadline = time.time() + 60
        while not (server.created and list((tmp_path / "run" / "batches").glob("*.json"))) and time.time() < deadline:
            time.sleep(0.05)
        time.sleep(0.3)
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
        assert len(server.created) == 1
        record = json.loads(next((tmp_path / "run" / "batches").glob("*.json")).read_text())
        assert record["batch_id"] == server.created[0] and record["status"] != "completed"
        server.hold.set()
        result = run("structured", batch_backend(server, batch=True), rows, tmp_path / "run",
                     decoding=DECODING, cache_dir=tmp_path / "cache", progress=False)
        assert len(server.created) == 2  # turn 1's batch collected, not sent again; then turn 2's
        assert server.uploads == [server.batches[b].input_file_id for b in server.created]
    assert len(result.records) == len(rows) and all(r.prediction == r.oracle_label for r in result.records)


def test_a_batch_whose_id_never_reached_the_folder_is_found_at_the_service(answers, rows, tmp_path):
    from cpdagthink.backends.openai_api.batch_state import BatchRecord, BatchState

    with BatchAPIServer(answers.answer) as server:
        first = batch_backend(server, batch=True)
        first.attach_run(tmp_path / "run")
        seen: list = []
        first.batches.report = seen.append
        real_save = first.batches.state.save

        def killed_after_submitting(record: BatchRecord) -> None:  # the process dies before writing the id
            if record.batch_id is not None:
                raise KeyboardInterrupt
            real_save(record)

        first.batches.state.save = killed_after_submitting
        requests = [make_request(i) for i in range(3)]
        with pytest.raises(KeyboardInterrupt):
            first.complete_batch(requests)
        assert len(server.created) == 1 and BatchState(tmp_path / "run" / "batches").records()[0].batch_id is None
        second = batch_backend(server, batch=True)
        second.attach_run(tmp_path / "run")
        answers_ = second.complete_batch(requests)
        assert len(server.created) == 1 and all(a.text for a in answers_)


def make_request(i: int):
    from cpdagthink.method.chat import Request

    return Request(messages=({"role": "user", "content": f"Premise: A correlates with B.\nHypothesis: A causes B{i}."},),
                   max_tokens=2048)


# ---------------------------------------------------------------------------------------------- splitting
def test_files_are_split_at_the_services_limits():
    line = input_line("k", "/v1/chat/completions", {})
    files = split_lines([line] * (MAX_REQUESTS + 1))
    assert [len(f) for f in files] == [MAX_REQUESTS, 1]
    big = b"x" * (MAX_BYTES // 3 + 1)
    assert [len(f) for f in split_lines([big] * 4)] == [2, 2]  # three would pass the byte limit
    with pytest.raises(ValueError, match="over the"):
        split_lines([b"x" * (MAX_BYTES + 1)])


def test_a_run_over_the_request_limit_is_sent_as_several_batches(answers, rows, tmp_path):
    with BatchAPIServer(answers.answer) as server:
        made = batch_backend(server, batch=True)
        made.batches.max_requests = 2
        result = run("baseline_enhanced", made, rows, tmp_path / "run", decoding=DECODING,
                     cache_dir=tmp_path / "cache", progress=False)
        assert [len(server.batches[b].lines) for b in server.created] == [2, 2, 1]
    assert all(r.prediction == r.oracle_label for r in result.records)


# ------------------------------------------------------------------------------------------------ options
def test_batch_is_a_transport_option_of_the_same_run():
    from cpdagthink.run.config import RunParameters

    def run(options: str):
        return RunParameters(backend="openai", model="gpt-5.4-mini", backend_options=options).to_config().for_run()

    batched, direct = run("batch=true batch_poll_s=5 base_url=http://127.0.0.1:9/v1"), run("base_url=http://127.0.0.1:9/v1")
    assert batched.backend_options["batch"] is True and batched.backend_options["batch_poll_s"] == 5.0
    assert batched.spec == direct.spec  # the same run, the same folder, the same cache keys
    with pytest.raises(ValueError, match="batch"):
        run("batch=sometimes")
    made = make_backend("openai", model="gpt-5.4-mini", base_url="http://127.0.0.1:9/v1", batch=True)
    plain = make_backend("openai", model="gpt-5.4-mini", base_url="http://127.0.0.1:9/v1")
    assert made.identity() == plain.identity() and made.streams_requests is False
    assert made.preferred_chunk_size > 10**6 > plain.preferred_chunk_size  # a run is one chunk: turn by turn


def test_ctrl_c_leaves_the_batches_running_and_the_command_line_cancels_them(answers, test_csv, tmp_path, capsys):
    from cpdagthink.cli import main
    from cpdagthink.run.config import RunConfig
    from cpdagthink.run.runner import run_config

    with BatchAPIServer(answers.answer) as server:
        server.hold.clear()
        config = RunConfig(condition="baseline_enhanced", backend="openai", model="gpt-5.4-mini", data=str(test_csv),
                           backend_options={"base_url": server.url, "batch": True, "batch_poll_s": 0.05,
                                            "reasoning_effort": "medium"},
                           limit=4, decoding=DECODING, cache_dir=str(tmp_path / "cache"))
        out = tmp_path / "run"

        interrupt_once_submitted(server)
        with pytest.raises(KeyboardInterrupt):
            run_config(config, make_backend("openai", **config.backend_arguments()), config.instances(), out,
                       progress=False)
        said = capsys.readouterr().err
        assert "1 batch(es) keep running at the service (batch_000001)" in said
        assert f"cpdagthink batches --cancel {out}" in said
        assert main(["batches", str(out)]) == 0 and "batch batch_000001 (/v1/responses): in_progress, 0 of 4 done" \
            in capsys.readouterr().out
        assert main(["batches", str(out), "--cancel"]) == 0
        assert "batch batch_000001 (/v1/responses): cancelling" in capsys.readouterr().out
        time.sleep(0.1)
        assert main(["batches", str(out), "--refresh"]) == 0  # as the service sees it now
        assert "batch batch_000001 (/v1/responses): cancelled, 0 of 4 done" in capsys.readouterr().out
        server.hold.set()
        result = run_config(config, make_backend("openai", **config.backend_arguments()), config.instances(), out,
                            progress=False)  # a cancel asked from here does not stop the rerun
        assert len(server.created) == 2 and len(server.batches["batch_000002"].lines) == 4
    assert len(result.records) == 4 and not any(r.rejected for r in result.records)
    assert main(["batches", str(tmp_path)]) == 2  # a folder without batches: said so


# ------------------------------------------------------------------------------------------ vllm run-batch
STANDIN = TESTS / "vllm_run_batch_standin.py"
QWEN = "Qwen/Qwen3-0.6B"


def test_vllm_run_batch_makes_the_records_a_vllm_server_makes(rows, tmp_path, monkeypatch):
    from vllm_run_batch_standin import answer

    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(TESTS.parent / "lib"), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv("VLLM_STANDIN_ARGS", str(tmp_path / "args.json"))
    with BatchAPIServer(lambda path, body: answer(path, body, QWEN)) as server:
        direct = run("structured", make_backend("openai", model=QWEN, base_url=server.url,
                     regex_mode="vllm"),
                     rows, tmp_path / "direct", cache_dir=tmp_path / "cache-direct", progress=False)
    node = make_backend("openai", model=QWEN, regex_mode="vllm", run_batch=f"{sys.executable} {STANDIN} run-batch",
                        run_batch_args="--max-model-len 16384", batch_poll_s=0.05)
    batched = run("structured", node, rows, tmp_path / "batched", cache_dir=tmp_path / "cache",
                  progress=False)
    assert [comparable(r) for r in batched.records] == [comparable(r) for r in direct.records]
    assert all(r.prediction == r.oracle_label for r in batched.records)
    given = json.loads((tmp_path / "args.json").read_text())  # turn 2's process
    assert given[0] == "run-batch" and given[-6:] == ["--model", QWEN, "--reasoning-parser", "qwen3",
                                                      "--max-model-len", "16384"]
    kept = sorted(p.name.split(".", 1)[1] for p in (tmp_path / "batched" / "batches").iterdir())
    assert kept == ["input.jsonl", "input.jsonl", "json", "json", "log", "log", "output.jsonl", "output.jsonl"]
    assert node.provenance().api.endswith(f"run-batch --model {QWEN} through batch files")
    from cpdagthink.backends.openai_api.run_batch import VLLMRunBatch

    assert VLLMRunBatch("/env/bin/vllm", QWEN).command == ["/env/bin/vllm", "run-batch"]


def test_a_vllm_run_batch_that_crashes_stops_the_run_with_its_log(rows, tmp_path, monkeypatch):
    from cpdagthink.backends.base import PartialBatchError

    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(TESTS.parent / "lib"), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv("VLLM_STANDIN_EXIT", "3")
    node = make_backend("openai", model=QWEN, regex_mode="vllm", run_batch=f"{sys.executable} {STANDIN} run-batch",
                        batch_poll_s=0.05)
    with pytest.raises(PartialBatchError, match="exited with status 3.*CUDA out of memory"):
        run("structured", node, rows, tmp_path / "run", cache_dir=tmp_path / "cache",
            progress=False)


def test_vllm_run_batch_error_lines_are_recorded_with_vllms_reason(rows, tmp_path, monkeypatch):
    """vLLM writes an unanswered line with a null body and the reason in ``error``: the server's error response
    (a model it does not serve: 404, sent again up to ``retries``) or a bare string (a URL it does not serve:
    400, refused at once)."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(TESTS.parent / "lib"), os.environ.get("PYTHONPATH", "")]))
    command = f"{sys.executable} {STANDIN} run-batch"
    for options, reason in [(dict(regex_mode="vllm", run_batch_args="--served-model-name other"),
                             f"HTTP 404: The model `{QWEN}` does not exist"),
                            (dict(api="responses"), "HTTP 400: URL /v1/responses was used")]:
        node = make_backend("openai", model=QWEN, run_batch=command, batch_poll_s=0.05, retries=0, **options)
        result = run("baseline_enhanced", node, rows[:2], tmp_path / reason[:8], cache_dir=tmp_path / "cache",
                     progress=False, abort_after=0)
        assert all(r.rejected and reason in r.turns[0].rejected for r in result.records), result.records[0].turns


def test_the_documented_command_runs_through_batches(answers, test_csv, tmp_path, capsys):
    from cpdagthink.cli import main

    with BatchAPIServer(answers.answer) as server:
        args = ["run", "--condition", "structured", "--backend", "openai", "--model", "gpt-5.4-mini",
                "--reasoning-effort", "medium", "--max-tokens-turn1", "8192", "--max-tokens-answer", "4096",
                "--data", str(test_csv), "--limit", "4", "--base-url", server.url, "-o", "batch=true",
                "-o", "batch_poll_s=0.05", "--out", str(tmp_path / "run"), "--cache", str(tmp_path / "cache")]
        assert main(args) == 0
        assert len(server.created) == 2 and not server.direct
    said = capsys.readouterr()
    assert "4 of 4 instances" in said.out and "(8 model calls" in said.out
    assert re.search(r"batch batch_000001 \(/v1/responses\): completed, 4 of 4 done, 0 failed, 0m0\ds since "
                     "submission", said.err)


def test_answers_downloaded_but_never_cached_are_read_from_the_run_folder(answers, rows, tmp_path):
    import shutil

    with BatchAPIServer(answers.answer) as server:
        first = run("structured", batch_backend(server, batch=True), rows, tmp_path / "run",
                    decoding=DECODING, cache_dir=tmp_path / "cache", progress=False)
        shutil.rmtree(tmp_path / "cache")  # as if the process died after downloading, before caching
        (tmp_path / "run" / "records.jsonl").unlink()
        again = run("structured", batch_backend(server, batch=True), rows, tmp_path / "run",
                    decoding=DECODING, cache_dir=tmp_path / "cache", progress=False)
        assert len(server.created) == 2 and not server.direct  # nothing asked again
    assert [comparable(r) for r in again.records] == [comparable(r) for r in first.records]


def test_a_grid_job_running_vllm_run_batch_holds_its_gpus_not_an_api_slot():
    from cpdagthink.run.config import RunConfig
    from cpdagthink.workflow import job_resources

    def resources(**options):
        return job_resources(RunConfig(backend="openai", model=QWEN, backend_options={"regex_mode": "vllm", **options}))

    assert resources(base_url="http://gpu1:8000/v1") == {"threads": 1, "gpu": 0, "api_slots": 1}
    assert resources(base_url="http://gpu1:8000/v1", batch=True)["api_slots"] == 1  # batches share the org's queue
    assert resources(run_batch="vllm run-batch") == {"threads": 1, "gpu": 1, "api_slots": 0}
    assert resources(run_batch="vllm", run_batch_args="--max-model-len 32768 -tp 4")["gpu"] == 4
    assert resources(run_batch="vllm", run_batch_args="--tensor-parallel-size=2")["gpu"] == 2
