"""The single-node SLURM of the tests (scripts/slurm-local.sh), shared by the SLURM modules and by the test
workers that run them at once, and the helpers that read its jobs.

One cluster per machine (SLURM's ports are fixed), so the first worker to need it starts it under a lock in
the session's shared folder (conftest's ``SHARED_ENV``, made by the controller) and leaves a
mark there; the controller stops it once every worker is done (:func:`stop_if_started`). A cluster that ran
before the session is left running. Tests running at once tell their jobs apart by working directory: each
submits from its own copy of the project (:func:`jobs`).
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cpdagthink.paths import PROJECT_ROOT

sys.path.insert(0, str(Path(__file__).resolve().parent))

from conftest import SHARED_ENV  # noqa: E402
from snakemake_project import snakemake  # noqa: E402

SCRIPT = PROJECT_ROOT / "scripts" / "slurm-local.sh"
PARTITION = "local"  # the single partition of scripts/slurm-local.sh's cluster
STARTED = "slurm-started"  # this session started the cluster: the controller stops it at the end
_READY, _FAILED, _LOCK = "slurm-ready", "slurm-failed", "slurm.lock"
# The plugin's first status check 1 s after a submission instead of the profile's 10 s (each later check still
# 10 s further apart than the one before, until a job completes): how soon a test sees a job end, not what the
# profile does. The `make grid PROFILE=slurm` test runs the profile as shipped.
FAST_STATUS = ("--slurm-init-seconds-before-status-checks", "1")


def _script(command: str, timeout: float) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(SCRIPT), command], capture_output=True, text=True, timeout=timeout)


def _say(config: pytest.Config, line: str) -> None:
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(f"slurm: {line}")


def _unavailable() -> str | None:
    """Why this machine cannot run the cluster, or None (missing packages: `slurm-local.sh start` says so)."""
    if os.geteuid() != 0 and subprocess.run(["sudo", "-n", "true"], capture_output=True).returncode != 0:
        return "the single-node SLURM needs root or passwordless sudo (scripts/slurm-local.sh)"
    return None


def _start_once(shared: Path, config: pytest.Config) -> str | None:
    """Start the cluster unless this session has (or it already runs); why it cannot start, or None. Run under
    the session's lock, so a second worker waits for the first's start and then reads its outcome."""
    if (shared / _FAILED).exists():
        return (shared / _FAILED).read_text()
    if (shared / _READY).exists():
        return None
    if _script("status", 30).returncode != 0:
        begin = time.perf_counter()
        result = _script("start", 300)
        if result.returncode != 0:
            reason = f"scripts/slurm-local.sh start failed: {(result.stderr or result.stdout).strip()[-600:]}"
            (shared / _FAILED).write_text(reason)
            return reason
        (shared / STARTED).touch()
        _say(config, f"single-node SLURM started in {time.perf_counter() - begin:.0f} s")
    (shared / _READY).touch()
    return None


def require_cluster(config: pytest.Config, in_ci: bool) -> None:
    """The cluster running for this test, or a skip saying why it cannot (a failure under CI, which runs as
    root after `make test` installed SLURM)."""
    reason = _unavailable()
    if not reason:
        shared = Path(os.environ[SHARED_ENV])
        with open(shared / _LOCK, "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
            reason = _start_once(shared, config)
    if reason:
        if in_ci:
            pytest.fail(reason, pytrace=False)
        _say(config, f"skipped: {reason}")
        pytest.skip(reason)


def stop_if_started(shared: Path) -> None:
    """Stop the cluster if this session started it (the controller, after every worker has ended)."""
    if (shared / STARTED).exists():
        _script("stop", 120)


# ------------------------------------------------------------------------------------------------ its jobs
def jobs(root: Path) -> dict[str, dict[str, str]]:
    """The jobs slurmctld knows (finished ones for MinJobAge) submitted from ``root``, one test's copy of the
    project: id -> state, name and comment (rule, wildcards)."""
    out = subprocess.run(["squeue", "--states=all", "--noheader", "--format=%i|%T|%j|%k|%Z"], capture_output=True,
                         text=True, check=True, timeout=30).stdout
    rows = (line.split("|", 4) for line in out.splitlines() if line.strip())
    here = os.path.realpath(root)
    return {i: {"state": s, "name": n, "comment": c} for i, s, n, c, workdir in rows
            if os.path.realpath(workdir) == here}


def running_group(root: Path, prefix: str, other_than: set[str] = frozenset()) -> str | None:
    """The id of a running group job from ``root`` whose group key starts with ``prefix``."""
    return next((i for i, job in jobs(root).items() if job["state"] == "RUNNING" and i not in other_than
                 and job["comment"].startswith(f"rule_group_wildcards_{prefix}")), None)


def show_job(job_id: str) -> str:
    return subprocess.run(["scontrol", "show", "job", "-dd", job_id], capture_output=True, text=True, check=True,
                          timeout=30).stdout


def job_field(job_id: str, name: str) -> str:
    return re.search(rf"\b{name}=(\S+)", show_job(job_id)).group(1)


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


def slurm_snakemake(root: Path, *arguments: str) -> list[str]:
    """Snakemake with the slurm profile and :data:`FAST_STATUS`."""
    return snakemake(root, "slurm", *FAST_STATUS, *arguments)


def slurm_profile(root: Path) -> None:
    """The copy's slurm profile with its CPU partition renamed to this cluster's; nothing else changes."""
    partitions = root / "workflow" / "profiles" / "slurm" / "partitions.yaml"
    text = partitions.read_text()
    assert "\n  cpu:" in text
    partitions.write_text(text.replace("\n  cpu:", f"\n  {PARTITION}:"))
