"""The grid on a real SLURM: `make grid PROFILE=slurm` builds the book, and a group job cancelled, then killed
with its node, is rerun with nothing lost. Debian's slurmctld and slurmd (22.05) on this machine as one node,
started once for the session (:mod:`slurm_cluster`), with the slurm profile (workflow/profiles/slurm) as shipped
except for the partition names (and, outside the `make grid PROFILE=slurm` test, a first status check sooner:
:data:`slurm_cluster.FAST_STATUS`). test_slurm_limits.py holds the proofs of the limits SLURM enforces; the two
modules run beside each other on two test workers, since each mostly waits on the scheduler.

Without root (or sudo) or without the packages (no apt repository), the cluster cannot start: every test here
is skipped, with the reason printed in the session's output (under CI, a cluster that fails to start with root
is a failure). Each test runs Snakemake or sbatch in a copy of the project (the ``project`` fixture of
snakemake_project.py), reads only the jobs submitted from that copy, and bounds every wait, so a scheduler that
hangs fails the test instead of holding the suite.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from cpdagthink.paths import PROJECT_ROOT

sys.path.insert(0, str(Path(__file__).resolve().parent))

from reasoning_api_server import ReasoningAPIServer  # noqa: E402
from slurm_cluster import (PARTITION, finished, job_field, job_processes, jobs, running_group,  # noqa: E402
                           show_job, slurm_profile, slurm_snakemake)
from snakemake_project import (assert_cache_intact, assert_every_instance_once, plan_of, project,  # noqa: E402,F401
                               run_snakemake, wait_for)


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
    make = ["make", "-s", "-C", str(project), "-o", "system-packages", "grid", f"STAMP={stamp}",
            f"BIN={Path(sys.executable).parent}", "PROFILE=slurm", "BACKEND=reference", "LIMIT=4", "ONLY=01"]
    log = tmp_path / "make.log"
    start = time.perf_counter()
    assert run_snakemake(project, make, log, timeout=540).returncode == 0, log.read_text()[-3000:]
    print(f"make grid PROFILE=slurm, reference, 4 rows, chapter 01: {time.perf_counter() - start:.0f} s")
    assert (project / "_build" / "html" / "index.html").is_file()
    assert (project / "book" / "01_main_results.ipynb").is_file()
    assert_every_instance_once(plan_of(project, ["backend=reference", "limit=4", "only=[01]"]))
    submitted = jobs(project)  # the copy is new: every job from it is this test's
    rules = sorted(job["comment"].split("_wildcards_")[0] for job in submitted.values())
    assert rules == ["rule_book", "rule_chapter", "rule_group"], submitted  # chapter 01 reads one group
    assert {job["state"] for job in submitted.values()} == {"COMPLETED"}
    assert {job_field(i, "Partition") for i in submitted} == {PARTITION}
    # The group's runtime from its kind (group-limits.yaml: the reference agent has the default row), the
    # chapter's and the book's from the profile's default-resources.
    limits = {job["comment"].split("_wildcards_")[0]: job_field(i, "TimeLimit") for i, job in submitted.items()}
    assert limits == {"rule_group": "01:00:00", "rule_chapter": "00:30:00", "rule_book": "00:30:00"}, limits

    again = set(jobs(project))
    assert run_snakemake(project, make, log, timeout=120).returncode == 0
    assert "Nothing to be done" in log.read_text().rsplit("Building DAG", 1)[-1]
    assert set(jobs(project)) == again  # nothing submitted


def _records_written(folders: list[Path]) -> int:
    """The records the runs in ``folders`` hold so far."""
    return sum(len((f / "records.jsonl").read_bytes().splitlines()) for f in folders if (f / "records.jsonl").is_file())


def test_a_cancelled_then_killed_group_job_reruns_the_rest_and_the_key_never_reaches_the_scheduler(
        slurm, project, tmp_path, monkeypatch):
    """Chapter 01 on the OpenAI backend (the test server, 1 s per call): once one of the group's four runs has
    finished, its SLURM job is cancelled (scancel); Snakemake reports it and retries it (the profile's
    `retries: 1`); once the retry has written records, every process of the retry on the node is killed with SIGKILL
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
        with log.open("ab") as sink:
            first = subprocess.Popen(command, cwd=project, stdout=sink, stderr=subprocess.STDOUT)
        try:
            wait_for(lambda: any(finished(f) for f in api_runs) and running_group(project, "openai-"), 180,
                     "the API group's first run on SLURM")
            cancelled = running_group(project, "openai-")
            environ = [(Path("/proc") / str(pid) / "environ").read_bytes() for pid in job_processes(cancelled)]
            assert any(f"OPENAI_API_KEY={key}".encode() in e.split(b"\0") for e in environ)  # through the environment
            subprocess.run(["scancel", cancelled], check=True, timeout=30)
            done_cancelled = {f: (f / "records.jsonl").read_bytes() for f in api_runs if finished(f)}
            assert len(done_cancelled) < len(api_runs), "the group ended before it could be cancelled"

            wait_for(lambda: running_group(project, "openai-", {cancelled}), 120,
                     "Snakemake to retry the cancelled group")
            retry = running_group(project, "openai-", {cancelled})
            # the retry's runs go at once, on one pool of slots, and end close together: kill it once it wrote
            # records, not once a run of it finished (by then the others may have finished too)
            at_cancel = _records_written(api_runs)
            wait_for(lambda: _records_written(api_runs) > at_cancel, 120, "records of the retry")
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
    assert_no_key_anywhere(key, project, sorted(jobs(project)), log)

