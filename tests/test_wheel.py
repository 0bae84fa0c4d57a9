"""The package as a wheel: ``pip install .`` (not editable) gives a working ``cpdagthink`` that needs no checkout,
its prompts, graph structures and the paper's reported figures shipped as package data, and every import a
condition needs among its declared dependencies.

The wheel goes into a new venv that sees nothing but what pip installs there from a local wheelhouse, offline:
the wheelhouse holds this environment's installed distributions repacked as wheels, those that the wheel's own
``Requires-Dist`` reaches (with its extras) and no others, and pip resolves the wheel against it. A module that
a command imports but that no declared requirement brings is then missing there, as after ``pip install .``."""

from __future__ import annotations

import csv
import email.parser
import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from cpdagthink.method.prompts import file_hash, raw
from cpdagthink.paths import GRAPHS, NEEDS_CHECKOUT, PAPER_REPORTED, PROMPTS

ROOT = Path(__file__).parents[1]
# What pip writes at install time: not part of a wheel.
_INSTALL_RECORDS = {"INSTALLER", "REQUESTED", "RECORD", "direct_url.json"}


def _build_wheel(tmp_path: Path) -> Path:
    """The wheel of a copy of the checkout (what ``pip install .`` builds), offline: no index, and the build
    backend this environment already has (``--no-build-isolation``). The copy keeps the build's own files
    (``build/``, the egg-info) out of the checkout."""
    source = tmp_path / "source"
    shutil.copytree(ROOT / "lib", source / "lib", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, source / name)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-index", "--no-build-isolation",
                    "--wheel-dir", str(tmp_path / "wheels"), str(source)], check=True, capture_output=True)
    (wheel,) = (tmp_path / "wheels").glob("cpdagthink-*.whl")
    return wheel


def declared_requirements(wheel: Path) -> list[Requirement]:
    """The wheel's ``Requires-Dist`` lines, as pip reads them."""
    with zipfile.ZipFile(wheel) as archive:
        (name,) = (n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        metadata = email.parser.Parser().parsestr(archive.read(name).decode())
    return [Requirement(line) for line in metadata.get_all("Requires-Dist") or ()]


def reached(requirements: list[Requirement], extras: tuple[str, ...] = ()) -> dict[str, importlib.metadata.Distribution]:
    """This environment's distributions that ``requirements`` (with ``extras`` asked for) reach, transitively,
    by canonical name: what pip would install from an index holding exactly these versions."""
    found: dict[str, importlib.metadata.Distribution] = {}
    todo = [(r, extras) for r in requirements]
    done: set[tuple[str, tuple[str, ...]]] = set()
    while todo:
        requirement, asked = todo.pop()
        if requirement.marker and not any(requirement.marker.evaluate({"extra": e}) for e in asked or ("",)):
            continue
        name, wanted = canonicalize_name(requirement.name), tuple(sorted(requirement.extras))
        if (name, wanted) in done:
            continue
        done.add((name, wanted))
        found[name] = importlib.metadata.distribution(requirement.name)
        todo += [(Requirement(line), wanted) for line in found[name].requires or ()]
    return found


def repack(dist: importlib.metadata.Distribution, folder: Path) -> Path:
    """An installed distribution as a wheel again: the files its RECORD lists under site-packages (not the
    scripts pip generates from its entry points, not the byte code), with their recorded hashes, stored
    uncompressed (it is read once, locally), under the tag its WHEEL file names."""
    tags = [t.split("-") for t in re.findall(r"^Tag: (\S+)$", dist.read_text("WHEEL") or "", flags=re.M)]
    # the compressed tag set of a wheel's name (py2.py3-none-any): each part's values, in order, once
    tag = "-".join(".".join(dict.fromkeys(part)) for part in zip(*tags)) if tags else "py3-none-any"
    name = re.sub(r"[-_.]+", "_", dist.metadata["Name"])
    wheel = folder / f"{name}-{dist.version}-{tag}.whl"
    record, info = [], None
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_STORED) as archive:
        for path in dist.files or ():
            if path.parts[0] == ".." or "__pycache__" in path.parts:
                continue
            if path.parent.name.endswith(".dist-info"):
                info = path.parent.as_posix()
                if path.name in _INSTALL_RECORDS:
                    continue
            archive.write(dist.locate_file(path), path.as_posix())
            record.append(f"{path.as_posix()},{path.hash.mode}={path.hash.value},{path.size}" if path.hash
                          else f"{path.as_posix()},,")
        assert info, f"{dist.metadata['Name']} lists no .dist-info folder in its RECORD"
        archive.writestr(f"{info}/RECORD", "\n".join([*record, f"{info}/RECORD,,"]) + "\n")
    return wheel


