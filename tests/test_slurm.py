"""The grid on a real SLURM: Debian's slurmctld and slurmd (22.05) on this machine as one node, started for the
session by scripts/slurm-local.sh and stopped after it (left running if it was running before), with the
slurm profile (workflow/profiles/slurm) as shipped except for the partition names (and, outside the
`make grid PROFILE=slurm` test, a first status check sooner: :data:`FAST_STATUS`).

Without root (or sudo) or without the packages (no apt repository), the cluster cannot start: every test here
is skipped, with the reason printed in the session's output (under CI, a cluster that fails to start with root
is a failure). Each test runs Snakemake or sbatch in a copy of the
project (the ``project`` fixture of test_workflow.py) and bounds every wait, so a scheduler that hangs fails
the test instead of holding the suite.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cpdagthink.paths import PROJECT_ROOT
from cpdagthink.workflow import shell_words

sys.path.insert(0, str(Path(__file__).resolve().parent))

from conftest import in_ci  # noqa: E402
from reasoning_api_server import ReasoningAPIServer  # noqa: E402
from test_workflow import (assert_cache_intact, assert_every_instance_once, one_group_execution,  # noqa: E402,F401
                           plan_of, project, run_snakemake, snakemake, wait_for)

SCRIPT = PROJECT_ROOT / "scripts" / "slurm-local.sh"
PARTITION = "local"  # the single partition of scripts/slurm-local.sh's cluster
# The plugin's first status check 1 s after a submission instead of the profile's 10 s (each later check still
# 10 s further apart than the one before, until a job completes): how soon a test sees a job end, not what the
# profile does. The `make grid PROFILE=slurm` test runs the profile as shipped.
FAST_STATUS = ("--slurm-init-seconds-before-status-checks", "1")


def _say(config: pytest.Config, line: str) -> None:
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(f"test_slurm: {line}")


def _script(command: str, timeout: float) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(SCRIPT), command], capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="session")
def slurm(pytestconfig):
    """The single-node cluster: started here unless it already runs (then left running at the end)."""
    reason = None
    if os.geteuid() != 0 and subprocess.run(["sudo", "-n", "true"], capture_output=True).returncode != 0:
        reason = "the single-node SLURM needs root or passwordless sudo (scripts/slurm-local.sh)"
    elif shutil.which("apt-get") is None and shutil.which("slurmctld") is None:
        reason = "no SLURM installed and no apt-get to install it (scripts/slurm-local.sh)"
    if reason:
        _say(pytestconfig, f"skipped: {reason}")
        pytest.skip(reason)
    started = _script("status", 30).returncode != 0
    if started:
        begin = time.perf_counter()
        result = _script("start", 300)
        if result.returncode != 0:
            reason = f"scripts/slurm-local.sh start failed: {(result.stderr or result.stdout).strip()[-600:]}"
            if in_ci():  # CI runs as root with Debian's repositories: a cluster that does not start is a failure
                pytest.fail(reason, pytrace=False)
            _say(pytestconfig, f"skipped: {reason}")
            pytest.skip(reason)
        _say(pytestconfig, f"single-node SLURM started in {time.perf_counter() - begin:.0f} s")
    yield
    if started:
        _script("stop", 120)


# ------------------------------------------------------------------------------------------------ helpers
def slurm_profile(root: Path) -> None:
    """The copy's slurm profile with its CPU partition renamed to this cluster's; nothing else changes."""
    partitions = root / "workflow" / "profiles" / "slurm" / "partitions.yaml"
    text = partitions.read_text()
    assert "\n  cpu:" in text
    partitions.write_text(text.replace("\n  cpu:", f"\n  {PARTITION}:"))


def slurm_snakemake(root: Path, *arguments: str) -> list[str]:
    """Snakemake with the slurm profile and :data:`FAST_STATUS`."""
    return snakemake(root, "slurm", *FAST_STATUS, *arguments)


def jobs() -> dict[str, dict[str, str]]:
    """Every job slurmctld knows (finished ones for MinJobAge): id -> state, name and comment (rule, wildcards)."""
    out = subprocess.run(["squeue", "--states=all", "--noheader", "--format=%i|%T|%j|%k"], capture_output=True,
                         text=True, check=True, timeout=30).stdout
    return {i: {"state": s, "name": n, "comment": c}
            for i, s, n, c in (line.split("|", 3) for line in out.splitlines() if line.strip())}


def running_group(prefix: str, other_than: set[str] = frozenset()) -> str | None:
    """The id of a running group job whose group key starts with ``prefix``."""
    return next((i for i, job in jobs().items() if job["state"] == "RUNNING" and i not in other_than
                 and job["comment"].startswith(f"rule_group_wildcards_{prefix}")), None)


def show_job(job_id: str) -> str:
    return subprocess.run(["scontrol", "show", "job", "-dd", job_id], capture_output=True, text=True, check=True,
                          timeout=30).stdout


def job_field(job_id: str, name: str) -> str:
    return re.search(rf"\b{name}=(\S+)", show_job(job_id)).group(1)


def wait_until_ended(ids: list[str], timeout: float) -> None:
    ended = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL"}
    wait_for(lambda: all(jobs().get(i, {}).get("state") in ended for i in ids), timeout, f"SLURM jobs {ids} to end")


def job_processes(job_id: str) -> list[int]:
    """The pids of a job's processes on the node (its batch shell and everything under it)."""
    pids = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                environ = (proc / "environ").read_bytes().split(b"\0")
            except OSError:
                continue
            if f"SLURM_JOB_ID={job_id}".encode() in environ and (proc / "comm").read_text().strip() != "slurmstepd":
                pids.append(int(proc.name))
    return pids


