"""Shared fixtures: the real Corr2Cause test split, pointed to (never copied into the project).

Tests that need the split never skip quietly: without a local copy they use the hub download at the pinned
revision; if that fails too, they fail under CI (``CI=true``) and skip elsewhere, saying why. The session
header names the file in use.
"""

from __future__ import annotations

import _thread
import os
import shutil
import signal
import subprocess
import tempfile
import threading
from pathlib import Path
from typing import Any

import pytest

from cpdagthink.run import data
from cpdagthink.run.config import RunConfig

# Threads that wait at llama.cpp's barriers sleep instead of spinning, in this process and every process it starts
# (servers, Snakemake and SLURM jobs, kernels). Two test workers each running llama.cpp's two OpenMP threads
# on two cores otherwise spin against each other: the local pipeline's fixture took 631 s beside another copy
# of itself and 91 s alone; with passive waits, 166 s beside it and 114 s alone (2026-12-02). The computation
# and its results are the same: only how an idle thread waits changes.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def local_test_csv() -> Path | None:
    """The local copy the commands use (:func:`data.local_test_csv`); None when there is none or it is absent."""
    found = data.local_test_csv()
    return Path(found) if found and Path(found).is_file() else None


def committed_checkout(root: Path, file: str) -> str:
    """A new git checkout at ``root`` with ``file`` (``x = 1``) committed; returns the commit."""
    git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    (root / file).write_text("x = 1\n")
    subprocess.run([*git, "add", file], check=True)
    subprocess.run([*git, "commit", "-qm", "one"], check=True)
    return subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()


def configured(condition: str = "structured", *, cache_dir: str | Path, **changes: Any) -> RunConfig:
    """The config of one test run, for :func:`cpdagthink.run.runner.run_config`: ``condition`` with the call
    cache at ``cache_dir`` and ``changes`` (any :class:`RunConfig` field: ``decoding``, ``chunk_size``, ``probe``,
    ``backend``, ``model``; a folder as a path). Its spec names the reference backend unless ``changes`` name
    another; what computes the run is the backend the test hands to ``run_config`` (``metadata.json`` records
    its identity beside the run's)."""
    folders = {k: str(v) for k, v in changes.items() if k == "out_root"}
    return RunConfig(**{"backend": "reference", **changes, **folders}, condition=condition, cache_dir=str(cache_dir))


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("true", "1", "yes")


def locate_test_split() -> Path:
    """The test split's CSV: the local copy, else the hub's at the pinned revision; when neither can be had,
    a failure under CI and a skip (with the reason) elsewhere."""
    local = local_test_csv()
    if local is not None:
        return local
    try:
        return data.download_split("test")
    except data.DataError as error:
        message = f"the Corr2Cause test split is neither local (${data.ENV_CSV}, {data.WORKSPACE_CSV}) nor downloadable: {error}"
        if in_ci():
            pytest.fail(message, pytrace=False)
        pytest.skip(message)


# The modules that take minutes (a local model, Snakemake, SLURM), longest first as `--durations` measured them
# on 2026-12-02. `make test` hands whole modules to its workers in collection order (--dist loadscope
# --no-loadscope-reorder), so these start at once, beside each other, instead of after every quick module, and
# the suite does not end on one of them running alone. The two SLURM modules mostly wait on the scheduler: their
# workers leave the cores to the others.
LONGEST_FIRST = ("test_slurm_limits.py", "test_slurm.py", "test_jump_forward.py", "test_workflow.py",
                 "test_pipeline_local.py", "test_book.py", "test_backends_openai.py", "test_backends_local.py",
                 "test_plan.py", "test_cli.py", "test_oracle.py", "test_hostile_book.py", "test_explorer.py")
# A folder every process of the session sees: the controller makes it before its workers start (they inherit
# the environment) and removes it at the end. What workers coordinate through, such as the SLURM cluster.
SHARED_ENV = "CPDAGTHINK_TEST_SHARED"


