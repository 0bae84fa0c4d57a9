"""Several runs made together on one backend: at once, on one pool of its slots, where it streams requests."""

from __future__ import annotations

import json
import time

import pytest

from batch_api_server import BatchAPIServer, batch_backend, comparable, interrupt_once_submitted
from conftest import configured
from cpdagthink.backends import make_backend
from cpdagthink.backends.reference import ReferenceBackend
from cpdagthink.method.decoding import Decoding
from cpdagthink.run.config import RunParameters
from cpdagthink.run.data import read_csv
from cpdagthink.run.together import Planned, run_configs
from loopback_api import Latency, LoopbackAPI, backend_on
from reasoning_api_server import ReasoningAPIServer


def _setup(test_csv, tmp_path, backend="openai", limit=8):
    return RunParameters(backend=backend, model="gpt-4.1-mini" if backend == "openai" else None, data=str(test_csv),
                         limit=limit, out_root=str(tmp_path / "runs"), cache_dir=str(tmp_path / "cache")).to_config()


def test_runs_made_together_share_one_pool_of_slots_and_a_shared_request_is_paid_once(test_csv, tmp_path):
    setup = _setup(test_csv, tmp_path)
    runs = [setup.for_run("structured", 0), setup.for_run("structured", 0, "scramble_full"),
            setup.for_run("structured", 1)]
    with LoopbackAPI(latency=Latency(0.05, 0.5)) as server:
        backend = backend_on(server, max_concurrency=3)
        start = time.perf_counter()
        results = run_configs([Planned(c, c.instances()) for c in runs], backend, progress=False)
        elapsed = time.perf_counter() - start
    assert [r.summary.status for r in results] == ["finished"] * 3
    assert server.peak_in_flight <= 3
    # the probe's turn 1 is the unprobed run's: asked once in all, whichever run got to it first
    assert sum(r.model_calls for r in results) == len(server.log) == 8 * 2 + 8 + 8 * 2
    assert results[1].cache_hits + results[0].cache_hits == 8
    # one after the other the three walls would add up to the elapsed time at most
    assert sum(r.summary.wall_clock_s for r in results) > 1.3 * elapsed


def test_runs_on_a_batch_backend_are_made_one_after_the_other_as_before(test_csv, tmp_path):
    setup = _setup(test_csv, tmp_path, backend="reference", limit=3)
    runs = [setup.for_run("structured", 0), setup.for_run("baseline_enhanced", 0)]
    results = run_configs([Planned(c, c.instances()) for c in runs], ReferenceBackend(), progress=False)
    assert [r.summary.status for r in results] == ["finished"] * 2
    assert [r.model_calls for r in results] == [6, 3]
    first, second = (json.loads((r.out_dir / "metadata.json").read_text()) for r in results)
    assert first["finished_at"] <= second["started_at"]  # the second began once the first had ended


def test_a_run_asked_twice_together_is_made_once_not_refused_by_its_own_lock(test_csv, tmp_path):
    """Two readings of one chapter may need the same run (chapter 05 did): made at once, the second session
    found the folder locked by the first ("another run is writing into ...")."""
    setup = _setup(test_csv, tmp_path, limit=4)
    config = setup.for_run("structured", 0)
    with LoopbackAPI() as server:
        results = run_configs([Planned(config, config.instances()), Planned(config, config.instances()),
                               Planned(setup.for_run("baseline_enhanced", 0), config.instances())],
                              backend_on(server), progress=False)
    assert [r.summary.status for r in results] == ["finished"] * 3
    assert results[0] is results[1] and len(server.log) == 4 * 2 + 4


# ------------------------------------------------------------------------------------------------ batch files
DECODING = Decoding(max_tokens_turn1=8192, max_tokens_answer=4096)  # a reasoning model's budgets


