"""The package's layers: every import runs to the module's own layer or one below it, never up.

``LAYERS`` is the folder table of book/using/architecture.md ("How it fits together"), bottom first. A module
may import from its own layer and from every layer listed before it; as each layer is one folder (or the
package's top, for the few modules every layer uses and the command line over all of them), no two folders
can import each other.
Imports inside functions count too: a lazy import is still a dependency. A module must sit in the folder
of its row, every relative import must name a module of the package, and no chain of imports may lead back to
the module it starts from (within a layer too).
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import NamedTuple, Sequence

import pytest

import cpdagthink

PACKAGE = Path(cpdagthink.__file__).parent


# The backend families with several files, each a folder of backends/ whose __init__ exports its backend class.
FAMILIES = ("local", "openai_api")


class Layer(NamedTuple):
    folder: str  # "" for the package's top level
    modules: tuple[str, ...]


LAYERS = (
    Layer("", ("errors", "paths", "files", "credentials")),  # what every layer uses; imports nothing of the package
    Layer("causal", ("premise", "dag", "oracle", "instance")),
    Layer("method", ("chat", "budgets", "decoding", "schema", "validate", "design", "field_names", "prompts", "conditions",
                     "interventions")),
    Layer("backends", ("base", "profiles", "toolcalls", "transport", "vllm_offline", "reference",
                       *FAMILIES, "backend",  # each family folder holds its own backend module
                       "models", "jump_forward", "chat_template", "regex_indexes", "state_store", "kept_states", "core_share",
                       "llama_loading",  # local/
                       "endpoints", "payloads", "responses", "served", "batch_state", "batches", "run_batch", "wire")),  # openai_api/
    Layer("run", ("parameters", "data", "generate", "spec", "config", "records", "runfolder", "resumable", "provenance", "cache", "repair",
                  "streaming", "budget", "gathering", "runner", "together", "inspection", "estimate")),
    Layer("analysis", ("metrics", "markup", "audit", "failures", "probes", "tables", "factorial")),
    Layer("book", ("chapters", "presentation", "figures", "readings", "glue", "verdicts", "results", "bins", "removals",
                   "probing", "graph_audit", "gallery", "experiments", "components", "carriers", "plan", "cost", "explorer", "failure_views", "browser",
                   "site", "build_record", "chapter_state", "intro", "build", "recipes", "reproduce", "reproduce_page", "progress")),
    Layer("", ("cli", "__main__", "workflow", "scheduler")),  # the command line and the Snakemake workflow's entry, over everything
)
RANK = {module: rank for rank, layer in enumerate(LAYERS) for module in layer.modules}


def _modules() -> dict[str, Path]:
    """Every module of the package by dotted name below it (``causal.oracle``; a folder's ``__init__`` by the
    folder's name), the package's own ``__init__`` left out (it imports nothing)."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if parts:
            found[".".join(parts)] = path
    return found


def _folder(name: str) -> str:
    return name.split(".")[0] if "." in name or (PACKAGE / name).is_dir() else ""


def _leaf(name: str) -> str:
    return name.rsplit(".", 1)[-1]


def _rank(name: str) -> int:
    """A module's layer; a folder's ``__init__`` and ``__main__`` are in the folder's layer."""
    if "." in name and _leaf(name) == "__main__":
        return _rank(name.rpartition(".")[0])
    if "." not in name and (PACKAGE / name).is_dir():
        return next(rank for rank, layer in enumerate(LAYERS) if layer.folder == name)
    if _leaf(name) not in RANK:
        raise AssertionError(f"{name} is in no row of LAYERS: add it to the row of the folder it belongs in")
    return RANK[_leaf(name)]


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The package's modules ``name`` imports, anywhere in it (``from .x import y`` where ``y`` is a module
    counts as ``x.y``)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".") if package else []
                base = base[:len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            elif (node.module or "").split(".")[0] == "cpdagthink":
                target = node.module.partition(".")[2]
            else:
                continue
            for alias in node.names:
                found.add(f"{target}.{alias.name}".lstrip(".") if f"{target}.{alias.name}".lstrip(".") in modules
                          else target)
        elif isinstance(node, ast.Import):
            found |= {alias.name.partition(".")[2] for alias in node.names if alias.name.startswith("cpdagthink.")}
    return {_known(target, modules) for target in found if target}


def _known(target: str, modules: dict[str, Path]) -> str:
    """The module an imported dotted name lives in (its longest prefix that is a module)."""
    while target not in modules and "." in target:
        target = target.rpartition(".")[0]
    return target


def _unresolved(name: str, path: Path, modules: dict[str, Path]) -> list[str]:
    """The relative imports of ``name`` that name no module of the package (``from ..x import y`` one dot
    short, in a folder inside a folder): Python fails on them only when they run, some inside a function."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = package.split(".") if package else []
            if node.level > len(base) + 1:
                found.append(f"line {node.lineno}: {'.' * node.level}{node.module or ''} is above the package")
                continue
            target = ".".join(base[:len(base) - node.level + 1] + ([node.module] if node.module else []))
            if target and target not in modules:
                found.append(f"line {node.lineno}: {'.' * node.level}{node.module or ''} ({target}) is no module")
    return found


@pytest.mark.parametrize("name", sorted(_modules()))
def test_every_relative_import_names_a_module_of_the_package(name):
    modules = _modules()
    assert _unresolved(name, modules[name], modules) == []


def test_a_relative_import_one_dot_short_is_found(tmp_path):
    (tmp_path / "glue.py").write_text("def late():\n    from ..analysis import audit\n", encoding="utf-8")
    modules = {"analysis": tmp_path, "book": tmp_path, "book.readings": tmp_path,
               "book.readings.glue": tmp_path / "glue.py"}
    assert _unresolved("book.readings.glue", tmp_path / "glue.py", modules) == [
        "line 2: ..analysis (book.analysis) is no module"]
    (tmp_path / "glue.py").write_text("def late():\n    from ...analysis import audit\n", encoding="utf-8")
    assert _unresolved("book.readings.glue", tmp_path / "glue.py", modules) == []


def test_every_module_has_one_row_of_the_table():
    names = [m for layer in LAYERS for m in layer.modules]
    assert len(names) == len(set(names)), "a module name appears in two rows"
    leaves = {_leaf(name) for name in _modules() if not (PACKAGE / name).is_dir()}
    assert sorted(leaves - set(names)) == [], "modules in no layer: add each to the row of the folder it belongs in"
    assert sorted(set(names) - leaves) == [], "rows name modules that do not exist"


def test_every_module_sits_in_the_folder_of_its_row():
    misplaced = []
    for name in _modules():
        if "." not in name and (PACKAGE / name).is_dir():
            continue
        row = LAYERS[_rank(name)].folder
        if _folder(name) != row:
            misplaced.append(f"{name} belongs in {row or 'the top level'}/")
    assert misplaced == []


@pytest.mark.parametrize("name", sorted(_modules()))
def test_no_import_runs_upward(name):
    modules = _modules()
    upward = sorted(f"{name} ({LAYERS[_rank(name)].folder or 'top'}) imports {target} "
                    f"({LAYERS[_rank(target)].folder or 'top'})"
                    for target in _imports(name, modules[name], modules) if _rank(target) > _rank(name))
    assert upward == []


def _cycle(graph: dict[str, set[str]]) -> list[str]:
    """One cycle of ``graph`` (each node's imports) as the path that closes it, or [] when there is none."""
    done: set[str] = set()
    path: list[str] = []

    def visit(node: str) -> list[str]:
        if node in path:
            return path[path.index(node):] + [node]
        if node in done:
            return []
        path.append(node)
        for target in sorted(graph.get(node, ())):
            found = visit(target)
            if found:
                return found
        path.pop()
        done.add(node)
        return []

    for node in sorted(graph):
        found = visit(node)
        if found:
            return found
    return []


def test_a_cycle_is_found_through_a_function_level_import(tmp_path):
    (tmp_path / "a.py").write_text("from . import b\n", encoding="utf-8")
    (tmp_path / "b.py").write_text("def late():\n    from .c import thing\n", encoding="utf-8")
    (tmp_path / "c.py").write_text("from .a import other\n", encoding="utf-8")
    modules = {f"book.{n}": tmp_path / f"{n}.py" for n in "abc"}
    graph = {name: _imports(name, path, modules) for name, path in modules.items()}
    assert graph["book.b"] == {"book.c"}
    assert _cycle(graph) == ["book.a", "book.b", "book.c", "book.a"]
    assert _cycle({**graph, "book.c": set()}) == []


def _graph(names: Sequence[str] | None = None) -> dict[str, set[str]]:
    """Each module's imports of the package (``names``: those modules only, the package's whole otherwise)."""
    modules = _modules()
    kept = set(modules if names is None else names)
    return {name: (_imports(name, path, modules) - {name}) & kept for name, path in modules.items() if name in kept}


def test_the_import_graph_below_the_command_line_has_no_cycle():
    """No module imports, through any chain of imports (inside functions too), a module that imports it: each
    room can be read, and changed, from the rooms below it alone."""
    assert _cycle(_graph([name for name in _modules() if name not in LAYERS[-1].modules])) == []


def test_the_whole_import_graph_has_no_cycle():
    assert _cycle(_graph()) == []


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _private_uses(name: str, path: Path, modules: dict[str, Path]) -> list[str]:
    """Where ``name`` reaches into another module of the package for a private name: ``from .x import _y``, or
    ``m._y`` on a module ``m`` it imported."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found, bound = [], set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").split(".")[0] == "cpdagthink"):
            if node.level:
                base = package.split(".") if package else []
                target = ".".join(base[:len(base) - node.level + 1] + ([node.module] if node.module else []))
            else:
                target = node.module.partition(".")[2]
            for alias in node.names:
                if f"{target}.{alias.name}".lstrip(".") in modules:
                    bound.add(alias.asname or alias.name)
                elif _private(alias.name):
                    found.append(f"line {node.lineno}: {alias.name} from {target or 'cpdagthink'}")
        elif isinstance(node, ast.Import):
            bound |= {alias.asname for alias in node.names if alias.name.startswith("cpdagthink.") and alias.asname}
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in bound
                and _private(node.attr)):
            found.append(f"line {node.lineno}: {node.value.id}.{node.attr}")
    return found


@pytest.mark.parametrize("name", sorted(_modules()))
def test_no_module_uses_another_module_s_private_name(name):
    """A leading underscore says "only this module relies on it": a name another module needs is public
    (documented, no underscore) or lives where it is used."""
    assert _private_uses(name, _modules()[name], _modules()) == []


def test_a_private_name_reached_for_is_found(tmp_path):
    (tmp_path / "a.py").write_text("def _inner(): pass\n", encoding="utf-8")
    (tmp_path / "b.py").write_text("from .a import _inner\nfrom . import a\nfrom .a import __doc__\n"
                                   "def late():\n    return a._inner, a.__name__\n", encoding="utf-8")
    modules = {f"book.{n}": tmp_path / f"{n}.py" for n in "ab"}
    assert _private_uses("book.b", modules["book.b"], modules) == ["line 1: _inner from book.a",
                                                                   "line 5: a._inner"]
    assert _private_uses("book.a", modules["book.a"], modules) == []


def _bound(tree: ast.Module) -> set[str]:
    """The names a module's top level binds: its imports, definitions and assignments."""
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(alias.asname or alias.name).split(".")[0] for alias in node.names}
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {t.id for t in targets if isinstance(t, ast.Name)}
    return names


def _declared(tree: ast.Module) -> list[str] | None:
    """A module's ``__all__`` as written, None without one."""
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            return list(ast.literal_eval(node.value))
    return None


@pytest.mark.parametrize("folder", sorted({layer.folder for layer in LAYERS if layer.folder}))
def test_every_layer_package_declares_its_api(folder):
    """Each layer's ``__init__`` says in ``__all__`` what it offers: the names it defines or re-exports, or, when
    it defines none, every module of the folder."""
    tree = ast.parse((PACKAGE / folder / "__init__.py").read_text(encoding="utf-8"))
    declared = _declared(tree)
    assert declared is not None, f"{folder}/__init__.py has no __all__"
    modules = {_leaf(name) for name in _modules() if name.startswith(f"{folder}.") and name.count(".") == 1}
    bound = _bound(tree) - {"__all__", "annotations"}
    assert sorted(set(declared) - bound - modules) == [], "__all__ names what the package does not hold"
    if not bound:
        assert sorted(declared) == sorted(modules), "__all__ of a folder of modules lists every module"


@pytest.mark.parametrize("family", FAMILIES)
def test_each_family_folder_exports_the_backend_class_its_registry_entry_names(family):
    """A family with several files is a folder of ``backends/``: its ``__init__`` exports its backend class
    (and only that), the one its ``BACKENDS`` entry builds, whose module sits in the folder."""
    from cpdagthink.backends import BACKENDS, Backend, backend_class

    assert (PACKAGE / "backends" / family / "__init__.py").is_file()
    package = __import__(f"cpdagthink.backends.{family}", fromlist=["__all__"])
    [exported] = package.__all__
    entries = [name for name, entry in BACKENDS.items() if entry == f".{family}:{exported}"]
    assert len(entries) == 1, f"no single BACKENDS entry names .{family}:{exported}"
    cls = backend_class(entries[0])
    assert issubclass(cls, Backend) and cls.__module__ == f"cpdagthink.backends.{family}.backend"


def _named_backend(node: ast.expr) -> bool:
    """Whether an expression reads a backend's name: ``backend``, ``config.backend``, ``row["backend"]``."""
    if isinstance(node, ast.Name):
        return "backend" in node.id.lower()
    if isinstance(node, ast.Attribute):
        return "backend" in node.attr.lower()
    if isinstance(node, ast.Subscript):
        return isinstance(node.slice, ast.Constant) and node.slice.value == "backend"
    return False


def _literal_names(node: ast.expr, constants: set[str] = frozenset()) -> bool:
    """A string literal, a literal tuple, list, set or dict (its keys) holding one, ``frozenset`` of one, or
    the name of a module constant bound to one (``constants``)."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str)
    if isinstance(node, ast.Name):
        return node.id in constants
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and len(node.args) == 1:
        return node.func.id in ("frozenset", "set", "tuple") and _literal_names(node.args[0])
    elements = node.keys if isinstance(node, ast.Dict) else getattr(node, "elts", None)
    return isinstance(node, (ast.Tuple, ast.List, ast.Set, ast.Dict)) and any(
        e is not None and _literal_names(e) for e in elements)


def _name_switches(source: str) -> list[str]:
    """Where ``source`` compares a backend's name with a string literal (``== "local"``, ``in ("openai",
    "vllm")``, ``in _API_BACKENDS`` bound to such a literal) or looks it up in a table keyed by literals: a
    fact of a backend family switched on outside the family, which its class should answer."""
    tree = ast.parse(source)
    constants = {t.id for node in tree.body if isinstance(node, ast.Assign) and _literal_names(node.value)
                 for t in node.targets if isinstance(t, ast.Name)}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any((_named_backend(a) and _literal_names(b, constants)) or (_named_backend(b) and _literal_names(a, constants))
                   for a, b in zip(sides, sides[1:])):
                found.append(f"line {node.lineno}: {ast.unparse(node)}")
        elif isinstance(node, ast.Subscript) and _named_backend(node.slice) and _literal_names(node.value, constants):
            found.append(f"line {node.lineno}: {ast.unparse(node)}")
    return found


def test_no_module_outside_backends_switches_on_a_backend_name():
    """What a family must say of itself (job sizing, sampling, a model's title, the conditions it refuses)
    is a class-level answer of its backend (``backends/base.py``), read through the registry; a module
    outside ``backends/`` never compares a backend's name with a literal."""
    switches = [f"{name}: {found}" for name, path in _modules().items() if _folder(name) != "backends"
                for found in _name_switches(path.read_text(encoding="utf-8"))]
    assert switches == []


def test_a_switch_on_a_backend_name_is_found():
    source = ('if config.backend == "local":\n    pass\n'
              'sized = backend in ("openai", "vllm")\n'
              'titled = "reference" != setup.backend\n'
              'row = record["backend"] == "local"\n'
              '_API = frozenset({"openai"})\n'
              '_SIZED_BY = {"vllm": "gpu"}\n'
              'api = config.backend in _API\n'
              'sized = _SIZED_BY[config.backend]\n'
              'fine = config.backend in BACKENDS and config.model == "qwen" and TABLE[config.backend]\n')
    assert _name_switches(source) == [
        "line 1: config.backend == 'local'", "line 3: backend in ('openai', 'vllm')",
        "line 4: 'reference' != setup.backend", "line 5: record['backend'] == 'local'",
        "line 8: config.backend in _API", "line 9: _SIZED_BY[config.backend]"]


def _test_modules_imported(source: str) -> set[str]:
    """The test modules (``test_*``) that ``source`` imports, at its top or inside a function."""
    names = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
    return {name.removeprefix("tests.") for name in names if name.removeprefix("tests.").startswith("test_")}


def test_no_test_module_imports_another():
    """What two test modules share is a helper of tests/ (conftest.py, scored_runs.py, snakemake_project.py, ...),
    never one test module's builders read from another (its tests and set-up would come along)."""
    tests = Path(__file__).parent
    found = {path.name: _test_modules_imported(path.read_text(encoding="utf-8")) for path in tests.glob("*.py")}
    assert {name: sorted(modules) for name, modules in found.items() if modules} == {}
    assert _test_modules_imported("from test_tables import GOLD\nimport json\n\ndef f():\n    import tests.test_runner\n"
                                  "    from conftest import configured\n") == {"test_tables", "test_runner"}
