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
from pathlib import Path
from typing import Any, Callable, ContextManager, Iterator, Sequence

from ..errors import CpdagthinkError
from ..paths import PROJECT_ROOT
from . import build_record
from .chapter_state import (Chapter, executing, never_executed, read_chapters, unfinished_reason,
                            write_placeholder)
from .chapters import (ENV_RENDER_ONLY, NOTEBOOKS, RenderOnlyError, chapter_values, for_chapter,
                       notebook_parameters, scoped_name, select_notebooks)
from .intro import build_summary
from .presentation import markdown_table, paper_appendix
from .site import build_html, build_single_file, require_checkout


def check_parameters(notebooks: list[Path], overrides: dict[str, Any]) -> None:
    """Validate what each notebook will run, its own defaults with the overrides it accepts, as ``run``
    validates its flags (same messages): every value, the backend's options, and that the sample can be
    drawn as asked, on the chapter's OOD split too where it names one (offline, a split not at hand fails here in
    one line, not in a chapter's kernel). Each distinct sample is drawn once."""
    from .experiments import ood_setup, setup_from_parameters

    drawn = set()
    for notebook in notebooks:
        values = chapter_values(notebook, overrides)
        setup = setup_from_parameters(values)
        for each in [setup, *([ood_setup(setup, values["ood_split"])] if values.get("ood_split") else [])]:
            sample = each.sample.model_dump_json()
            if sample not in drawn:
                each.instances()
                drawn.add(sample)


# ipykernel copies what native code writes to the kernel's file descriptors 1 and 2 into the cell's outputs, so a
# library's console line (llama.cpp's log, a C extension's warning) became part of the chapter's page. Without
# that capture it goes where the kernel's own standard error goes: the chapter's kernel log (:func:`_kernel_log`).
# What Python code prints, and a cell's errors, still reach the page.
KERNEL_ARGUMENTS = ["--IPKernelApp.capture_fd_output=False"]


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
    """Run one notebook with the overrides it accepts (:func:`papermill_parameters`) into a partial notebook in
    ``output_dir``, under the chapter's lock (:func:`~cpdagthink.book.chapter_state.executing`), and put it in
    place of the chapter only once every code cell ran: an interrupted or failed execution leaves the chapter
    it would have replaced as it was. The executed chapter records what its execution cost in its metadata
    (:func:`build_record.measure`; whether it was made render-only, from complete run records, as
    ``render_only``)."""
    import papermill

    unknown = set(for_chapter(notebook, overrides)) - notebook_parameters(notebook)
    parameters = papermill_parameters(notebook, overrides)
    output = output_dir / notebook.name
    print(f"executing {notebook.name} with {json.dumps(parameters)}"
          + (f" (not a parameter here: {sorted(unknown)})" if unknown else ""), flush=True)
    cost: dict[str, Any] = {"render_only": os.environ.get(ENV_RENDER_ONLY) == "1"}
    with executing(output_dir, notebook.stem) as partial:
        try:
            with _kernel_log(output.with_name(f".{notebook.stem}.kernel.log")), build_record.measure(cost):
                papermill.execute_notebook(str(notebook), str(partial), parameters=parameters,
                                           cwd=str(PROJECT_ROOT), kernel_name="python3", progress_bar=False,
                                           log_output=False, extra_arguments=KERNEL_ARGUMENTS)
        except papermill.PapermillExecutionError as error:
            if error.ename == RenderOnlyError.__name__:  # a run to compute first: its one line, not a traceback
                raise RenderOnlyError(f"{notebook.stem}: {error.evalue}") from None
            if error.ename == "KeyboardInterrupt":  # Ctrl-C reached the kernel (same process group) first
                raise KeyboardInterrupt from None
            if error.ename in _project_errors():  # a folder it cannot write, data it cannot read: one line
                raise ChapterError(f"{notebook.stem}: {error.evalue} (its notebook as it stopped: {partial})") from None
            raise  # a bug: its traceback
        _put_in_place(partial, output, cost)
    return output


def _put_in_place(partial: Path, output: Path, cost: dict[str, Any]) -> None:
    """Make the executed ``partial`` notebook the chapter ``output``, with ``cost`` in its metadata, if every code
    cell ran; else leave both as they are and raise :class:`IncompleteChapterError`."""
    import nbformat

    nb = nbformat.read(partial, as_version=4)
    reason = unfinished_reason(nb)
    if reason:
        raise IncompleteChapterError(f"{output.stem} did not finish ({reason}; see {partial}): {output} is left as "
                                     "it was")
    nb.metadata[build_record.METADATA_KEY] = cost
    nb.metadata.setdefault("papermill", {})["output_path"] = str(output)
    nbformat.write(nb, partial)
    partial.replace(output)


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
PAPER_TABLE = "paper_figures_table.md"  # written by render() into book/, included by the paper-figures appendix


