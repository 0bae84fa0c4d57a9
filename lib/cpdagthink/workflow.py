"""The book's grid as a Snakemake workflow: what ``workflow/Snakefile`` asks of the plan (:mod:`cpdagthink.book.plan`).

Snakemake's ``--config`` carries the book's parameters under papermill's names (``backend=openai limit=0
seeds=[0,1,2] backend_options="base_url=http://host:8000/v1 max_model_len=32768"``, what ``cpdagthink book -p``
takes) and ``only`` (chapter prefixes). :func:`plan_grid` plans
them once and returns the jobs: one per plan group (one backend x model x seed: the model is loaded once for
all its conditions and probes), one per chapter (executed from the records alone, ``--render-only``), then the
book. A group whose runs are all complete asks for no resource and its job loads no model (it finds nothing to
compute and writes its marker), so a book whose runs were computed elsewhere (a cluster, ``outputs/`` copied
back) renders without any model or GPU.

A group job's marker (``outputs/plan/<group>.done``) says it finished. Each job's input is a plan file
beside the markers (``groups/<group>.json``: its runs; ``chapters/<chapter>.json``: its parameters and runs;
a chapter also reads its groups' markers), written when the grid is planned where its content changes or its
output is stale (a group marked done whose runs are no longer all complete, a run folder or a record removed;
a chapter executed with other parameters, by ``make book`` or for another backend): new parameters or a lost
run always run what they need, and a second pass runs nothing.
"""

from __future__ import annotations

import fcntl
import json
import os
import shlex
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from .errors import CpdagthinkError
from .files import write_atomic
from .paths import OUTPUTS_ROOT
from .run.parameters import json_or_text

MARKERS = OUTPUTS_ROOT / "plan"
_GRID_LOCK = "cpdagthink-grid.lock"  # in .snakemake/: held by every main Snakemake of this workflow while it lives


class WorkflowConfigError(CpdagthinkError, ValueError):
    """A ``--config`` value the workflow cannot pass on (a key in a URL)."""


Runs = tuple[tuple[str, str], ...]  # a job's runs: each run folder with its rows' digest


def _plan(kind: str, name: str, runs: Runs, **fields: Any) -> dict[str, Any]:
    """What a job's plan file holds (see :meth:`Grid.write_plan_files`), as its JSON reads back."""
    return json.loads(json.dumps({kind: name, **fields, "runs": [{"folder": f, "rows_sha256": r} for f, r in runs]}))


def _update_plan_file(path: Path, plan: dict[str, Any], stale: str | None) -> bool:
    """Write ``plan`` to ``path`` unless it holds it already; when the job's output is ``stale`` (the reason),
    write it with that reason and the time, so its content differs from what Snakemake recorded when the job
    last ran (Snakemake takes an input newer than the output but of the same checksum as unchanged). Returns
    whether it wrote."""
    try:
        before = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        before = None
    if stale is None and isinstance(before, dict) and {k: v for k, v in before.items() if k != "stale"} == plan:
        return False
    record = {**plan, **({"stale": f"{stale} (planned at {time.time_ns()} ns)"} if stale else {})}
    write_atomic(path, json.dumps(record, indent=1, sort_keys=True) + "\n")
    return True


@dataclass(frozen=True)
class GroupJob:
    """One Snakemake job: the runs of one plan group, with the resources its backend takes (none once every
    run is complete)."""

    key: str
    complete: bool
    threads: int = 1
    gpu: int = 0
    api_slots: int = 0
    runs: Runs = ()
    backend: str = ""  # its kind: which row of the profile's group_limits sizes its runtime and memory

    @property
    def marker(self) -> Path:
        """The job's output: written when every run of the group is complete."""
        return MARKERS / f"{self.key}.done"

    @property
    def plan_file(self) -> Path:
        """The job's input: the runs it computes (:meth:`Grid.write_plan_files`)."""
        return MARKERS / "groups" / f"{self.key}.json"

    def plan(self) -> dict[str, Any]:
        return _plan("group", self.key, self.runs)


@dataclass(frozen=True)
class ChapterJob:
    """One chapter executed from records: its notebook's name, the groups whose runs it reads, the ``-p``
    parameters it declares and the runs it reads."""

    name: str
    groups: tuple[str, ...]
    parameters: dict[str, Any] = field(default_factory=dict)
    runs: Runs = ()

    def arguments(self) -> list[str]:
        """``cpdagthink book`` arguments that execute this chapter only, from its runs' records."""
        return ["--only", self.name, "--render-only", "--no-build", *parameter_flags(self.parameters)]

    @property
    def plan_file(self) -> Path:
        """The job's input besides its groups' markers: its parameters and runs (:meth:`Grid.write_plan_files`)."""
        return MARKERS / "chapters" / f"{self.name}.json"

    def plan(self) -> dict[str, Any]:
        return _plan("chapter", self.name, self.runs, parameters=self.parameters)

    def executed_otherwise(self, book: Path) -> bool:
        """Whether ``book`` holds this chapter executed with other parameters than this job gives it (a
        ``make book`` since, a book of another backend)."""
        from .book.build import executed_parameters
        from .cli import book_papermill_parameters

        executed = book / f"{self.name}.ipynb"
        return executed.is_file() and executed_parameters(executed) != book_papermill_parameters(
            self.arguments())[self.name]


