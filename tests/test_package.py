"""The package itself: its version read from the installed metadata, and the ``py.typed`` marker it ships."""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.resources
import tomllib
from pathlib import Path

import cpdagthink

PYPROJECT = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())


def test_version_is_the_installed_distributions():
    assert cpdagthink.__version__ == importlib.metadata.version("cpdagthink") == PYPROJECT["project"]["version"]


def test_a_source_tree_pip_has_not_installed_has_a_version_too(monkeypatch):
    def missing(name: str) -> str:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", missing)
    try:
        assert importlib.reload(cpdagthink).__version__ == "0+unknown"
    finally:
        monkeypatch.undo()
        importlib.reload(cpdagthink)
    assert cpdagthink.__version__ == PYPROJECT["project"]["version"]


def test_the_typed_marker_pyproject_declares_is_in_the_package():
    declared = PYPROJECT["tool"]["setuptools"]["package-data"]["cpdagthink"]
    assert "py.typed" in declared
    assert all((importlib.resources.files("cpdagthink") / name).is_file() for name in declared)