class PartialBookError(CpdagthinkError):
    """A chapter has no complete execution: the book is not published unless a partial book is asked for."""


class ChapterError(CpdagthinkError):
    """A chapter's kernel raised one of the package's own errors (a message for the user, not a bug)."""


def _project_errors() -> set[str]:
    """The names of the package's error classes (:class:`~cpdagthink.errors.CpdagthinkError` and those below it,
    as far as they are imported here; the kernel raises them by the same names)."""
    from ..run import data, runfolder  # noqa: F401 - what a chapter's kernel raises most: their errors, known

    found, todo = set(), [CpdagthinkError]
    while todo:
        error = todo.pop()
        found.add(error.__name__)
        todo += error.__subclasses__()
    return found


class IncompleteChapterError(CpdagthinkError):
    """papermill returned, and yet a code cell of the chapter did not run: it is not put in place."""


def chapter_records(book: Path) -> dict[str, dict[str, Any]]:
    """Per executed chapter in ``book`` (:func:`~cpdagthink.book.chapter_state.read_chapters`), what its first screen recorded
    (configuration, headline, command), read from the output metadata that :func:`readings.first_screen`
    writes; chapters without a readable record are left out (:func:`~cpdagthink.book.chapter_state.read_chapter` says why)."""
    return {c.name: c.record for c in read_chapters(book) if c.record is not None}


def _refuse_unfinished(chapters: Sequence[Chapter]) -> None:
    """Raise :class:`PartialBookError` naming the ``chapters`` without a complete execution, if any."""
    unfinished = [c for c in chapters if c.unfinished]
    if not unfinished:
        return
    stopped = [c.name.split("_")[0] for c in unfinished if c.unfinished.process is None]
    todo = ([f"run `cpdagthink book --only {' '.join(stopped)}` again"] if stopped else []) + (
        ["wait for the execution under way to end"] if len(stopped) < len(unfinished) else [])
    raise PartialBookError(
        "no complete execution of " + "; ".join(f"{c.name} ({c.unfinished.describe()})" for c in unfinished)
        + ": " + " and ".join(todo) + ", or pass --allow-partial to publish the book with their pages saying so")


def render(root: Path = PROJECT_ROOT, allow_partial: bool = False) -> Path:
    """Build the book from the notebooks already executed into ``root/book`` (by ``cpdagthink book`` or by
    papermill; those ``root/_toc.yml`` lists), executing nothing: hide papermill's parameters cell, write the
    intro's account of the build's configurations and key figures and its build record
    (:func:`build_record.write_build_record`), then the HTML book and its single-file print. A chapter without
    a complete execution (:func:`~cpdagthink.book.chapter_state.read_chapter`) stops the build with
    :class:`PartialBookError`, unless ``allow_partial``: then its page is a note that says so, with no results,
    and the intro names it. A chapter whose newer execution stopped or is under way keeps its complete page,
    and the intro and the console say so."""
    require_checkout(root / "_toc.yml")  # a package install: say so, not "run `cpdagthink book`", which needs one too
    book = root / "book"
    chapters = read_chapters(book)
    if not chapters:
        raise ValueError(f"no executed chapter in {book}: run `cpdagthink book` (or papermill) first")
    if not allow_partial:
        _refuse_unfinished(chapters)
    for chapter in chapters:
        if chapter.unfinished:
            write_placeholder(book, chapter)
        else:
            hide_injected_parameters(book / f"{chapter.name}.ipynb")
        if chapter.attempt and not chapter.unfinished:
            print(f"cpdagthink render: {chapter.name}: its latest execution"
                  f"{chapter.attempt.describe().removeprefix('its execution')}; its page is its previous complete "
                  "execution", file=sys.stderr)
    records = {c.name: c.record for c in chapters if c.record is not None}
    others = [c for c in chapters if c.unfinished or c.stale or c.attempt]
    (book / SUMMARY).write_text(build_summary(records, others, never_executed(book, chapters)).source() + "\n",
                                encoding="utf-8")
    (book / PAPER_TABLE).write_text(markdown_table(paper_appendix()).source() + "\n", encoding="utf-8")
    build_record.write_build_record(book, [book / f"{c.name}.ipynb" for c in chapters if not c.unfinished])
    index = build_html(root)
    build_single_file(root)
    return index


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
