"""What a run records of where it ran (paper App. J): the code's git revision, the package versions, the
hardware, and the ``metadata.json`` a session starts with (:func:`session_metadata`)."""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import time
from importlib import metadata as importlib_metadata
from pathlib import Path
from typing import Any

from ..backends.base import Backend
from ..causal.instance import Instance
from ..paths import PROJECT_ROOT
from .records import SCHEMA_VERSION, GitRevision, Hardware, RunMetadata, RunRecord, served_models
from .spec import rows_sha256

__all__ = ["git_revision", "session_metadata", "served_models"]

# The frameworks App. J names (torch, transformers, vLLM, llama.cpp) and what this package runs on; read from
# the installed distributions, so no framework is imported just to learn its version.
_PACKAGES = ("cpdagthink", "llama_cpp_python", "outlines", "outlines_core", "openai", "vllm", "torch", "transformers",
             "tokenizers", "huggingface_hub", "networkx", "pydantic")


def git_revision(root: Path = PROJECT_ROOT) -> GitRevision | None:
    """The commit the code at ``root`` is checked out at, and whether tracked files differ from it (untracked
    files do not count, as with ``git describe --dirty``); None outside a git checkout or without git."""

    def git(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, timeout=10)

    try:
        commit, status = git("rev-parse", "HEAD"), git("status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.SubprocessError):
        return None
    if commit.returncode or status.returncode:
        return None
    return GitRevision(commit=commit.stdout.strip(), dirty=bool(status.stdout.strip()))


def _versions() -> dict[str, str]:
    found = {}
    for name in _PACKAGES:
        try:
            found[name] = importlib_metadata.version(name)
        except importlib_metadata.PackageNotFoundError:
            continue
    return found


def _hardware() -> Hardware:
    gpus: list[str] = []
    if shutil.which("nvidia-smi"):
        try:
            listed = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                                    text=True, timeout=10).stdout
            gpus = [line.strip() for line in listed.splitlines() if line.strip()]
        except (OSError, subprocess.SubprocessError):
            pass  # a driver that does not answer: recorded as no GPU seen
    cpu = platform.processor() or None
    try:
        cpu = next((line.partition(":")[2].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                    if line.startswith("model name")), cpu)
    except OSError:
        pass  # not Linux: platform.processor() stands
    return Hardware(gpus=gpus, cpu=cpu, cpu_cores=os.cpu_count())


def session_metadata(run: dict[str, Any], backend: Backend, instances: list[Instance], done: list[RunRecord],
                     started: float) -> RunMetadata:
    """The ``metadata.json`` a session starts with: the run's identity, what computes it, and its provenance."""
    provenance = backend.provenance()
    return RunMetadata(
        record_schema=SCHEMA_VERSION,
        run=run,
        backend=backend.identity(),
        thinking_supported=backend.thinking_supported,
        instances=len(instances),
        instances_sha256=rows_sha256(instances),
        sources=sorted({i.source for i in instances}),
        seed=run["decoding"]["seed"],
        model_revision=provenance.model_revision,
        tokenizer_revision=provenance.tokenizer_revision,
        model_package=provenance.model_package,
        api=provenance.api,
        served_models=served_models(done),
        served_weights=provenance.served_weights,
        git=git_revision(),
        packages=_versions(),
        python=platform.python_version(),
        hardware=_hardware(),
        started_at=time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(started)),
    )