@dataclass(frozen=True)
class Grid:
    """What one ``--config`` plans to: its group jobs and chapter jobs."""

    only: list[str]
    parameters: dict[str, Any]
    groups: dict[str, GroupJob]
    chapters: dict[str, ChapterJob]
    limits: dict[str, dict[str, int]] = field(default_factory=dict)  # runtime and mem_mb per backend, if given

    def limit_resources(self) -> dict[str, Any]:
        """The group rule's ``runtime`` and ``mem_mb``, each a function of its wildcards, from the kind of the
        group (:func:`group_limits`); none when the config gives no limits."""
        if not self.limits:
            return {}
        return {name: (lambda wildcards, name=name: self.limits[self.groups[wildcards.group].backend][name])
                for name in _LIMITS}

    def group_arguments(self, key: str) -> list[str]:
        """``cpdagthink plan`` arguments that compute the group ``key``'s runs (what its job calls)."""
        return ["--only", *self.only, *parameter_flags(self.parameters), "--group", key, "--execute"]

    def write_plan_files(self, book: Path) -> list[Path]:
        """Write each job's plan file (its input, beside the groups' markers) where its content differs, and
        where its output is stale: a group marked done whose runs are no longer all complete (a run folder or a
        record removed), a chapter in ``book`` executed with other parameters. Snakemake runs again a job whose
        input changed (an input that is missing while the output exists is not enough), and each job after it;
        a file left as it is keeps its content and time, so a second pass does nothing. Returns the files
        written."""
        jobs = [*((job, "a run is not complete though the group is marked done"
                   if not job.complete and job.marker.is_file() else None) for job in self.groups.values()),
                *((job, "the executed chapter was given other parameters"
                   if job.executed_otherwise(book) else None) for job in self.chapters.values())]
        return [job.plan_file for job, stale in jobs if _update_plan_file(job.plan_file, job.plan(), stale)]


def _plain(value: Any) -> Any:
    """A ``--config`` value as the book takes it: Snakemake reads ``KEY=VALUE`` as YAML with every scalar a
    string (``seeds=[0,1]`` gives ``["0", "1"]``), so each string is read as JSON where it is JSON, else kept
    as text, the rule of ``cpdagthink book -p``."""
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return json_or_text(value) if isinstance(value, str) else value


def book_parameters(config: Mapping[str, Any]) -> tuple[list[str], dict[str, Any]]:
    """``(only, parameters)`` from Snakemake's ``config``; ``backend_options`` as a dict (given as a mapping, a
    JSON object or ``KEY=VALUE`` words: ``make grid BACKEND_OPTIONS=...`` passes words). A URL with user info is
    refused: Snakemake prints and stores job parameters, so the key goes in a variable instead
    (``OPENAI_API_KEY`` or ``api_key_env``'s); a key in a query string is refused by
    :func:`~cpdagthink.credentials.check_url`, quoting none of it."""
    from .credentials import strip_credentials
    from .run.parameters import coerce_list, coerce_options

    parameters = {k: _plain(v) for k, v in config.items() if k not in ("only", GROUP_LIMITS, "budgets")}
    if config.get("budgets"):  # `make grid BUDGETS=paper`: the named set, as `book --budgets` reads it
        from .method.budgets import budget_set

        parameters = {**budget_set(str(config["budgets"])).as_parameters(), **parameters}
    only = [str(o) for o in coerce_list(_plain(config.get("only")), "only") or []]
    if "backend_options" in parameters:
        parameters["backend_options"] = coerce_options(parameters["backend_options"])
    urls = coerce_list(parameters.get("backend_options", {}).get("base_url"), "base_url") or []
    if any(strip_credentials(str(u)) != str(u) for u in urls):
        raise WorkflowConfigError("base_url holds user info, which Snakemake would print and store: give the key "
                                  "in OPENAI_API_KEY (api.openai.com) or in a variable named with api_key_env (any "
                                  "other host), and the URL without it")
    return only, parameters


def parameter_flags(parameters: Mapping[str, Any]) -> list[str]:
    """``-p name=value`` for each parameter, the value as JSON (read back as such by the command line)."""
    return [word for name, value in parameters.items() for word in ("-p", f"{name}={json.dumps(value)}")]


def shell_words(words: list[str]) -> str:
    """``words`` as one shell command line in which each is data (model output and CSV text never run)."""
    return " ".join(shlex.quote(w) for w in words)


GROUP_LIMITS = "group_limits"  # the --config/--configfile key of a scheduler's runtime and memory per group kind
_LIMITS = ("runtime", "mem_mb")


