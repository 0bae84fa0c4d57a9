"""The main job: execute every notebook with papermill (into ``book/``) and build the Jupyter Book.

Parameters given here override the notebooks' own defaults for every notebook that declares them, so
``cpdagthink book --backend openai --model gpt-x --limit 0`` re-runs the whole book on another model.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, ContextManager, Iterator, Sequence

from ..analysis.markup import Markdown, bullets, code, emphasis, paragraphs, quote, strong
from ..analysis.metrics import counted
from ..errors import CpdagthinkError
from ..paths import PROJECT_ROOT
from . import build_record
from .chapters import (ENV_RENDER_ONLY, METADATA_KEY, NOTEBOOKS, RenderOnlyError, chapter_values, for_chapter,
                       notebook_parameters, scoped_name, select_notebooks)
from .site import build_html, build_single_file, require_checkout


def check_parameters(notebooks: list[Path], overrides: dict[str, Any]) -> None:
    """Validate what each notebook will run, its own defaults with the overrides it accepts, as ``run``
    validates its flags (same messages): every value, the backend's options, and that the sample can be
    drawn as asked. Each distinct sample is drawn once."""
    from .experiments import setup_from_parameters

    drawn = set()
    for notebook in notebooks:
        setup = setup_from_parameters(chapter_values(notebook, overrides))
        sample = setup.sample.model_dump_json()
        if sample not in drawn:
            setup.instances()
            drawn.add(sample)


@contextlib.contextmanager
def _kernel_log(path: Path) -> Iterator[None]:
    """Send what is written to this process's standard error meanwhile, by the kernel it starts (which inherits
    it) and by the notebook client, to ``path``: the kernel's own log, and the tracebacks an interruption
    leaves when it tears the kernel's sockets down. The console keeps the command's own lines; a cell's
    error is in the executed notebook and in the exception papermill raises."""
    import logging

    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with path.open("a", encoding="utf-8") as log:
            os.dup2(log.fileno(), 2)
            try:
                yield
            except BaseException:
                # The client's task an interruption left unfinished reports itself when it is collected, as
                # the process ends: asyncio's logger, from here on, writes to the log too.
                quiet = logging.getLogger("asyncio")
                quiet.addHandler(logging.FileHandler(path, encoding="utf-8"))
                quiet.propagate = False
                raise
            finally:
                sys.stderr.flush()
                os.dup2(saved, 2)
    finally:
        os.close(saved)


def papermill_parameters(notebook: Path, overrides: dict[str, Any]) -> dict[str, Any]:
    """What papermill gives ``notebook`` for these overrides: those it declares, with live widgets off unless
    asked (a headless kernel cannot run them; notebooks that declare this show static views instead)."""
    accepted = notebook_parameters(notebook)
    given = {"interactive_widgets": False, **for_chapter(notebook, overrides)}
    return {k: v for k, v in given.items() if k in accepted}


def executed_parameters(path: Path) -> dict[str, Any] | None:
    """The parameters papermill gave the executed notebook ``path`` (its ``metadata.papermill``); None for a
    notebook papermill did not execute or that cannot be read."""
    try:
        parameters = json.loads(path.read_text(encoding="utf-8"))["metadata"]["papermill"]["parameters"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return parameters if isinstance(parameters, dict) else None


def execute(notebook: Path, overrides: dict[str, Any], output_dir: Path) -> Path:
    """Run one notebook with the overrides it accepts (:func:`papermill_parameters`); the executed copy goes
    to ``output_dir``, with what its execution cost in its metadata (:func:`build_record.measure`; whether it was
    made render-only, from complete run records, as ``render_only``)."""
    import papermill

    unknown = set(for_chapter(notebook, overrides)) - notebook_parameters(notebook)
    parameters = papermill_parameters(notebook, overrides)
    output = output_dir / notebook.name
    print(f"executing {notebook.name} with {json.dumps(parameters)}"
          + (f" (not a parameter here: {sorted(unknown)})" if unknown else ""), flush=True)
    cost: dict[str, Any] = {"render_only": os.environ.get(ENV_RENDER_ONLY) == "1"}
    try:
        with _kernel_log(output.with_name(f".{notebook.stem}.kernel.log")), build_record.measure(cost):
            papermill.execute_notebook(str(notebook), str(output), parameters=parameters, cwd=str(PROJECT_ROOT),
                                       kernel_name="python3", progress_bar=False, log_output=False)
    except papermill.PapermillExecutionError as error:
        if error.ename == RenderOnlyError.__name__:  # a run to compute first: its one line, not a traceback
            raise RenderOnlyError(f"{notebook.stem}: {error.evalue}") from None
        raise
    build_record.stamp(output, cost)
    return output


def hide_injected_parameters(path: Path) -> None:
    """Remove papermill's injected-parameters cell from the page (tag ``remove-cell``): it shows lists as
    escaped JSON; each chapter's first screen prints the command that reproduces it instead."""
    import nbformat

    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        tags = cell.metadata.setdefault("tags", [])
        if "injected-parameters" in tags and "remove-cell" not in tags:
            tags.append("remove-cell")
    nbformat.write(nb, path)


