"""The package as a wheel: ``pip install .`` (not editable) gives a working ``cpdagthink`` that needs no checkout,
its prompts, graph structures and the paper's reported figures shipped as package data."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from cpdagthink.method.prompts import file_hash, raw
from cpdagthink.paths import GRAPHS, PAPER_REPORTED, PROMPTS

ROOT = Path(__file__).parents[1]


def _build_wheel(tmp_path: Path) -> Path:
    """The wheel of a copy of the checkout (what ``pip install .`` builds), offline: no index, and the build
    backend this environment already has (``--no-build-isolation``). The copy keeps the build's own files
    (``build/``, the egg-info) out of the checkout."""
    source = tmp_path / "source"
    shutil.copytree(ROOT / "lib", source / "lib", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, source / name)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-index", "--no-build-isolation",
                    "--wheel-dir", str(tmp_path / "wheels"), str(source)], check=True, capture_output=True)
    (wheel,) = (tmp_path / "wheels").glob("cpdagthink-*.whl")
    return wheel


def _fresh_environment(tmp_path: Path, wheel: Path) -> Path:
    """A new venv with the wheel installed in it, which sees this environment's packages as its dependencies
    but not this checkout. A ``.pth`` file in the new venv puts this environment's site-packages on its path;
    the ``.pth`` files found there (the editable install of the checkout among them) are not read, as Python
    reads only those of its own site directories. Returns the venv's ``bin`` folder."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               check=True, capture_output=True, text=True).stdout.strip())
    ours = dict.fromkeys(sysconfig.get_paths()[key] for key in ("purelib", "platlib"))
    (site / "dependencies.pth").write_text("".join(f"{path}\n" for path in ours))
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-index",
                    str(wheel)], check=True, capture_output=True)
    return venv / "bin"


@pytest.mark.slow
def test_the_installed_wheel_runs_from_another_folder_without_the_checkout(test_csv, tmp_path):
    wheel = _build_wheel(tmp_path)
    shipped = set(zipfile.ZipFile(wheel).namelist())
    for folder, pattern in ((PROMPTS, "*.md"), (GRAPHS, "*.edges")):
        files = sorted(Path(str(folder)).glob(pattern))
        assert files and {f"cpdagthink/{f.relative_to(ROOT / 'lib' / 'cpdagthink')}" for f in files} <= shipped
    assert "cpdagthink/data/paper_reported.csv" in shipped

    bin_dir = _fresh_environment(tmp_path, wheel)
    elsewhere, home = tmp_path / "elsewhere", tmp_path / "home"
    elsewhere.mkdir()
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(home), "HF_HUB_OFFLINE": "1",
           **{k: os.environ[k] for k in ("LANG", "TMPDIR") if k in os.environ}}

    def cpdagthink(*args: str) -> str:
        done = subprocess.run([str(bin_dir / "cpdagthink"), *args], cwd=elsewhere, env=env, capture_output=True,
                              text=True, timeout=600)
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    where = subprocess.run([str(bin_dir / "python"), "-c", "import cpdagthink; print(cpdagthink.__file__)"],
                           cwd=elsewhere, env=env, check=True, capture_output=True, text=True).stdout
    assert Path(where).resolve().is_relative_to(bin_dir.parent), where  # the wheel's copy, not the checkout's

    request = json.loads(cpdagthink("prompt", "--condition", "structured", "--row", "0", "--data", str(test_csv)))
    assert raw("pc_scaffold").splitlines()[0] in json.dumps(request, ensure_ascii=False)

    cpdagthink("run", "--condition", "structured", "--backend", "reference", "--limit", "2", "--data", str(test_csv))
    (run,) = (home / ".cache" / "cpdagthink" / "runs").iterdir()  # outside a checkout: the user's cache
    records = [json.loads(line) for line in (run / "records.jsonl").read_text().splitlines()]
    assert len(records) == 2
    for record in records:  # the packaged prompts are the checkout's, byte for byte
        assert record["prompt_sha256"] and all(file_hash(n) == h for n, h in record["prompt_sha256"].items())

    generated = elsewhere / "asia8.csv"
    cpdagthink("generate", "--family", "asia8", "--seed", "0", "--per-graph", "4", "--out", str(generated))
    assert "ASIA" in generated.read_text()
    figures = subprocess.run([str(bin_dir / "python"), "-c", "from cpdagthink.analysis import tables; "
                              "print(len(tables.paper()))"], cwd=elsewhere, env=env, check=True, capture_output=True,
                             text=True).stdout
    assert int(figures) == len(PAPER_REPORTED.read_text(encoding="utf-8").splitlines()) - 1