def group_limits(config: Mapping[str, Any], backends: set[str]) -> dict[str, dict[str, int]]:
    """The runtime (minutes) and memory (MB) a scheduler gives a group job of each backend in ``backends``:
    ``config["group_limits"]`` (the SLURM profile's ``group-limits.yaml``) maps a backend, or ``default``, to
    both. Empty when the config has none (a profile that sets no limits: Snakemake's defaults apply).

    Raises WorkflowConfigError naming the entry for a kind with no row and no default, or a limit that is
    not a whole number of at least 1."""
    table = _plain(config.get(GROUP_LIMITS))
    if not table:
        return {}
    if not isinstance(table, Mapping):
        raise WorkflowConfigError(f"{GROUP_LIMITS} maps a backend (or default) to its runtime and mem_mb, not {table!r}")
    limits = {}
    for backend in sorted(backends):
        row = table.get(backend, table.get("default"))
        if not isinstance(row, Mapping) or set(row) != set(_LIMITS):
            raise WorkflowConfigError(f"{GROUP_LIMITS}: {backend} groups need runtime and mem_mb (a row of their own "
                                      f"or a default row), not {row!r}")
        for name in _LIMITS:
            if isinstance(row[name], bool) or not isinstance(row[name], int) or row[name] < 1:
                raise WorkflowConfigError(f"{GROUP_LIMITS}: {backend}'s {name} must be a whole number of at least "
                                          f"1, not {row[name]!r}")
        limits[backend] = {name: row[name] for name in _LIMITS}
    return limits


def job_resources(config: Any) -> dict[str, int]:
    """``threads``, ``gpu`` and ``api_slots`` of a job running ``config`` (a :class:`cpdagthink.run.config.RunConfig`),
    as its backend's family answers (:meth:`cpdagthink.backends.base.Backend.job_resources`: vLLM's
    tensor-parallel GPUs, llama.cpp's CPU threads, one of the profile's ``api_slots`` for a service, each
    sending up to its backend's ``max_concurrency`` requests at a time)."""
    from .backends import backend_class

    return {"threads": 1, "gpu": 0, "api_slots": 0,
            **backend_class(config.backend).job_resources(config.backend_arguments())}


def _runs(planned: list[Any]) -> Runs:
    """Each planned run (:class:`cpdagthink.book.plan.PlannedRun`) as its folder and rows' digest."""
    return tuple((r.folder, r.instances.sha256) for r in planned)


def plan_grid(config: Mapping[str, Any]) -> Grid:
    """The jobs of the book that ``config`` describes (every chapter, or those ``only`` selects)."""
    from .book.build import notebook_parameters, select_notebooks
    from .book.plan import groups as plan_groups
    from .book.plan import plan_book

    only, parameters = book_parameters(config)
    notebooks = select_notebooks(only or None)
    runs = plan_book({}, only or None, parameters)
    groups = {}
    for key, members in plan_groups(runs).items():
        complete = all(r.complete for r in members)
        resources = {} if complete else job_resources(members[0].config)
        groups[key] = GroupJob(key, complete, **resources, runs=_runs(members), backend=members[0].config.backend)
    chapters = {}
    for notebook in notebooks:
        declared = notebook_parameters(notebook)
        reads = [r for r in runs if notebook.stem in r.chapters]
        chapters[notebook.stem] = ChapterJob(notebook.stem, tuple(sorted({r.group for r in reads})),
                                             {k: v for k, v in parameters.items() if k in declared},
                                             _runs(reads))
    limits = group_limits(config, {job.backend for job in groups.values()})
    return Grid([n.stem for n in notebooks], parameters, groups, chapters, limits)


def release_stale_locks(snakemake_dir: Path) -> tuple[list[Path], str | None]:
    """Hold this workflow's own lock (an exclusive ``flock`` on a file in ``snakemake_dir``, released by the
    kernel when the process ends, however it ends) for the life of this process, and, when it is free, remove
    Snakemake's locks (``locks/``, what ``snakemake --unlock`` removes): every main Snakemake of this workflow
    holds the flock while it runs, so locks found with it free belong to a Snakemake that was killed. The file
    names the host and pid of its last holder; a lock taken on another host is left (a file system may not share
    ``flock`` across hosts). Returns the locks removed (none when another Snakemake holds the flock: its locks
    are live, and Snakemake refuses as usual) and, for a lock left from another host, what to do about it."""
    global _held
    snakemake_dir.mkdir(parents=True, exist_ok=True)
    handle = (snakemake_dir / _GRID_LOCK).open("a+", encoding="utf-8")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        return [], None
    _held = handle  # kept open, so held, until the process ends
    handle.seek(0)
    host, _, _ = handle.read().partition(" ")
    stale = sorted((snakemake_dir / "locks").glob("*.lock"))
    if stale and host and host != socket.gethostname():
        return [], (f"{snakemake_dir}/locks is held by a Snakemake started on {host}: if none runs there any more, "
                    "release it with `make grid SNAKEMAKE_ARGS=--unlock` (snakemake --unlock)")
    handle.seek(0)
    handle.truncate()
    handle.write(f"{socket.gethostname()} {os.getpid()}\n")
    handle.flush()
    for path in stale:
        path.unlink(missing_ok=True)
    return stale, None


_held: Any = None