def finished(folder: Path) -> bool:
    summary = folder / "summary.json"
    return summary.is_file() and json.loads(summary.read_text()).get("status") == "finished"


def assert_no_key_anywhere(key: str, root: Path, job_ids: list[str], log: Path) -> None:
    """The key reached no sbatch argument, job name or comment (``scontrol show job``), no batch script, no SLURM
    or Snakemake log, nothing under .snakemake/ or outputs/."""
    for job_id in job_ids:
        assert key not in show_job(job_id)
        script = subprocess.run(["scontrol", "write", "batch_script", job_id, "-"], capture_output=True, text=True,
                                timeout=30)
        assert key not in script.stdout + script.stderr
    files = [log, *(p for p in (root / ".snakemake").rglob("*") if p.is_file()),
             *(p for p in (root / "outputs").rglob("*") if p.is_file()),
             *(p for p in Path("/var/log/slurm").glob("*.log"))]
    leaked = [str(p) for p in files if key.encode() in p.read_bytes()]
    assert not leaked, leaked


# ------------------------------------------------------------------------------------------------ the proofs
def test_make_grid_on_slurm_builds_the_book_and_a_second_pass_submits_nothing(slurm, project, tmp_path):
    """`make grid PROFILE=slurm` (the shipped profile, its CPU partition renamed) on the reference backend,
    chapter 01 on 4 rows: each group, the chapter and the book are SLURM jobs; a second pass submits none."""
    slurm_profile(project)
    for name in ("Makefile", "pyproject.toml"):  # the stamp below is newer than this pyproject.toml: no install
        shutil.copy2(PROJECT_ROOT / name, project / name)
    stamp = tmp_path / "installed"
    stamp.touch()
    make = ["make", "-s", "-C", str(project), "-o", "browser", "grid", f"STAMP={stamp}",
            f"BIN={Path(sys.executable).parent}", "PROFILE=slurm", "BACKEND=reference", "LIMIT=4", "ONLY=01"]
    log = tmp_path / "make.log"
    before = set(jobs())
    start = time.perf_counter()
    assert run_snakemake(project, make, log, timeout=540).returncode == 0, log.read_text()[-3000:]
    print(f"make grid PROFILE=slurm, reference, 4 rows, chapter 01: {time.perf_counter() - start:.0f} s")
    assert (project / "_build" / "html" / "index.html").is_file()
    assert (project / "book" / "01_main_results.ipynb").is_file()
    assert_every_instance_once(plan_of(project, ["backend=reference", "limit=4", "only=[01]"]))
    submitted = {i: job for i, job in jobs().items() if i not in before}
    rules = sorted(job["comment"].split("_wildcards_")[0] for job in submitted.values())
    assert rules == ["rule_book", "rule_chapter", "rule_group"], submitted  # chapter 01 reads one group
    assert {job["state"] for job in submitted.values()} == {"COMPLETED"}
    assert {job_field(i, "Partition") for i in submitted} == {PARTITION}
    # The group's runtime from its kind (group-limits.yaml: the reference agent has the default row), the
    # chapter's and the book's from the profile's default-resources.
    limits = {job["comment"].split("_wildcards_")[0]: job_field(i, "TimeLimit") for i, job in submitted.items()}
    assert limits == {"rule_group": "01:00:00", "rule_chapter": "00:30:00", "rule_book": "00:30:00"}, limits

    again = set(jobs())
    assert run_snakemake(project, make, log, timeout=120).returncode == 0
    assert "Nothing to be done" in log.read_text().rsplit("Building DAG", 1)[-1]
    assert set(jobs()) == again  # nothing submitted


