"""Where the project's files are: the package's own files through importlib.resources, the checkout's links to
them, and where outputs go (outside a checkout: ``tests/test_wheel.py``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from cpdagthink import paths

ROOT = Path(__file__).parents[1]


def test_the_checkout_links_to_the_files_the_package_ships():
    assert paths.IN_CHECKOUT and paths.PROJECT_ROOT == ROOT.resolve()
    for link, shipped in (("prompts", paths.PROMPTS), ("data/graphs", paths.GRAPHS),
                          ("data/paper_reported.csv", paths.PAPER_REPORTED)):
        assert (ROOT / link).is_symlink() and (ROOT / link).resolve() == Path(str(shipped)), link
    assert paths.PROMPTS.joinpath("pc_scaffold.md").read_text(encoding="utf-8").strip()
    assert paths.GRAPHS.joinpath("asia.edges").is_file()


def test_outputs_are_the_checkouts_unless_the_variable_moves_them(tmp_path):
    def outputs(**env: str) -> str:
        environment = {k: v for k, v in os.environ.items() if k != paths.ENV_OUTPUTS} | env
        return subprocess.run([sys.executable, "-c", "from cpdagthink.paths import OUTPUTS_ROOT; print(OUTPUTS_ROOT)"],
                              cwd=tmp_path, env=environment, check=True, capture_output=True, text=True).stdout.strip()

    assert outputs() == str(paths.PROJECT_ROOT / "outputs")  # wherever the command is run from
    assert outputs(**{paths.ENV_OUTPUTS: str(tmp_path / "elsewhere")}) == str(tmp_path / "elsewhere")
