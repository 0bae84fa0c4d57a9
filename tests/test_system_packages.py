"""scripts/install-system-packages.sh: only what is missing, in one apt-get call, and nothing when all is there.

The script runs with a PATH of stubs: an `apt-get` that records its arguments and installs nothing, and the
commands a test says are present."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from cpdagthink.paths import PROJECT_ROOT

SCRIPT = PROJECT_ROOT / "scripts" / "install-system-packages.sh"


def _run(tmp_path: Path, *groups: str, present: tuple[str, ...] = ()) -> tuple[subprocess.CompletedProcess, list[str]]:
    stubs = tmp_path / "bin"
    stubs.mkdir()
    calls = tmp_path / "apt-calls"
    (stubs / "apt-get").write_text(f'#!/bin/sh\necho "$*" >> "{calls}"\n')
    (stubs / "sudo").write_text('#!/bin/sh\nexec "$@"\n')
    for name in present:
        (stubs / name).write_text("#!/bin/sh\n")
    for stub in stubs.iterdir():
        stub.chmod(0o755)
    (stubs / "id").symlink_to(shutil.which("id"))
    result = subprocess.run(["/bin/bash", str(SCRIPT), *groups], capture_output=True, text=True,
                            env={"PATH": str(stubs)}, timeout=30)
    return result, calls.read_text().splitlines() if calls.exists() else []


def test_nothing_is_asked_of_apt_when_every_command_is_there(tmp_path):
    result, calls = _run(tmp_path, "book", present=("chromium", "pdftoppm"))
    assert result.returncode == 0, result.stderr
    assert calls == []  # not even `apt-get update`


def test_only_the_missing_packages_are_installed_in_one_call_and_a_failed_install_is_an_error(tmp_path):
    result, calls = _run(tmp_path, "book", present=("pdftoppm",))
    assert calls[0] == "update -qq"
    [install] = [c for c in calls if c.startswith("install")]
    assert install.split()[-2:] == ["chromium", "fonts-dejavu-core"] and "poppler-utils" not in install
    # the stub installed nothing, so the script says what is still missing instead of succeeding
    assert result.returncode == 1 and "still missing after apt-get: chromium fonts-dejavu-core" in result.stderr


def test_an_unknown_group_is_refused_by_name(tmp_path):
    result, calls = _run(tmp_path, "book", "gpu", present=("chromium", "pdftoppm"))
    assert result.returncode == 2 and "unknown group 'gpu' (book, slurm)" in result.stderr
    assert calls == []


def test_a_check_names_what_is_missing_and_installs_nothing(tmp_path):
    result, calls = _run(tmp_path, "--check", "book", present=("chromium",))
    assert result.returncode == 1 and "not installed: poppler-utils" in result.stderr
    assert calls == []