def test_a_cancelled_then_killed_group_job_reruns_the_rest_and_the_key_never_reaches_the_scheduler(
        slurm, project, tmp_path, monkeypatch):
    """Chapter 01 on the OpenAI backend (the test server, 1 s per call): once one of the group's four runs has
    finished, its SLURM job is cancelled (scancel); Snakemake reports it and retries it (the profile's
    `retries: 1`); once another run has finished, every process of the retry on the node is killed with SIGKILL
    (a lost node). Snakemake fails; the rerun computes only the rest: every instance has one record, the runs
    finished before are byte for byte as they were, the cache holds whole entries only. OPENAI_API_KEY reaches
    the jobs' environment and nothing else."""
    slurm_profile(project)
    key = f"sk-slurm-{secrets.token_hex(12)}"
    monkeypatch.setenv("OPENAI_API_KEY", key)
    log = tmp_path / "snakemake.log"
    with ReasoningAPIServer(latency_s=1.0) as server:
        config = ["backend=openai", "model=gpt-5.4-mini", f"backend_options=reasoning_effort=low base_url={server.url}",
                  "limit=10", "only=[01]"]
        command = slurm_snakemake(project, "runs", "--config", *config)
        api_runs = [Path(r["folder"]) for r in plan_of(project, config) if r["config"]["backend"] == "openai"]
        assert len(api_runs) == 4  # chapter 01's four conditions, one group (model and seed)
        before = set(jobs())
        with log.open("ab") as sink:
            first = subprocess.Popen(command, cwd=project, stdout=sink, stderr=subprocess.STDOUT)
        try:
            wait_for(lambda: any(finished(f) for f in api_runs) and running_group("openai-"), 180,
                     "the API group's first run on SLURM")
            cancelled = running_group("openai-")
            environ = [(Path("/proc") / str(pid) / "environ").read_bytes() for pid in job_processes(cancelled)]
            assert any(f"OPENAI_API_KEY={key}".encode() in e.split(b"\0") for e in environ)  # through the environment
            subprocess.run(["scancel", cancelled], check=True, timeout=30)
            done_cancelled = {f: (f / "records.jsonl").read_bytes() for f in api_runs if finished(f)}
            assert len(done_cancelled) < len(api_runs), "the group ended before it could be cancelled"

            wait_for(lambda: running_group("openai-", {cancelled}), 120, "Snakemake to retry the cancelled group")
            retry = running_group("openai-", {cancelled})
            wait_for(lambda: sum(finished(f) for f in api_runs) > len(done_cancelled), 120, "a run of the retry")
            for pid in job_processes(retry):
                with contextlib.suppress(ProcessLookupError):  # a process of the job ended since it was listed
                    os.kill(pid, signal.SIGKILL)
            done_before = {f: (f / "records.jsonl").read_bytes() for f in api_runs if finished(f)}
            assert len(done_before) < len(api_runs), "the retry ended before it could be killed"
            assert first.wait(timeout=180) != 0  # the retry failed too: Snakemake gives up on the group
        finally:
            if first.poll() is None:
                first.kill()
        assert job_field(cancelled, "JobState") == "CANCELLED" and job_field(retry, "JobState") == "FAILED"
        assert log.read_text().count("Error in rule group") >= 2
        asked_before = {json.dumps(body, sort_keys=True) for body in server.requests}
        rerun_from = len(server.requests)
        server.latency_s = 0.1  # the rerun proves what is asked again, not when

        assert run_snakemake(project, command, log, timeout=300).returncode == 0, log.read_text()[-3000:]
        asked_again = [b for b in server.requests[rerun_from:] if json.dumps(b, sort_keys=True) in asked_before]

    plan = plan_of(project, config)
    assert_every_instance_once(plan)
    for folder, text in done_before.items():
        assert (folder / "records.jsonl").read_bytes() == text
    for folder, text in done_cancelled.items():
        assert done_before[folder] == text
    # Only the run the kill interrupted is asked again, and at most its rows' two turns
    assert len(asked_again) <= 2 * 10
    assert_cache_intact(project / "outputs" / "cache")
    assert_no_key_anywhere(key, project, sorted(set(jobs()) - before), log)


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
        wait_until_ended(ids, 180)
    codes = {i: job_field(i, "ExitCode") for i in ids}
    assert sorted(codes.values()) == ["0:0", "2:0"], codes
    (loser,) = [i for i, code in codes.items() if code == "2:0"]
    assert "another run (pid" in (tmp_path / f"job-{loser}.log").read_text()
    assert_every_instance_once(plan_of(project, config))


def ended_by_slurm(root: Path, arguments: list[str], log: Path, limit: str) -> str:
    """Snakemake on ``arguments`` with the group's ``limit`` (``runtime=N`` or ``mem_mb=N``, the override a user
    gives for one invocation) and no retry fails; returns the id of the one group job it submitted."""
    before = set(jobs())
    limited = slurm_snakemake(root, "--set-resources", f"group:{limit}", "--retries", "0", *arguments)
    assert run_snakemake(root, limited, log, timeout=300).returncode != 0
    (ended,) = set(jobs()) - before
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
    before = set(jobs())
    start = time.perf_counter()
    command = slurm_snakemake(project, "runs", "--config", *config)
    assert run_snakemake(project, command, log, timeout=420).returncode == 0, log.read_text()[-3000:]
    print(f"SmolLM2 group, 2 rows, on SLURM: {time.perf_counter() - start:.0f} s")
    (job,) = set(jobs()) - before
    assert job_field(job, "NumCPUs") == "2" and job_field(job, "JobState") == "COMPLETED"
    assert_every_instance_once(plan_of(project, config))
