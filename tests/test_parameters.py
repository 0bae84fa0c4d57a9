"""Notebook parameters: list values given on papermill's command line, and parameter cells papermill reads whole.

Every papermill command of the book's page "Re-running the chapters" is prepared (``--prepare-only``: parameters
injected, nothing executed) by papermill's own command line, then the notebook's cells up to the list coercion are
run in-process.
"""

from __future__ import annotations

import json
import logging
import re
import shlex

import nbformat
import papermill
import pytest
from click.testing import CliRunner
from papermill.cli import papermill as papermill_cli

from cpdagthink.book.chapters import NOTEBOOKS, notebook_parameters
from cpdagthink.paths import PROJECT_ROOT
from cpdagthink.run.parameters import coerce_list, coerce_lists

# The papermill commands of the book's page "Re-running the chapters".
DOCUMENTED_COMMANDS = [line.strip() for line in (PROJECT_ROOT / "book" / "using" / "rerunning.md").read_text(
    encoding="utf-8").splitlines() if line.strip().startswith("papermill ")]


@pytest.mark.parametrize("value, expected", [
    ('["scramble_full", "swap_valid_cpdag"]', ["scramble_full", "swap_valid_cpdag"]),
    (" [5, 6] ", [5, 6]),
    ("['alarm7', 'asia8',]", ["alarm7", "asia8"]),
    ("[]", []),
    ("alarm7", ["alarm7"]),
    (1, [1]),
    ((0, 1), [0, 1]),
    ([0, 1], [0, 1]),
    (None, None),
])
def test_a_list_parameter_becomes_a_list(value, expected):
    assert coerce_list(value) == expected


@pytest.mark.parametrize("value", ['["unclosed"', "[1, 2] + [3]", '[{"a": 1}'])
def test_a_broken_list_is_refused_by_name(value):
    with pytest.raises(ValueError, match=r"probes: .* is not a list; write it as JSON"):
        coerce_lists(seeds=[0], probes=value)


def test_every_notebook_parameter_is_visible_to_papermill(caplog):
    """papermill's own parser must see every name the cell assigns (a '=' in a comment hides a line)."""
    for notebook in sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb")):
        with caplog.at_level(logging.WARNING, logger="papermill"):
            seen = set(papermill.inspect_notebook(str(notebook)))
        assert seen == notebook_parameters(notebook), notebook.name
    assert not [r.getMessage() for r in caplog.records], "papermill could not parse a parameter line"


def test_the_book_documents_papermill_commands():
    assert len(DOCUMENTED_COMMANDS) >= 4 and any("'[" in command for command in DOCUMENTED_COMMANDS)


def _prepared_namespace(notebook: nbformat.NotebookNode) -> dict:
    """Run the prepared notebook's cells up to the list coercion: what the rest of the notebook sees."""
    namespace: dict = {}
    for cell in notebook.cells:
        if cell.cell_type == "code":
            exec(cell.source, namespace)
            if cell.get("id") == "coerce-lists":
                return namespace
    raise AssertionError("the notebook has no 'coerce-lists' cell")


@pytest.mark.parametrize("command", DOCUMENTED_COMMANDS)
def test_each_documented_papermill_command_works_as_written(command, tmp_path, caplog):
    args = shlex.split(command)[1:]
    given = {name: value for flag, name, value in zip(args, args[1:], args[2:]) if flag == "-p"}
    args[1] = str(tmp_path / "out.ipynb")
    with caplog.at_level(logging.INFO, logger="papermill"):
        result = CliRunner().invoke(papermill_cli, [str(PROJECT_ROOT / args[0]), *args[1:], "--prepare-only"])
    assert result.exit_code == 0, result.output
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert not warnings, warnings  # e.g. "Passed unknown parameter: limit"
    namespace = _prepared_namespace(nbformat.read(tmp_path / "out.ipynb", as_version=4))
    for name, text in given.items():
        if text.startswith("["):
            assert namespace[name] == json.loads(text), name
        else:
            assert str(namespace[name]) == text, name
    list_defaults = {n for n, v in papermill.inspect_notebook(str(PROJECT_ROOT / args[0])).items()
                     if re.fullmatch(r"\[.*\]", v["default"])}
    assert list_defaults and all(isinstance(namespace[n], list) for n in list_defaults)
