"""Several runs made together on one backend: at once, on one pool of its slots, where it streams requests."""

from __future__ import annotations

import json
import time

from cpdagthink.backends.reference import ReferenceBackend
from cpdagthink.run.config import RunParameters
from cpdagthink.run.together import Planned, run_configs
from loopback_api import Latency, LoopbackAPI, backend_on


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
