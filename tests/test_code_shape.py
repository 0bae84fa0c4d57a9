"""The package's code stays in reading-sized pieces: no function over :data:`MAX_LINES` lines or over
:data:`MAX_COMPLEXITY` in cyclomatic complexity, no module over :data:`MAX_MODULE_LINES` lines unless its
docstring says why its one job needs more.

Complexity is counted from the syntax tree, as McCabe's measure is usually approximated: one, plus one per
``if`` (statement or expression), ``for`` (statement or comprehension), ``while``, ``except``, ``with``,
``match`` case, ``if`` of a comprehension and operator of a boolean expression. A nested function or class is measured on its own and
not again in the function around it; its lines count in both.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Iterator, NamedTuple

import pytest

import cpdagthink

PACKAGE = Path(cpdagthink.__file__).parent
MAX_LINES = 60
MAX_COMPLEXITY = 15
MAX_MODULE_LINES = 500
# What a module over the line limit says in its docstring, with why its one job needs the length.
LONG_MODULE_NOTE = "one job needs"

_BRANCHES = (ast.If, ast.IfExp, ast.For, ast.AsyncFor, ast.While, ast.ExceptHandler, ast.With, ast.AsyncWith,
             ast.match_case)
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


class Shape(NamedTuple):
    name: str  # qualified within its module: ``Class.method``, ``outer.inner``
    lines: int
    complexity: int


def complexity(function: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """One plus the branches of ``function``'s own body (nested functions and classes left out)."""
    count, todo = 1, list(ast.iter_child_nodes(function))
    while todo:
        node = todo.pop()
        if isinstance(node, _SCOPES):
            continue
        if isinstance(node, _BRANCHES):
            count += 1
        elif isinstance(node, ast.BoolOp):
            count += len(node.values) - 1
        elif isinstance(node, ast.comprehension):
            count += 1 + len(node.ifs)
        todo.extend(ast.iter_child_nodes(node))
    return count


def shapes(source: str) -> Iterator[Shape]:
    """Every function of a module's ``source``, nested ones included, with its length and complexity."""

    def visit(node: ast.AST, prefix: str) -> Iterator[Shape]:
        for child in ast.iter_child_nodes(node):
            name = f"{prefix}{getattr(child, 'name', '')}"
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                yield Shape(name, child.end_lineno - child.lineno + 1, complexity(child))
            if isinstance(child, _SCOPES):
                yield from visit(child, f"{name}.")
            else:
                yield from visit(child, prefix)

    yield from visit(ast.parse(source), "")


def test_the_measure_counts_each_kind_of_branch():
    source = '''
def f(xs, y):
    """doc"""
    if y and xs or not y:          # if: 1, two boolean operators: 2
        return [x for x in xs if x if x > 1]   # a comprehension's for and two ifs: 3
    for x in xs:                   # 1
        while x:                   # 1
            x -= 1
    try:
        with open(y) as handle:    # 1
            pass
    except OSError:                # 1
        pass
    match y:
        case 1: pass               # 1
        case _: pass               # 1
    def inner(z):                  # measured on its own
        return z if z else None    # 1 (inner's)
    return 0 if y else 1           # 1
'''
    found = {s.name: s for s in shapes(source)}
    assert found["f"].complexity == 1 + 1 + 2 + 3 + 1 + 1 + 1 + 1 + 2 + 1
    assert found["f.inner"] == Shape("f.inner", 2, 2)
    assert found["f"].lines == 18


def _modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def _name(path: Path) -> str:
    return path.relative_to(PACKAGE).as_posix()


@pytest.mark.parametrize("path", _modules(), ids=_name)
def test_no_function_is_too_long_or_too_branched(path):
    over = [f"{s.name}: {s.lines} lines, complexity {s.complexity}" for s in shapes(path.read_text(encoding="utf-8"))
            if s.lines > MAX_LINES or s.complexity > MAX_COMPLEXITY]
    assert over == [], f"over {MAX_LINES} lines or complexity {MAX_COMPLEXITY}: split them by what each part does"


@pytest.mark.parametrize("path", _modules(), ids=_name)
def test_a_long_module_says_why(path):
    source = path.read_text(encoding="utf-8")
    if len(source.splitlines()) > MAX_MODULE_LINES:
        assert LONG_MODULE_NOTE in (ast.get_docstring(ast.parse(source)) or ""), \
            f"{_name(path)} is over {MAX_MODULE_LINES} lines: split it, or say in its docstring why its one job needs it"
