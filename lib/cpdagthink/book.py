"""The main job: execute every notebook with papermill (into ``book/``) and build the Jupyter Book.

Parameters given here override the notebooks' own defaults for every notebook that declares them, so
``cpdagthink book --backend openai --model gpt-x --limit 0`` re-runs the whole book on another model.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from .data import PROJECT_ROOT

NOTEBOOKS = PROJECT_ROOT / "notebooks"


def notebook_parameters(path: Path) -> set[str]:
    """Names assigned in the notebook's cell tagged ``parameters``."""
    import ast

    import nbformat

    for cell in nbformat.read(path, as_version=4).cells:
        if "parameters" in cell.get("metadata", {}).get("tags", []):
            return {t.id for node in ast.parse(cell.source).body if isinstance(node, ast.Assign)
                    for t in node.targets if isinstance(t, ast.Name)}
    raise ValueError(f"{path.name} has no cell tagged 'parameters'")


def execute(notebook: Path, overrides: dict[str, Any], output_dir: Path) -> Path:
    """Run one notebook with the overrides it accepts; the executed copy goes to ``output_dir``."""
    import papermill

    accepted = notebook_parameters(notebook)
    unknown = set(overrides) - accepted
    parameters = {k: v for k, v in overrides.items() if k in accepted}
    output = output_dir / notebook.name
    print(f"executing {notebook.name} with {json.dumps(parameters)}"
          + (f" (not a parameter here: {sorted(unknown)})" if unknown else ""), flush=True)
    papermill.execute_notebook(str(notebook), str(output), parameters=parameters, cwd=str(PROJECT_ROOT),
                               kernel_name="python3", progress_bar=False, log_output=False)
    return output


def build_html(root: Path = PROJECT_ROOT) -> Path:
    """``jupyter-book build`` on the root (notebooks are already executed; execution is off)."""
    command = [str(Path(sys.executable).with_name("jupyter-book")), "build", str(root), "--quiet"]
    subprocess.run(command, check=True, cwd=root)
    index = root / "_build" / "html" / "index.html"
    if not index.is_file():
        raise RuntimeError(f"jupyter-book finished but {index} is missing")
    return index


def select_notebooks(only: list[str] | None = None) -> list[Path]:
    """Every chapter, or those whose names start with an entry of ``only``; an entry that matches no
    chapter is refused with the list of chapters (a typo must not build an empty book)."""
    notebooks = sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
    if not only:
        return notebooks
    unmatched = [prefix for prefix in only if not any(n.name.startswith(prefix) for n in notebooks)]
    if unmatched:
        raise ValueError(f"no chapter starts with {', '.join(map(repr, unmatched))}; the chapters are: "
                         + ", ".join(n.stem for n in notebooks))
    return [n for n in notebooks if any(n.name.startswith(prefix) for prefix in only)]


def check_backend(name: str | None) -> None:
    """Refuse an unknown backend before any notebook starts (papermill would fail deep inside one)."""
    from .backends import backend_factory

    if name is not None:
        backend_factory(name)


def build(overrides: dict[str, Any], only: list[str] | None = None, root: Path = PROJECT_ROOT) -> Path:
    """Execute the notebooks (all, or those whose names start with an entry of ``only``) into ``root/book``
    and build the book at ``root`` (which holds ``_config.yml`` and ``_toc.yml``)."""
    notebooks = select_notebooks(only)
    check_backend(overrides.get("backend"))
    book = root / "book"
    book.mkdir(exist_ok=True)
    # A headless kernel cannot run live widgets; notebooks that declare this show static views instead.
    overrides = {"interactive_widgets": False, **overrides}
    timings = {}
    for notebook in notebooks:
        start = time.perf_counter()
        execute(notebook, overrides, book)
        timings[notebook.name] = round(time.perf_counter() - start, 1)
    index = build_html(root)
    print(f"notebook times (s): {json.dumps(timings)}")
    return index