SUMMARY = "build_summary.md"  # written by render() into book/, included by the intro
UNFINISHED_TAG = "cpdagthink-unfinished"  # the note render() puts atop a chapter whose execution did not finish
# What the intro reads from each chapter's first screen (readings.first_screen writes them).
RECORD_KEYS = {"command": (), "headline": ("figure", "paper", "value", "ci_low", "ci_high", "verdict", "causes",
                                          "degenerate"),
               "configuration": ("backend", "model", "data", "sample", "instances", "positives", "negatives",
                                 "seeds", "budgets", "decoding", "tool choice")}


class PartialBookError(CpdagthinkError):
    """A chapter's execution did not finish: the book is not published unless a partial book is asked for."""


@dataclass(frozen=True)
class Chapter:
    """An executed chapter as :func:`render` reads it: its first screen's record (None: it has none, or one
    this version cannot read, ``stale`` says why) and why its execution did not finish (None: it finished)."""

    name: str
    record: dict[str, Any] | None
    unfinished: str | None = None
    stale: str | None = None


def toc_chapters(root: Path) -> list[str] | None:
    """The stems of the notebooks ``root/_toc.yml`` lists under ``book/`` (None: no table of contents)."""
    import yaml

    toc = root / "_toc.yml"
    if not toc.is_file():
        return None
    files: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("file"), str):
                files.append(node["file"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(yaml.safe_load(toc.read_text(encoding="utf-8")))
    return [Path(f).with_suffix("").name for f in files if Path(f).parent.name == "book"]


def executed_chapters(book: Path) -> list[Path]:
    """The executed chapter notebooks of ``book``: those the table of contents beside it lists (a stray
    notebook it does not list is no chapter of the book), or every ``NN_*.ipynb`` without one."""
    listed = toc_chapters(book.parent)
    found = sorted(book.glob("[0-9][0-9]_*.ipynb"))
    return found if listed is None else [path for path in found if path.stem in listed]


def _read_notebook(path: Path) -> Any:
    import nbformat

    try:
        return nbformat.read(path, as_version=4)
    except Exception as error:  # nbformat raises JSON, validation and reader errors of several types
        raise ValueError(f"{path} is not a readable notebook ({type(error).__name__}: {error}); execute it again "
                         f"(`cpdagthink book --only {path.stem.split('_')[0]}`) or move it away") from None


def unfinished_reason(nb: Any) -> str | None:
    """Why a notebook's execution did not finish, or None: a cell that raised (an interruption shows as its
    ``KeyboardInterrupt``), or cells papermill left pending or running (its process was killed)."""
    for cell in nb.cells:
        errors = [o for o in cell.get("outputs", []) if o.get("output_type") == "error"]
        if errors:
            return f"a cell raised {errors[0].get('ename', 'an error')}"
        status = cell.get("metadata", {}).get("papermill", {}).get("status")
        if status in ("pending", "running"):
            return f"a cell was left {status}: its kernel was stopped"
    return None


def _stale(record: dict[str, Any]) -> str | None:
    """What a first-screen record lacks that the intro reads (a notebook from another version), or None."""
    for key, inner in RECORD_KEYS.items():
        if key not in record:
            return f"its first screen records no {key!r}"
        absent = [k for k in inner if not isinstance(record[key], dict) or k not in record[key]]
        if absent:
            return f"its first screen's {key!r} lacks {absent[0]!r}"
    return None


def read_chapter(path: Path) -> Chapter:
    """One executed chapter (:class:`Chapter`); a file that is not a notebook raises ValueError naming it."""
    nb = _read_notebook(path)
    outputs = (o for c in nb.cells for o in c.get("outputs", []))
    record = next((o["metadata"][METADATA_KEY] for o in outputs if METADATA_KEY in o.get("metadata", {})), None)
    stale = None if record is None else _stale(record) if isinstance(record, dict) else "its first screen is not a record"
    return Chapter(path.stem, None if stale else record, unfinished_reason(nb), stale)


def chapter_records(book: Path) -> dict[str, dict[str, Any]]:
    """Per executed chapter in ``book`` (:func:`executed_chapters`), what its first screen recorded
    (configuration, headline, command), read from the output metadata that :func:`readings.first_screen`
    writes; chapters without a readable record are left out (:func:`read_chapter` says why)."""
    chapters = (read_chapter(path) for path in executed_chapters(book))
    return {c.name: c.record for c in chapters if c.record is not None}


def method_box(records: dict[str, dict[str, Any]]) -> Markdown:
    """The intro's "does the method work on this model?" box, from the chapters' first-screen records: which
    key figures are what degenerate answers produce (:func:`readings.answer_causes`), and the causes their
    records name (constant answers, cut-offs, malformed graphs), each with the chapters that found it."""
    chapters: dict[str, list[str]] = {}
    for name, record in records.items():
        for cause in record["headline"]["causes"]:
            chapters.setdefault(cause, []).append(name.split("_")[0])
    degenerate = [name.split("_")[0] for name, record in records.items() if record["headline"]["degenerate"]]
    if degenerate:
        verdict = (f"Not on this build's evidence: the key figure of {counted(len(degenerate), 'chapter')} "
                   f"({', '.join(degenerate)}) is what degenerate answers produce, not a finding.")
    else:
        verdict = ("No chapter's key figure rests on degenerate answers; whether its interval can see the paper's "
                   "effect is each chapter's verdict, below.")
    why = ("Its records show: " + "; ".join(f"{cause} (chapter {', '.join(found)})" for cause, found in chapters.items())
           + "." if chapters else "Its records show no constant answers, cut-offs or malformed graphs behind the key figures.")
    close = (" So this build shows the pipeline running end to end on this model, not whether the method works on "
             "it: that needs answers that finish within the budget, vary from row to row and differ between the "
             "conditions compared." if degenerate else "")
    return quote(Markdown(strong("Does the method work on this model?"), " ", verdict, " ", why, close))


def build_summary(records: dict[str, dict[str, Any]], others: Sequence[Chapter] = ()) -> Markdown:
    """The intro's account of this build: whether every chapter ran with one configuration (or the book is
    mixed), each chapter's configuration, each chapter's key figure beside the paper's, and ``others``: the
    chapters whose execution did not finish or whose first screen this version cannot read, each with why."""
    import pandas as pd

    from .presentation import markdown_table

    left = [Markdown(strong("Chapters not counted here:"), " ", Markdown("; ").join(
        Markdown(c.name, ": ", "its execution did not finish, " + c.unfinished if c.unfinished else
                 f"made by another version ({c.stale})", "; run ", code(f"cpdagthink book --only {c.name.split('_')[0]}"),
                 " again")
        for c in others))] if others else []
    if not records:
        return paragraphs(*left) if left else Markdown(
            "No chapter of this book has been executed yet: run ", code("make book"), ".")
    shared = ("backend", "model", "data", "sample", "instances", "positives", "seeds", "budgets", "decoding",
              "tool choice")
    configs = {name: {k: r["configuration"][k] for k in shared} for name, r in records.items()}
    mixed = len({repr(c) for c in configs.values()}) > 1
    first = next(iter(configs.values()))
    head = (Markdown(strong("This book is mixed:"), " its chapters ran with different configurations (table below); "
                     "numbers of two chapters compare only where their rows agree. Rebuild every chapter with one "
                     "command to unmix it.")
            if mixed else
            Markdown(strong("One configuration for every chapter:"),
                     f" {first['model']} (backend {first['backend']}), {first['data']}, {first['sample']}, seeds "
                     f"{', '.join(map(str, first['seeds']))}, token budgets {first['budgets']} (turn 1 + answer), "
                     f"{first['decoding']}."))

    def number(value: float, unit: str) -> str:
        return f"{value:+.3g}" if unit == "pp" else f"{value:.3g}"  # gains and drops signed, scores not

    def figure(h: dict[str, Any]) -> str:
        if h["value"] is None:
            return "not computed"
        unit = h.get("unit", "pp")
        ci = "" if h["ci_low"] is None else f" [{number(h['ci_low'], unit)}, {number(h['ci_high'], unit)}]"
        return number(h["value"], unit) + ci

    headlines = pd.DataFrame([{"chapter": name, "key figure": r["headline"]["figure"],
                               "this build (95% CI)": figure(r["headline"]),
                               # the paper's figure as the paper prints it
                               "paper": f"{r['headline']['paper']:{'+' if r['headline'].get('unit', 'pp') == 'pp' else ''}g}",
                               "verdict": r["headline"]["verdict"].split(":")[0]}
                              for name, r in records.items()])
    rows = [{"chapter": name, "model": c["model"], "data": c["data"],
             "sample": f"{r['configuration']['instances']} ({r['configuration']['positives']} positive, "
                       f"{r['configuration']['negatives']} negative)",
             "seeds": ", ".join(map(str, c["seeds"])), "budgets": c["budgets"], "decoding": c["decoding"]}
            for (name, c), r in zip(configs.items(), records.values())]
    commands = bullets(Markdown(name, ": ", code(r["command"])) for name, r in records.items())
    return paragraphs(
        *left, method_box(records), head,
        emphasis("Key figures, this build beside the paper's (pp; the paper's figures are from ",
                 code("data/paper_reported.csv"), ", measured on Qwen3.5-27B and the full splits)."),
        markdown_table(headlines),
        *([emphasis("Each chapter's configuration."), markdown_table(pd.DataFrame(rows))] if mixed else []),
        "Each chapter re-executes with:", commands)


def _refuse_unfinished(chapters: Sequence[Chapter]) -> None:
    """Raise :class:`PartialBookError` naming the ``chapters`` whose execution did not finish, if any."""
    unfinished = [c for c in chapters if c.unfinished]
    if unfinished:
        raise PartialBookError(
            "the execution of " + "; ".join(f"{c.name} did not finish ({c.unfinished})" for c in unfinished)
            + ": run `cpdagthink book --only " + " ".join(c.name.split("_")[0] for c in unfinished)
            + "` again, or pass --allow-partial to publish the book with them marked")


def render(root: Path = PROJECT_ROOT, allow_partial: bool = False) -> Path:
    """Build the book from the notebooks already executed into ``root/book`` (by ``cpdagthink book`` or by
    papermill; those ``root/_toc.yml`` lists), executing nothing: hide papermill's parameters cell, write the
    intro's account of the build's configurations and key figures and its build record
    (:func:`build_record.write_build_record`), then the HTML book and its single-file
    print. A chapter whose execution did not finish (:func:`unfinished_reason`) stops the build with
    :class:`PartialBookError`, unless ``allow_partial``: then its page and the intro say so."""
    require_checkout(root / "_toc.yml")  # a package install: say so, not "run `cpdagthink book`", which needs one too
    book = root / "book"
    executed = executed_chapters(book)
    if not executed:
        raise ValueError(f"no executed chapter in {book}: run `cpdagthink book` (or papermill) first")
    chapters = [read_chapter(path) for path in executed]
    if not allow_partial:
        _refuse_unfinished(chapters)
    for path, chapter in zip(executed, chapters):
        hide_injected_parameters(path)
        if chapter.unfinished:
            mark_unfinished(path, chapter.unfinished)
    records = {c.name: c.record for c in chapters if c.record is not None and not c.unfinished}
    others = [c for c in chapters if c.unfinished or c.stale]
    (book / SUMMARY).write_text(build_summary(records, others).source() + "\n", encoding="utf-8")
    build_record.write_build_record(book, executed)
    index = build_html(root)
    build_single_file(root)
    return index


def mark_unfinished(path: Path, reason: str) -> None:
    """Put a note atop a chapter whose execution did not finish (once): its numbers are partial or missing."""
    import nbformat

    nb = nbformat.read(path, as_version=4)
    if any(UNFINISHED_TAG in c.metadata.get("tags", []) for c in nb.cells):
        return
    note = nbformat.v4.new_markdown_cell(
        Markdown(strong("This chapter's execution did not finish"), f" ({reason}): what follows is partial. Run ",
                 code(f"cpdagthink book --only {path.stem.split('_')[0]}"), " again to complete it.").source(),
        metadata={"tags": [UNFINISHED_TAG]})
    heading = next((k for k, c in enumerate(nb.cells) if c.cell_type == "markdown" and c.source.startswith("# ")), -1)
    nb.cells.insert(heading + 1, note)
    nbformat.write(nb, path)


@contextlib.contextmanager
def _kernel_environment(render_only: bool) -> Iterator[None]:
    """The environment of the kernels started meanwhile (they inherit this process's): no progress bars (in a
    page they are widgets of the computation, not results, and a page made again from the same records must
    be the same page; papermill shows no kernel output on the console anyway), and the render-only switch
    when asked."""
    changes = {"TQDM_DISABLE": "1", **({ENV_RENDER_ONLY: "1"} if render_only else {})}
    before = {name: os.environ.get(name) for name in changes}
    os.environ.update(changes)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def selected(overrides: dict[str, Any], only: list[str] | None = None,
             parameters: dict[str, Any] | None = None) -> tuple[list[Path], dict[str, Any]]:
    """The chapters ``only`` selects and the overrides they are given: the flags' values, then ``parameters``
    (``-p name=value``), the backend options of both in one ``backend_options`` (``-p``'s winning by key), the
    endpoints without user info. A name no selected chapter declares is refused, a flag's as a ``-p``'s: it
    would change nothing."""
    from ..run.config import bare_urls
    from ..run.parameters import coerce_options

    notebooks = select_notebooks(only)
    parameters = parameters or {}
    declared = set().union(*(notebook_parameters(n) for n in notebooks))
    unknown = sorted(name for name in set(overrides) | set(parameters) if not _declared(name, notebooks))
    if unknown:
        raise ValueError(f"no selected chapter takes the parameter {', '.join(map(repr, unknown))}; "
                         f"they take: {', '.join(sorted(declared))} (a backend's own option goes in "
                         "backend_options: -o KEY=VALUE)")
    options = {**coerce_options(overrides.get("backend_options")), **coerce_options(parameters.get("backend_options"))}
    overrides = {**overrides, **parameters}
    if isinstance(options.get("base_url"), (str, list)):  # printed and stored in every notebook: no user info
        options["base_url"] = bare_urls(options["base_url"])
    if options:
        overrides["backend_options"] = options
    return notebooks, overrides


def _declared(name: str, notebooks: Sequence[Path]) -> bool:
    """Some chapter of ``notebooks`` takes the parameter ``name``; a scoped one (``01:seeds``), some chapter it
    names, selected or not (a workflow's chapter job gets the parameters of every chapter)."""
    prefix, parameter = scoped_name(name)
    if prefix is None:
        return any(parameter in notebook_parameters(n) for n in notebooks)
    return any(parameter in notebook_parameters(n) for n in select_notebooks() if n.name.startswith(prefix))


def build(overrides: dict[str, Any], only: list[str] | None = None, root: Path = PROJECT_ROOT,
          parameters: dict[str, Any] | None = None, render_only: bool = False, render_book: bool = True,
          allow_partial: bool = False,
          watch: Callable[[Path, dict[str, Any]], ContextManager[None]] | None = None) -> Path:
    """Execute the notebooks (all, or those whose names start with an entry of ``only``) into ``root/book``
    and build the book at ``root`` (which holds ``_config.yml`` and ``_toc.yml``) with :func:`render`; other
    chapters already executed in ``root/book`` are left as they are. ``parameters`` (``-p name=value``) are
    any notebook parameters; a name no selected chapter declares is refused before anything runs.
    ``render_only``: the notebooks' kernels get ``CPDAGTHINK_RENDER_ONLY=1``, so every page is made from
    complete run folders and a run that is not complete fails its chapter, naming the run folder.
    ``render_book=False`` stops after the notebooks (each workflow chapter job; its book job renders once) and
    returns ``root/book``; ``allow_partial``: :func:`render`'s. ``watch(notebook, overrides)``, when given, is
    entered while each chapter executes (the console's progress, :func:`cpdagthink.book.progress.chapter_progress`)."""
    require_checkout(NOTEBOOKS)
    notebooks, overrides = selected(overrides, only, parameters)
    check_parameters(notebooks, overrides)  # papermill would fail deep inside a notebook
    book = root / "book"
    book.mkdir(exist_ok=True)
    timings = {}
    with _kernel_environment(render_only):
        for notebook in notebooks:
            start = time.perf_counter()
            with watch(notebook, overrides) if watch else contextlib.nullcontext():
                execute(notebook, overrides, book)
            timings[notebook.name] = round(time.perf_counter() - start, 1)
    print(f"notebook times (s): {json.dumps(timings)}")
    return render(root, allow_partial) if render_book else book