def _controller(config) -> bool:
    """Whether this process is the session's controller (pytest-xdist's, or the only process), not a worker."""
    return not hasattr(config, "workerinput")


def pytest_configure(config) -> None:
    if _controller(config):
        os.environ[SHARED_ENV] = tempfile.mkdtemp(prefix="cpdagthink-tests-")


def pytest_unconfigure(config) -> None:
    shared = os.environ.get(SHARED_ENV)
    if _controller(config) and shared:
        import slurm_cluster

        slurm_cluster.stop_if_started(Path(shared))  # every worker has ended
        shutil.rmtree(shared, ignore_errors=True)
        del os.environ[SHARED_ENV]


def pytest_collection_modifyitems(config, items) -> None:
    rank = {name: place for place, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # a stable sort: the rest keep their order


def pytest_report_header(config) -> str:
    local = local_test_csv()
    where = str(local) if local else f"hub {data.HUB_REPO}@{data.HUB_REVISION[:8]} (downloaded on first use)"
    return f"corr2cause test split: {where}"


@pytest.fixture(scope="session")
def test_csv() -> Path:
    return locate_test_split()


@pytest.fixture(scope="session")
def slurm(pytestconfig) -> None:
    """The single-node SLURM, running: started once for the session by whichever worker needs it first."""
    import slurm_cluster

    slurm_cluster.require_cluster(pytestconfig, in_ci())


@pytest.fixture
def browser():
    """A headless Chromium page (:class:`cpdagthink.book.browser.Browser`). Skipped when Chromium is absent,
    except under CI, where a missing browser is a failure: `make test` installs it
    (scripts/install-system-packages.sh)."""
    from cpdagthink.book.browser import Browser, find_chromium

    if find_chromium() is None:
        message = "Chromium is absent: run scripts/install-system-packages.sh book"
        if in_ci():
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    with Browser(width=1200, height=900) as page:
        yield page


@pytest.fixture
def make_argv(tmp_path):
    """Run ``make TARGET`` with the venv's ``command`` replaced by a stub that records the argv it receives
    (no install: the stamp is newer than pyproject.toml); returns that argv and make's output. Fails if make or
    the shell ran any value (a file ``pwned*`` appeared)."""
    import subprocess

    from cpdagthink.paths import PROJECT_ROOT

    def run(target: str, command: str, values: dict[str, str]) -> tuple[list[str], str]:
        stub = tmp_path / command
        stub.write_text("#!/bin/sh\nprintf '%s\\n' \"$@\" > \"$0.argv\"\n")
        stub.chmod(0o755)
        stamp = tmp_path / "installed"
        stamp.touch()
        result = subprocess.run(["make", "-s", "-C", str(PROJECT_ROOT), "-o", "system-packages", target, f"STAMP={stamp}",
                                 f"BIN={tmp_path}", *(f"{k}={v}" for k, v in values.items())],
                                cwd=tmp_path, capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, result.stderr
        assert not list(tmp_path.glob("pwned*")) and not list(PROJECT_ROOT.glob("pwned*"))
        return (tmp_path / f"{command}.argv").read_text().splitlines(), result.stdout + result.stderr

    return run


@pytest.fixture
def ctrl_c():
    """``_thread.interrupt_main`` after 0.5 s: a Ctrl-C as a terminal sends it. Python turns SIGINT into
    KeyboardInterrupt only where it was not ignored when the process started (a job started in the background
    by a shell without job control inherits it ignored, and interrupt_main then does nothing): the test
    restores Python's handler for its duration."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    timer = threading.Timer(0.5, _thread.interrupt_main)
    yield timer
    timer.cancel()
    signal.signal(signal.SIGINT, previous)


@pytest.fixture(scope="module")
def smol():
    """SmolLM2-135M on llama.cpp (the tests' fast model), loaded once per module that asks for it."""
    from cpdagthink.backends import make_backend

    backend = make_backend("local", model="smollm2-135m", n_ctx=2048)
    yield backend
    backend.close()
