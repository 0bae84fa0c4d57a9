"""The limits a real SLURM enforces on the grid's group jobs: a time limit and a memory limit end a job and the
rerun resumes its run, a local model's group gets the cores it asks for, and the same group submitted twice at
once runs once. The cluster, the profile and how the tests keep apart are those of test_slurm.py (its docstring).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cpdagthink.workflow import shell_words

sys.path.insert(0, str(Path(__file__).resolve().parent))

from reasoning_api_server import ReasoningAPIServer  # noqa: E402
from slurm_cluster import PARTITION, job_field, jobs, slurm_profile, slurm_snakemake  # noqa: E402
from snakemake_project import (assert_cache_intact, assert_every_instance_once,  # noqa: E402,F401
                               one_group_execution, plan_of, project, run_snakemake, wait_for)

ENDED = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL"}


def wait_until_ended(root: Path, ids: list[str], timeout: float) -> None:
    wait_for(lambda: all(jobs(root).get(i, {}).get("state") in ENDED for i in ids), timeout,
             f"SLURM jobs {ids} to end")


def test_the_same_group_submitted_twice_at_once_runs_once(slurm, project, tmp_path):
    """Two SLURM jobs computing the same group at once (a retried job whose first attempt still runs): the second
    fails at once on the run lock, naming the first's pid; the first completes every run."""
    with ReasoningAPIServer(latency_s=0.5) as server:
        config, words = one_group_execution(project, server.url)
        line = shell_words([sys.executable, "-m", "cpdagthink", "plan", *words])
        ids = [subprocess.run(["sbatch", "--parsable", "-p", PARTITION, "-t", "5", "--mem", "2000", "-D", str(project),
                               "-o", str(tmp_path / "job-%j.log"), "--export=ALL", "--wrap", line],
                              capture_output=True, text=True, check=True, timeout=30).stdout.strip()
               for _ in range(2)]
        wait_until_ended(project, ids, 180)
    codes = {i: job_field(i, "ExitCode") for i in ids}
    assert sorted(codes.values()) == ["0:0", "2:0"], codes
    (loser,) = [i for i, code in codes.items() if code == "2:0"]
    assert "another run (pid" in (tmp_path / f"job-{loser}.log").read_text()
    assert_every_instance_once(plan_of(project, config))


def ended_by_slurm(root: Path, arguments: list[str], log: Path, limit: str) -> str:
    """Snakemake on ``arguments`` with the group's ``limit`` (``runtime=N`` or ``mem_mb=N``, the override a user
    gives for one invocation) and no retry fails; returns the id of the one group job it submitted."""
    before = set(jobs(root))
    limited = slurm_snakemake(root, "--set-resources", f"group:{limit}", "--retries", "0", *arguments)
    assert run_snakemake(root, limited, log, timeout=300).returncode != 0
    (ended,) = set(jobs(root)) - before
    return ended


def peak_memory_mb(command: list[str]) -> int:
    """The peak resident memory (MB) of ``command``, measured in a fresh child of its own."""
    probe = ("import resource, subprocess, sys; subprocess.run(sys.argv[1:], capture_output=True, check=True); "
             "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")  # ru_maxrss: KB on Linux
    out = subprocess.run([sys.executable, "-c", probe, *command], capture_output=True, text=True, check=True,
                         timeout=120).stdout
    return int(out) // 1024


def test_a_group_over_its_runtime_or_its_memory_is_ended_by_slurm_and_the_rerun_resumes_it(slurm, project, tmp_path):
    """One group through three passes. A 1-minute runtime (`--set-resources group:runtime=1`, no retry) on a run
    that takes about two (50 rows, 5 s per call): SLURM ends it (TIMEOUT) with some calls in the cache (the
    records come per chunk). Then a `mem_mb` below what the job needs (`--set-resources group:mem_mb=N`): the
    reference and API backends hold a few MB per run, under any limit a site would set, so N is half of what
    this machine's Python needs to start Snakemake; slurmstepd, sampling the job's processes every second
    (`JobAcctGatherParams=OverMemoryKill`), kills the job as it starts (FAILED, "exceeded memory limit" in its
    log), and the run left by the timeout is untouched. Then the rerun with the profile's limits asks only the
    calls not cached and keeps what was recorded."""
    slurm_profile(project)
    log = tmp_path / "snakemake.log"
    with ReasoningAPIServer(latency_s=5.0) as server:
        config = ["backend=openai", "model=gpt-5.4-mini", f"backend_options=reasoning_effort=low base_url={server.url}",
                  "limit=50", "only=[01]", "conditions=[\"structured\"]", "include_reference=false"]
        (run,) = plan_of(project, config)
        records = Path(run["folder"]) / "records.jsonl"
        arguments = ["runs", "--config", *config]
        timed_out = ended_by_slurm(project, arguments, log, "runtime=1")
        assert job_field(timed_out, "JobState") == "TIMEOUT" and job_field(timed_out, "TimeLimit") == "00:01:00"
        partial = records.read_bytes() if records.is_file() else b""
        cached = assert_cache_intact(project / "outputs" / "cache")
        assert 0 < cached < 2 * 50  # two turns a row: stopped midway

        server.latency_s = 0.2  # what follows proves what is asked, not when
        mem_mb = peak_memory_mb([sys.executable, "-m", "snakemake", "--version"]) // 2
        killed = ended_by_slurm(project, arguments, log, f"mem_mb={mem_mb}")
        assert job_field(killed, "JobState") == "FAILED" and job_field(killed, "MinMemoryNode") == f"{mem_mb}M"
        assert "exceeded memory limit" in Path(job_field(killed, "StdOut")).read_text()
        assert f"SLURM-job '{killed}' failed" in log.read_text()
        assert (records.read_bytes() if records.is_file() else b"") == partial
        assert assert_cache_intact(project / "outputs" / "cache") == cached

        calls = len(server.requests)
        rerun = slurm_snakemake(project, *arguments)
        assert run_snakemake(project, rerun, log, timeout=300).returncode == 0, log.read_text()[-3000:]
    assert records.read_bytes().startswith(partial)
    assert_every_instance_once(plan_of(project, config))
    assert len(server.requests) - calls <= 2 * 50 - cached  # what was cached before the timeout is not asked


def test_a_local_model_group_gets_the_cores_it_asks_for(slurm, project, tmp_path):
    """SmolLM2 (llama.cpp) on 2 rows, one turn: its group asks for its backend's n_threads (2) as Snakemake threads, and
    SLURM gives the job 2 CPUs."""
    if (os.cpu_count() or 1) < 2:
        pytest.skip("the local model's group asks for 2 cores; this machine has 1")
    slurm_profile(project)
    log = tmp_path / "snakemake.log"
    # One turn and a short answer: constrained turn-1 decoding ran below 1 token/s on this shared machine
    config = ["backend=local", "model=smollm2-135m", "limit=2", "only=[01]", "conditions=[\"baseline_no_thinking\"]",
              "include_reference=false", "sampling=greedy", "max_tokens_turn1=16", "max_tokens_answer=16"]
    start = time.perf_counter()
    command = slurm_snakemake(project, "runs", "--config", *config)
    assert run_snakemake(project, command, log, timeout=420).returncode == 0, log.read_text()[-3000:]
    print(f"SmolLM2 group, 2 rows, on SLURM: {time.perf_counter() - start:.0f} s")
    (job,) = jobs(project)  # the copy is new: its one job is this test's
    assert job_field(job, "NumCPUs") == "2" and job_field(job, "JobState") == "COMPLETED"
    assert_every_instance_once(plan_of(project, config))
