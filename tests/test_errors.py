"""One error root: every error class the package defines derives from ``CpdagthinkError`` and keeps its
built-in base, and the CLI reports any of them as a clear error with exit status 2."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

import cpdagthink
from cpdagthink import cli
from cpdagthink.backends.base import BackendError, RequestRejected
from cpdagthink.causal.oracle import UnfaithfulFactsError
from cpdagthink.causal.premise import ContradictoryFactsError, PremiseError, UnknownVariableError, UnparsableSentenceError
from cpdagthink.errors import CpdagthinkError
from cpdagthink.method.prompts import PromptError
from cpdagthink.run.data import DataError
from cpdagthink.run.runner import RunMismatchError


def project_exceptions() -> list[type[BaseException]]:
    """Every exception class defined in a module of the package (each module imported but ``__main__``,
    which would run the CLI); warnings are not errors and keep their own root."""
    found = []
    for info in pkgutil.walk_packages(cpdagthink.__path__, prefix="cpdagthink."):
        if info.name.endswith("__main__"):
            continue
        module = importlib.import_module(info.name)
        found += [c for _, c in inspect.getmembers(module, inspect.isclass)
                  if issubclass(c, BaseException) and not issubclass(c, Warning) and c.__module__ == module.__name__]
    return found


def test_every_error_the_package_defines_has_the_one_root():
    classes = project_exceptions()
    assert {DataError, BackendError, RequestRejected, PremiseError, UnfaithfulFactsError, PromptError,
            RunMismatchError} <= set(classes)
    # a signal turned into an exception (SIGTERM as Ctrl-C) is not an error: it stays a KeyboardInterrupt
    assert [c.__name__ for c in classes if not issubclass(c, (CpdagthinkError, KeyboardInterrupt))] == []


@pytest.mark.parametrize("error, builtin", [
    (DataError, RuntimeError), (BackendError, RuntimeError), (RequestRejected, BackendError),
    (PremiseError, ValueError), (UnknownVariableError, PremiseError), (UnparsableSentenceError, PremiseError),
    (ContradictoryFactsError, PremiseError), (UnfaithfulFactsError, ValueError), (RunMismatchError, ValueError),
    (PromptError, KeyError),
], ids=lambda c: c.__name__)
def test_each_error_keeps_the_base_existing_except_clauses_catch(error, builtin):
    assert issubclass(error, CpdagthinkError) and issubclass(error, builtin)


def test_a_prompt_error_keeps_its_key_error_message():
    assert str(PromptError("turn2.txt")) == "'turn2.txt'"


@pytest.mark.parametrize("raised", [PromptError("no prompt file turn9.txt"), RequestRejected("too long"),
                                    ValueError("--limit must be positive")], ids=lambda e: type(e).__name__)
def test_the_cli_reports_a_project_error_or_bad_argument_once(raised, monkeypatch, capsys):
    def failing(args):
        raise raised

    monkeypatch.setattr(cli, "cmd_schema", failing)
    assert cli.main(["schema", "--variables", "A,B"]) == 2
    assert capsys.readouterr().err == f"cpdagthink schema: error: {raised}\n"


def test_the_cli_does_not_hide_a_bug(monkeypatch):
    def failing(args):
        raise TypeError("a bug")

    monkeypatch.setattr(cli, "cmd_schema", failing)
    with pytest.raises(TypeError):
        cli.main(["schema", "--variables", "A,B"])
