"""The docstring examples of the public core a researcher calls first: the oracle's labels
(:func:`~cpdagthink.causal.oracle.label_text`), a graph's answer (``CausalAnalysis.answer``) and the
schema-derived regex (:func:`~cpdagthink.method.schema.analysis_regex`). Each module's examples run as one
test, which fails with every example whose output differs."""

from __future__ import annotations

import doctest
from types import ModuleType

import pytest

from cpdagthink.causal import oracle
from cpdagthink.method import schema

DOCUMENTED = {oracle: ("label_text",), schema: ("CausalAnalysis.answer", "analysis_regex")}


@pytest.mark.parametrize("module", DOCUMENTED, ids=lambda m: m.__name__)
def test_the_examples_run_as_written(module: ModuleType):
    found = {test.name.removeprefix(f"{module.__name__}."): test
             for test in doctest.DocTestFinder().find(module) if test.examples}
    missing = set(DOCUMENTED[module]) - set(found)
    assert not missing, f"no examples in {sorted(missing)}"
    runner, report = doctest.DocTestRunner(), []
    failed = sum(runner.run(test, out=report.append).failed for test in found.values())
    assert failed == 0, "".join(report)