def _batch_runs(test_csv, tmp_path, name: str) -> list[Planned]:
    """A plan group on a reasoning model: two seeds of the two-turn condition, a probe of the first (its turn 1 is
    the unprobed run's) and the one-turn baseline, each in a folder of ``name``."""
    found = read_csv(test_csv)
    rows = [i for i in found if i.num_variables == 3][:3] + [i for i in found if i.num_variables == 4][:2]
    runs = {"structured-0": ("structured", 0, None), "structured-1": ("structured", 1, None),
            "scramble-0": ("structured", 0, "scramble_full"), "baseline-0": ("baseline_enhanced", 0, None)}
    return [Planned(configured(condition, cache_dir=tmp_path / f"cache-{name}", probe=probe,
                               decoding=DECODING.model_copy(update={"seed": seed})), rows, tmp_path / name / run)
            for run, (condition, seed, probe) in runs.items()]


def test_batch_runs_made_together_send_one_round_per_turn_and_make_the_direct_records(test_csv, tmp_path):
    with ReasoningAPIServer(content_ids=True) as planted, BatchAPIServer(planted.answer) as server:
        direct = run_configs(_batch_runs(test_csv, tmp_path, "direct"), batch_backend(server), progress=False)
        paid = len(server.direct)
        batched = run_configs(_batch_runs(test_csv, tmp_path, "batched"), batch_backend(server, batch=True), progress=False)
        assert len(server.direct) == paid  # nothing sent directly in batch mode
        # turn 1 of the four runs (the probe's is the unprobed run's: one line), then turn 2 of the three two-turn runs
        assert [len(server.batches[b].lines) for b in server.created] == [3 * 5, 3 * 5]
        assert all(server.batches[b].status == "completed" for b in server.created)
    assert [r.summary.status for r in batched] == ["finished"] * 4
    for one, other in zip(batched, direct):
        assert [comparable(r) for r in one.records] == [comparable(r) for r in other.records]
    assert sum(r.model_calls for r in batched) == paid == 3 * 5 + 3 * 5  # the shared turn 1 paid once
    # whichever of the two asked it first paid; the other read it as a hit, as it would one run after the other
    assert batched[0].cache_hits + batched[2].cache_hits == 5 and batched[0].model_calls + batched[2].model_calls == 15
    # each run folder lists the batches holding its requests, and only its requests
    listed = {r.out_dir.name: [json.loads(p.read_text()) for p in sorted((r.out_dir / "batches").glob("*.json"))]
              for r in batched}
    assert {run: len(batches) for run, batches in listed.items()} == {
        "structured-0": 2, "structured-1": 2, "scramble-0": 2, "baseline-0": 1}
    assert all(len(b["custom_ids"]) == 5 for batches in listed.values() for b in batches)


def test_batch_runs_interrupted_together_resume_alone_or_together_without_submitting_again(test_csv, tmp_path):
    with ReasoningAPIServer(content_ids=True) as planted, BatchAPIServer(planted.answer) as server:
        server.hold.clear()  # turn 1's batch stays in progress until the interruption

        interrupt_once_submitted(server)
        runs = _batch_runs(test_csv, tmp_path, "batched")
        with pytest.raises(KeyboardInterrupt):
            run_configs(runs, batch_backend(server, batch=True), progress=False)
        assert len(server.created) == 1
        assert all(json.loads((r.out / "summary.json").read_text())["status"] == "interrupted" for r in runs)
        server.hold.set()
        # the baseline alone: it polls the batch it shares with the others, submits nothing
        alone = run_configs(runs[3:], batch_backend(server, batch=True), progress=False)[0]
        assert len(server.created) == 1 and alone.summary.status == "finished" and alone.model_calls == 5
        # then the others together: turn 1 collected from the same batch, then one round for their turn 2
        rest = run_configs(runs[:3], batch_backend(server, batch=True), progress=False)
        assert len(server.created) == 2 and len(server.batches[server.created[1]].lines) == 3 * 5
    assert [r.summary.status for r in rest] == ["finished"] * 3
    assert all(len(r.records) == 5 and not any(record.rejected for record in r.records) for r in rest)
