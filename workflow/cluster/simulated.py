#!/usr/bin/env python3
"""A cluster simulated on this machine for Snakemake's generic cluster executor (the kill test, a dry run of
a cluster's failure modes). Standard library only, so any ``python3`` runs it.

``simulated.py submit JOBSCRIPT``  starts the job script as its own detached process, in a session of its own
                                   (it outlives this script and Snakemake's process group, as a batch job does),
                                   and prints its job id (the session leader's pid).
``simulated.py status JOBID``      prints ``running``, ``success`` or ``failed`` (what the executor reads).
``simulated.py cancel JOBID...``   kills those jobs' sessions (Snakemake calls it on Ctrl-C).

Each job leaves ``<id>.sh`` (its script), ``<id>.log`` (its output) and, when it ends on its own, ``<id>.rc``
(its exit code) in the state folder, ``$CPDAGTHINK_CLUSTER_DIR`` or ``.snakemake/simulated-cluster``. A job
killed from outside (``kill -KILL -- -ID``: a lost node) writes no exit code and reads as failed.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

# The wrapper: run the job, then publish its exit code by rename (a reader never sees half a file).
WRAPPER = 'sh "$0"; code=$?; echo $code > "$1/$$.rc.tmp"; mv "$1/$$.rc.tmp" "$1/$$.rc"'


def state_dir() -> Path:
    folder = Path(os.environ.get("CPDAGTHINK_CLUSTER_DIR") or ".snakemake/simulated-cluster").resolve()
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def submit(jobscript: str) -> str:
    state = state_dir()
    log = state / f"submitting-{os.getpid()}.log"
    with log.open("wb") as sink:
        job = subprocess.Popen(["/bin/sh", "-c", WRAPPER, jobscript, str(state)], stdin=subprocess.DEVNULL,
                               stdout=sink, stderr=subprocess.STDOUT, start_new_session=True)
    log.rename(state / f"{job.pid}.log")  # the job's open handle follows the file
    shutil.copy(jobscript, state / f"{job.pid}.sh")  # Snakemake deletes the script once the job is done
    return str(job.pid)


def alive(job_id: str) -> bool:
    """Whether the job's session leader still runs (a zombie or another process under a reused pid does not)."""
    try:
        fields = Path(f"/proc/{int(job_id)}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, ValueError):
        return False
    state, session = fields[0], fields[3]
    return state != "Z" and session == job_id


def status(job_id: str) -> str:
    rc = state_dir() / f"{job_id}.rc"
    for _ in range(2):  # the job may end between the two looks: read its exit code again after seeing it gone
        if rc.is_file():
            return "success" if rc.read_text().strip() == "0" else "failed"
        if alive(job_id):
            return "running"
    return "failed"


def cancel(job_ids: list[str]) -> None:
    for job_id in job_ids:
        if alive(job_id):
            os.killpg(int(job_id), signal.SIGTERM)


def main(argv: list[str]) -> int:
    if len(argv) < 2 or argv[0] not in ("submit", "status", "cancel"):
        print("usage: simulated.py submit JOBSCRIPT | status JOBID | cancel JOBID...", file=sys.stderr)
        return 2
    if argv[0] == "submit":
        print(submit(argv[-1]))
    elif argv[0] == "status":
        print(status(argv[1]))
    else:
        cancel(argv[1:])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
