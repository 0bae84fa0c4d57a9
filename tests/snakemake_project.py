"""A copy of the project to run Snakemake in, and what the workflow tests read back from it (the plan, the
records, the cache), shared by the Snakemake tests on the simulated cluster (test_workflow.py) and on a real
SLURM (test_slurm.py, test_slurm_limits.py, slurm_cluster.py)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cpdagthink.method.chat import Completion
from cpdagthink.paths import PROJECT_ROOT

PROJECT_PARTS = ("lib", "notebooks", "prompts", "data/graphs", "data/paper_reported.csv", "workflow", "book/intro.md",
                 "book/paper_figures.md", "book/using", "benchmarks/README.md",
                 "benchmarks/notes", "_static", "_config.yml", "_toc.yml")


@pytest.fixture
def project(tmp_path, test_csv, monkeypatch) -> Path:
    """A copy of the project to run Snakemake in, with its own outputs/; returns its root."""
    pytest.importorskip("snakemake", reason="the workflow extra (make setup installs it)")
    root = tmp_path / "project"
    for part in PROJECT_PARTS:
        (root / part).parent.mkdir(parents=True, exist_ok=True)
        if (PROJECT_ROOT / part).is_dir():
            shutil.copytree(PROJECT_ROOT / part, root / part, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        else:
            shutil.copy(PROJECT_ROOT / part, root / part)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(root / "lib"), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv("CPDAGTHINK_OUTPUTS", str(root / "outputs"))
    monkeypatch.setenv("CORR2CAUSE_CSV", str(test_csv))
    monkeypatch.delenv("CPDAGTHINK_CLUSTER_DIR", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    return root


def snakemake(root: Path, profile: str, *arguments: str) -> list[str]:
    return [sys.executable, "-m", "snakemake", "--profile", f"workflow/profiles/{profile}", *arguments]


def run_snakemake(root: Path, command: list[str], log: Path, timeout: float = 900) -> subprocess.CompletedProcess:
    with log.open("ab") as sink:
        return subprocess.run(command, cwd=root, stdout=sink, stderr=subprocess.STDOUT, timeout=timeout)


def records_of(folder: Path) -> list[dict]:
    return [json.loads(line) for line in (folder / "records.jsonl").read_text().splitlines() if line.strip()]


def plan_of(root: Path, config: list[str]) -> list[dict]:
    """What `cpdagthink plan` lists for the same parameters (run in the copy)."""
    only = [e.partition("=")[2].strip("[]") for e in config if e.startswith("only=")]
    words = [w for entry in config if not entry.startswith("only=") for w in ("-p", entry)]
    out = subprocess.run([sys.executable, "-m", "cpdagthink", "plan", *(["--only", *only] if only else []), *words],
                         cwd=root, capture_output=True, text=True, check=True).stdout
    return json.loads(out)


def one_group_execution(root: Path, base_url: str) -> tuple[list[str], list[str]]:
    """The configuration of chapter 01's structured runs (12 rows, the OpenAI backend at ``base_url``; one group)
    and the `cpdagthink plan` words that execute that group."""
    config = ["backend=openai", "model=gpt-5.4-mini", f"backend_options=reasoning_effort=low base_url={base_url}",
              "limit=12", "only=[01]", "conditions=[\"structured\"]", "include_reference=false"]
    plan = plan_of(root, config)
    (group,) = {r["group"] for r in plan}
    return config, ["--only", "01", *[w for e in config if not e.startswith("only=") for w in ("-p", e)],
                  "--group", group, "--execute"]


def assert_every_instance_once(plan: list[dict]) -> None:
    for run in plan:
        folder = Path(run["folder"])
        ids = [r["id"] for r in records_of(folder)]
        assert len(ids) == len(set(ids)) == run["instances"]["count"], f"{folder.name}: a record missing or twice"
        assert run["complete"]  # a record of every planned row (id and content), the session finished


def assert_cache_intact(cache: Path) -> int:
    """Every entry reads back as a completion, none was set aside, no temporary file is left; returns the count."""
    entries = list(cache.rglob("*.json"))
    for entry in entries:
        Completion(**json.loads(entry.read_text()))
    assert not [p for p in cache.rglob("*") if p.is_file() and p.suffix != ".json"]
    return len(entries)


def wait_for(condition, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)