def isolated_install(tmp_path: Path, wheel: Path, extras: tuple[str, ...] = ()) -> Path:
    """``pip install`` of ``wheel`` (with ``extras``) into a new venv under ``tmp_path``, offline, from a
    wheelhouse of what its declared requirements reach (module docstring). The venv has no access to any other
    site-packages; pip runs isolated from its configuration (no index or find-links of this machine's).
    Installing again with other extras adds theirs. Returns the venv's ``bin`` folder."""
    venv, house = tmp_path / "venv", tmp_path / "wheelhouse"
    if not venv.exists():
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    house.mkdir(exist_ok=True)
    present = {canonicalize_name(p.name.split("-")[0]) for p in house.glob("*.whl")}
    for name, dist in reached(declared_requirements(wheel), extras).items():
        if name not in present:
            repack(dist, house)
    target = f"{wheel}[{','.join(extras)}]" if extras else str(wheel)
    done = subprocess.run([sys.executable, "-m", "pip", "--isolated", "--python", str(venv / "bin" / "python"),
                           "install", "--no-index", "--find-links", str(house), "--no-compile", target],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    return venv / "bin"


class Installed:
    """Commands of an isolated install, run from a folder outside the checkout with a home of their own."""

    def __init__(self, bin_dir: Path, tmp_path: Path):
        self.bin_dir, self.home, self.elsewhere = bin_dir, tmp_path / "home", tmp_path / "elsewhere"
        self.elsewhere.mkdir(exist_ok=True)
        self.env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(self.home), "HF_HUB_OFFLINE": "1",
                    **{k: os.environ[k] for k in ("LANG", "TMPDIR") if k in os.environ}}

    def run(self, program: str, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run([str(self.bin_dir / program), *args], cwd=self.elsewhere, env=self.env,
                              capture_output=True, text=True, timeout=600)

    def cpdagthink(self, *args: str) -> str:
        done = self.run("cpdagthink", *args)
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    def python(self, code: str) -> str:
        done = self.run("python", "-c", code)
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    def importable(self, module: str) -> bool:
        return self.python(f"import importlib.util; print(importlib.util.find_spec({module!r}) is not None)") == "True\n"

    def runs(self) -> list[Path]:
        return sorted((self.home / ".cache" / "cpdagthink" / "runs").iterdir())  # outside a checkout: the user's cache


def _records(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "records.jsonl").read_text().splitlines()]


def test_repacking_an_installed_distribution_gives_back_its_files(tmp_path):
    """The wheelhouse's wheels hold what was installed: packaging's modules, its metadata, a RECORD of both."""
    dist = importlib.metadata.distribution("packaging")
    wheel = repack(dist, tmp_path)
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "packaging/requirements.py" in names and any(n.endswith(".dist-info/METADATA") for n in names)
    assert not any("__pycache__" in n or n.endswith("/INSTALLER") for n in names)
    record = next(n for n in names if n.endswith(".dist-info/RECORD"))
    listed = {row[0] for row in csv.reader(zipfile.ZipFile(wheel).read(record).decode().splitlines())}
    assert listed == names
    assert wheel.name.startswith(f"packaging-{dist.version}-")


def test_what_the_requirements_reach_follows_markers_and_extras():
    reach = reached([Requirement("pydantic==2.12.5")])
    assert {"pydantic", "pydantic-core", "annotated-types", "typing-extensions"} <= set(reach)
    assert "email-validator" not in reach  # pydantic[email] only
    assert reached([Requirement('pytest; extra == "test"')]) == {}
    assert "pytest" in reached([Requirement('pytest; extra == "test"')], ("test",))


