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
from cpdagthink.run.parameters import coerce_list, coerce_lists, coerce_options, option_pair

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


@pytest.mark.parametrize("value, expected", [
    ({"n_threads": 4}, {"n_threads": 4}),
    (None, {}),
    ("", {}),
    ('{"max_model_len": 32768, "base_url": ["http://a/v1", "http://b/v1"]}',
     {"max_model_len": 32768, "base_url": ["http://a/v1", "http://b/v1"]}),
    ("n_threads=4  base_url=http://a:1/v1 jump_forward=true revision=main", {
        "n_threads": 4, "base_url": "http://a:1/v1", "jump_forward": True, "revision": "main"}),
    (["timeout=5", 'base_url=["http://a/v1"]', "timeout=7"], {"timeout": 7, "base_url": ["http://a/v1"]}),
])
def test_backend_options_become_a_dict(value, expected):
    assert coerce_options(value) == expected


@pytest.mark.parametrize("value, message", [
    ("n_threads", "one word has no '='"), ("{not json", "one word has no '='"), ("4", "one word has no '='"),
    ("max-len=4", "KEY a name"), ([1], "expected a dict, a JSON object or KEY=VALUE words"),
])
def test_backend_options_that_cannot_be_read_are_refused_by_name(value, message):
    with pytest.raises(ValueError, match=f"backend_options: .*{re.escape(message)}"):
        coerce_options(value)


def test_an_option_word_without_a_key_is_refused_without_quoting_it():
    with pytest.raises(ValueError) as raised:
        option_pair("sk-pasted-key-98765")
    assert "98765" not in str(raised.value)


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


def test_backend_options_given_to_papermill_as_text_reach_the_notebooks_setup(tmp_path):
    """papermill's ``-p backend_options '{...}'`` arrives as a string: the chapter reads it as a dict, and its
    setup takes each option to the backend's arguments; an option the backend does not take is refused there,
    with the message of ``cpdagthink run``."""
    from cpdagthink.book import experiments as ex

    options = {"max_concurrency": 3, "base_url": "http://127.0.0.1:9/v1", "timeout": 30}
    for n, notebook in enumerate(sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))):
        out = tmp_path / f"{n}.ipynb"
        result = CliRunner().invoke(papermill_cli, [str(notebook), str(out), "-p", "backend", "openai", "-p", "model",
                                                    "gpt-5.4-mini", "-p", "backend_options", json.dumps(options),
                                                    "--prepare-only"])
        assert result.exit_code == 0, result.output
        namespace = _prepared_namespace(nbformat.read(out, as_version=4))
        assert namespace["backend_options"] == options, notebook.name
        assert ex.setup_from_parameters(namespace).backend_arguments() == {"model": "gpt-5.4-mini", **options}
    with pytest.raises(ValueError, match="backend 'openai' does not take no_such_option; it takes: model, base_url"):
        ex.setup_from_parameters({**namespace, "backend_options": {"no_such_option": 1}})
