"""Benchmark: the README's commands on a fresh clone, each phase's wall time and peak memory.

Clones this checkout's committed HEAD into a temporary folder and runs there, one after the other,
``make setup`` (a new .venv: pip builds llama-cpp-python, Chromium if missing), ``make test`` and ``make book``,
with an empty pip cache of its own unless ``--keep-pip-cache``. The clone has no model cache
(``$CPDAGTHINK_MODEL_CACHE`` is unset for it, so the default model is assembled and verified in the clone's
``outputs/models``); the Corr2Cause CSV is passed on as ``$CORR2CAUSE_CSV`` (the variable's value, else the
workspace copy next to this checkout, else the clone downloads it). Chromium is a system package: a machine
that has it skips its installation.

Per phase: wall time, CPU time (user + system) and the peak resident memory of the largest single process
(``ru_maxrss`` of the phase's process tree, from ``os.wait4``; at least this script's own size, about 30 MB,
as a child starts as its copy), with the load average before and after; each
phase's output goes to a log file in the work folder. The work folder is removed at the end unless ``--keep``
or a phase failed (later phases are then skipped).

    python benchmarks/two_commands.py                      # all three phases, about 40 minutes on 2 cores
    python benchmarks/two_commands.py --phases setup test --keep-pip-cache
    python benchmarks/two_commands.py --dry-run            # what would run, nothing run
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Sequence

ROOT = Path(__file__).resolve().parents[1]
PHASES = ("setup", "test", "book")
SHARED_CSV = ROOT.parent / "shared" / "corr2cause" / "test.csv"


@dataclass(frozen=True)
class Measured:
    """One command's wall time, CPU time and peak memory (the largest process of its tree)."""

    command: list[str]
    returncode: int
    wall_s: float
    cpu_s: float
    peak_rss_mb: float
    load_before: tuple[float, float, float]
    load_after: tuple[float, float, float]


def measure(command: Sequence[str], cwd: Path, env: dict[str, str], log: Path) -> Measured:
    """Run ``command`` in ``cwd`` with ``env``, its output into ``log``, and measure it. ``os.wait4`` gives the
    resource use of this child and every descendant it waited for, so each phase is measured on its own
    (``getrusage(RUSAGE_CHILDREN)`` would keep the largest process of every earlier phase)."""
    load_before = os.getloadavg()
    start = time.perf_counter()
    with open(log, "wb") as out:
        process = subprocess.Popen(list(command), cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - start
    process.returncode = os.waitstatus_to_exitcode(status)
    return Measured(list(command), process.returncode, wall, usage.ru_utime + usage.ru_stime,
                    usage.ru_maxrss / 1024, load_before, os.getloadavg())


def corr2cause_csv() -> str | None:
    """The CSV the clone should read: ``$CORR2CAUSE_CSV``, else the workspace copy, else None (the hub)."""
    value = os.environ.get("CORR2CAUSE_CSV")
    if value:
        return str(Path(value).resolve())
    return str(SHARED_CSV) if SHARED_CSV.is_file() else None


def phase_environment(work: Path, keep_pip_cache: bool) -> tuple[dict[str, str], dict[str, str | None]]:
    """The environment of every phase, and the changes it makes to this one (None: unset)."""
    # As from a fresh shell: no model cache or venv of this checkout, and no make above it (a benchmark started
    # from a recipe would hand its job server and level to the phases, whose make then prints its directories).
    changes: dict[str, str | None] = {"CPDAGTHINK_MODEL_CACHE": None, "VIRTUAL_ENV": None, "MAKEFLAGS": None,
                                      "MFLAGS": None, "MAKELEVEL": None}
    if not keep_pip_cache:
        changes["PIP_CACHE_DIR"] = str(work / "pip-cache")
    changes["CORR2CAUSE_CSV"] = corr2cause_csv()
    env = dict(os.environ)
    for name, value in changes.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return env, changes


def parse_arguments(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--phases", nargs="+", choices=PHASES, default=list(PHASES), metavar="PHASE",
                        help=f"the make targets to run, in this order (default: {' '.join(PHASES)})")
    parser.add_argument("--keep-pip-cache", action="store_true",
                        help="use the pip cache as it is (default: a new, empty one in the work folder)")
    parser.add_argument("--source", type=Path, default=ROOT, help="the git checkout to clone (default: this one)")
    parser.add_argument("--work", type=Path, help="an empty folder to work in (default: a new temporary folder)")
    parser.add_argument("--keep", action="store_true", help="keep the work folder (clone, logs, pip cache)")
    parser.add_argument("--json", type=Path, help="also write the measurements to this file")
    parser.add_argument("--dry-run", action="store_true", help="print what would run and run nothing")
    args = parser.parse_args(argv)
    if len(set(args.phases)) != len(args.phases):
        parser.error("--phases: each phase at most once")
    if args.work is not None and args.work.exists() and any(args.work.iterdir()):
        parser.error(f"--work {args.work}: the folder is not empty")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_arguments(argv)
    source = args.source.resolve()
    if args.work is not None:
        work = args.work.resolve()
    elif args.dry_run:
        work = Path(tempfile.gettempdir()) / "two-commands-XXXXXXXX"
    else:
        work = Path(tempfile.mkdtemp(prefix="two-commands-"))
    clone = work / "cpdagthink"
    clone_command = ["git", "clone", "--quiet", "--no-hardlinks", str(source), str(clone)]
    env, changes = phase_environment(work, args.keep_pip_cache)
    if args.dry_run:
        print(f"work folder: {work}")
        print("environment:", ", ".join(f"{k} unset" if v is None else f"{k}={shlex.quote(v)}"
                                        for k, v in changes.items()))
        for command in [clone_command, *(["make", phase] for phase in args.phases)]:
            print("would run:", shlex.join(command))
        return 0
    work.mkdir(parents=True, exist_ok=True)
    subprocess.run(clone_command, check=True)
    head = subprocess.run(["git", "-C", str(clone), "rev-parse", "--short", "HEAD"], check=True,
                          capture_output=True, text=True).stdout.strip()
    print(f"cloned {source} at {head} into {clone}", flush=True)
    results: dict[str, Measured] = {}
    failed = False
    for phase in args.phases:
        log = work / f"{phase}.log"
        print(f"make {phase} ... (log: {log})", flush=True)
        result = results[phase] = measure(["make", phase], clone, env, log)
        print(f"  {result.wall_s:8.1f} s wall  {result.cpu_s:8.1f} s CPU  {result.peak_rss_mb:8.0f} MB peak  "
              f"exit {result.returncode}  load {result.load_before[0]:.2f} -> {result.load_after[0]:.2f}", flush=True)
        if result.returncode != 0:
            print(f"make {phase} failed: see {log}; later phases skipped", flush=True)
            failed = True
            break
    print("\nphase   wall (min)   peak RSS (MB)")
    for phase, result in results.items():
        print(f"{phase:<7} {result.wall_s / 60:10.1f}   {result.peak_rss_mb:13.0f}")
    if args.json:
        args.json.write_text(json.dumps({p: asdict(r) for p, r in results.items()}, indent=1) + "\n")
    if failed or args.keep:
        print(f"work folder kept: {work}")
    else:
        shutil.rmtree(work)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