@pytest.mark.slow
def test_the_installed_wheel_runs_each_kind_of_condition_from_another_folder_without_the_checkout(test_csv, tmp_path):
    wheel = _build_wheel(tmp_path)
    shipped = set(zipfile.ZipFile(wheel).namelist())
    for folder, pattern in ((PROMPTS, "*.md"), (GRAPHS, "*.edges")):
        files = sorted(Path(str(folder)).glob(pattern))
        assert files and {f"cpdagthink/{f.relative_to(ROOT / 'lib' / 'cpdagthink')}" for f in files} <= shipped
    assert "cpdagthink/data/paper_reported.csv" in shipped

    installed = Installed(isolated_install(tmp_path, wheel), tmp_path)
    where = installed.python("import cpdagthink; print(cpdagthink.__file__)")
    assert Path(where).resolve().is_relative_to(installed.bin_dir.parent), where  # the wheel's copy, not the checkout's
    assert not installed.importable("pytest") and not installed.importable("openai")  # it sees nothing else

    request = json.loads(installed.cpdagthink("prompt", "--condition", "structured", "--row", "0", "--data",
                                              str(test_csv)))
    assert raw("pc_scaffold").splitlines()[0] in json.dumps(request, ensure_ascii=False)
    # What a condition imports follows from its flow and whether it is constrained: a run of the first condition
    # of each kind (structured among them) covers all eight in half the time.
    kinds = json.loads(installed.python("import json; from cpdagthink.method.conditions import CONDITIONS; print("
                                        "json.dumps({n: [c.flow.value, c.constrained] for n, c in CONDITIONS.items()}))"))
    first_of_kind: dict[tuple, str] = {}
    for name, kind in kinds.items():
        first_of_kind.setdefault(tuple(kind), name)
    conditions = list(first_of_kind.values())
    assert "structured" in conditions, kinds
    for condition in conditions:
        installed.cpdagthink("run", "--condition", condition, "--backend", "reference", "--limit", "2",
                             "--data", str(test_csv))
    runs = installed.runs()
    assert len(runs) == len(conditions)
    for run in runs:
        records = _records(run)
        assert len(records) == 2 and all(r["answer"] for r in records), run.name
        for record in records:  # the packaged prompts are the checkout's, byte for byte
            assert record["prompt_sha256"] and all(file_hash(n) == h for n, h in record["prompt_sha256"].items())

    generated = installed.elsewhere / "asia8.csv"
    installed.cpdagthink("generate", "--family", "asia8", "--seed", "0", "--per-graph", "4", "--out", str(generated))
    assert "ASIA" in generated.read_text()
    figures = installed.python("from cpdagthink.analysis import tables; print(len(tables.paper()))")
    assert int(figures) == len(PAPER_REPORTED.read_text(encoding="utf-8").splitlines()) - 1
    for command in (["plan", "--only", "06"], ["plan"], ["render"], ["book", "--only", "01"]):  # these need a checkout
        done = installed.run("cpdagthink", *command)
        assert done.returncode == 2 and not done.stdout, done.stdout + done.stderr
        assert done.stderr.startswith(f"cpdagthink {command[0]}: error: ") and NEEDS_CHECKOUT in done.stderr, done.stderr

    _the_api_extra_runs_the_method_against_a_server(installed, tmp_path, wheel, test_csv)


def _the_api_extra_runs_the_method_against_a_server(installed: Installed, tmp_path: Path, wheel: Path,
                                                    test_csv: Path) -> None:
    """``pip install '.[api]'`` then the structured condition through ``--backend openai``, against a loopback
    server that answers as the API does."""
    from reasoning_api_server import ReasoningAPIServer

    isolated_install(tmp_path, wheel, ("api",))
    assert installed.importable("openai") and not installed.importable("llama_cpp")
    before = set(installed.runs())
    with ReasoningAPIServer() as server:
        installed.cpdagthink("run", "--condition", "structured", "--backend", "openai", "--model", "gpt-5.4-mini",
                             "--base-url", server.url, "--limit", "2", "--data", str(test_csv))
    assert server.rejected == 0 and len(server.requests) == 4  # two instances, two turns
    (run,) = set(installed.runs()) - before
    records = _records(run)
    assert len(records) == 2 and all(r["answer"] for r in records)
