"""benchmarks/two_commands.py: its arguments, the dry run, the per-phase measurement, and the whole flow on a
small git repository whose Makefile stands in for the project's (the real phases take about 40 minutes)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from cpdagthink.paths import PROJECT_ROOT

spec = importlib.util.spec_from_file_location("two_commands", PROJECT_ROOT / "benchmarks" / "two_commands.py")
two_commands = sys.modules["two_commands"] = importlib.util.module_from_spec(spec)  # dataclasses look it up
spec.loader.exec_module(two_commands)


def test_a_dry_run_prints_the_clone_and_each_phase_and_creates_nothing(tmp_path, capsys):
    work = tmp_path / "work"
    assert two_commands.main(["--dry-run", "--work", str(work), "--phases", "setup", "test"]) == 0
    out = capsys.readouterr().out
    assert f"would run: git clone --quiet --no-hardlinks {PROJECT_ROOT} {work / 'cpdagthink'}" in out
    assert "would run: make setup\nwould run: make test\n" in out and "make book" not in out
    assert f"PIP_CACHE_DIR={work / 'pip-cache'}" in out and "CPDAGTHINK_MODEL_CACHE unset" in out
    assert not work.exists()
    two_commands.main(["--dry-run", "--work", str(work), "--keep-pip-cache"])
    assert "PIP_CACHE_DIR" not in capsys.readouterr().out


@pytest.mark.parametrize("argv, message", [
    (["--phases", "tests"], "invalid choice: 'tests'"),
    (["--phases", "test", "test"], "each phase at most once"),
])
def test_bad_arguments_are_refused_naming_the_problem(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_:
        two_commands.main(["--dry-run", *argv])
    assert exit_.value.code == 2 and message in capsys.readouterr().err


def test_a_work_folder_that_is_not_empty_is_refused(tmp_path, capsys):
    (tmp_path / "something").touch()
    with pytest.raises(SystemExit):
        two_commands.main(["--dry-run", "--work", str(tmp_path)])
    assert "is not empty" in capsys.readouterr().err


def test_each_measurement_counts_only_its_own_process_tree(tmp_path):
    """A 500 MB child first, then a small one: the second peak is the small child's, not the largest so far.
    A child starts as a copy of the measuring process, so its peak is at least that process's size at the fork:
    the two are measured from a fresh interpreter (as the benchmark runs), not from this test process, which may
    be large (a pytest-xdist worker that has loaded models)."""
    allocate = "import time; b = bytearray(500 * 2**20); b[::4096] = b'x' * len(b[::4096]); time.sleep(0.2)"
    big_command = ["sh", "-c", f'{sys.executable} -c "{allocate}"']
    script = f"""
import dataclasses, importlib.util, json, sys
from pathlib import Path
spec = importlib.util.spec_from_file_location("two_commands", {str(PROJECT_ROOT / "benchmarks" / "two_commands.py")!r})
module = sys.modules["two_commands"] = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
work = Path({str(tmp_path)!r})
big = module.measure({big_command!r}, work, {{}}, work / "big.log")
small = module.measure([sys.executable, "-c", "print('hello')"], work, {{}}, work / "small.log")
print(json.dumps([dataclasses.asdict(big), dataclasses.asdict(small)]))
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=120)
    big, small = (two_commands.Measured(**{k: tuple(v) if k.startswith("load") else v for k, v in m.items()})
                  for m in json.loads(out.stdout))
    assert big.returncode == small.returncode == 0, (tmp_path / "big.log").read_text()
    assert big.peak_rss_mb > 500 and small.peak_rss_mb < big.peak_rss_mb - 250, (big, small)
    assert big.wall_s >= 0.2 and big.cpu_s > 0, big
    assert (tmp_path / "small.log").read_text() == "hello\n"


@pytest.fixture
def stand_in(tmp_path) -> Path:
    """A git repository whose `make setup/test/book` write where they ran and which pip cache they saw."""
    repo = tmp_path / "repo"
    repo.mkdir()
    recipe = "\t@echo \"$@ in $$(pwd) cache=$$PIP_CACHE_DIR\"\n"
    (repo / "Makefile").write_text(f"setup:\n{recipe}test:\n{recipe}\t@exit 3\nbook:\n{recipe}")
    for command in (["init", "-q"], ["add", "Makefile"], ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "m"]):
        subprocess.run(["git", "-C", str(repo), *command], check=True)
    return repo


def test_the_phases_run_in_a_fresh_clone_and_a_failure_stops_the_rest(stand_in, tmp_path, capsys):
    work = tmp_path / "work"
    assert two_commands.main(["--source", str(stand_in), "--work", str(work), "--json", str(tmp_path / "m.json")]) == 1
    out = capsys.readouterr().out
    clone = work / "cpdagthink"
    assert (work / "setup.log").read_text() == f"setup in {clone} cache={work / 'pip-cache'}\n"
    assert "make test failed" in out and "exit 2" in out and not (work / "book.log").exists()
    assert f"work folder kept: {work}" in out
    import json

    measured = json.loads((tmp_path / "m.json").read_text())
    assert list(measured) == ["setup", "test"] and measured["test"]["returncode"] == 2


def test_a_run_that_succeeds_removes_its_work_folder(stand_in, tmp_path, capsys):
    work = tmp_path / "work"
    assert two_commands.main(["--source", str(stand_in), "--work", str(work), "--phases", "book", "setup"]) == 0
    out = capsys.readouterr().out
    assert out.index("make book") < out.index("make setup") and not work.exists()
