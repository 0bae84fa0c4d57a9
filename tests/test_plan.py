"""The plan: each chapter's runs declared once, listed exactly as the book creates them, grouped and executed."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from cpdagthink.book import build as book, chapters, plan
from cpdagthink.cli import main
from cpdagthink.errors import CpdagthinkError
from cpdagthink.run.config import RunConfig
from cpdagthink.run.runfolder import METADATA, RECORDS, SUMMARY


@pytest.fixture()
def roots(test_csv, tmp_path, monkeypatch):
    """Run folders and cache in a temporary root, on the real test split."""
    monkeypatch.setenv("CORR2CAUSE_CSV", str(test_csv))
    return {"out_root": str(tmp_path / "runs"), "cache_dir": str(tmp_path / "cache")}


def _folders(runs: list[plan.PlannedRun]) -> list[str]:
    return [r.folder for r in runs]


def _built_run_folders(tmp_path, monkeypatch, overrides: dict) -> set[str]:
    """Execute every chapter with ``book.build`` (the HTML book is not built: pages are not compared here) and
    return the run folders the notebooks created."""
    monkeypatch.setattr(book, "render", lambda root, *_: root / "_build" / "html" / "index.html")
    book.build(overrides, root=tmp_path)
    return {str(p) for p in (tmp_path / "runs").iterdir()}


@pytest.mark.slow
def test_the_plan_lists_exactly_the_run_folders_the_default_book_creates(roots, tmp_path, monkeypatch):
    """The default book's parameters, on the reference backend in place of the local model."""
    overrides = {"backend": "reference", **roots}
    planned = plan.plan_book(overrides)
    assert not any(r.complete for r in planned)
    assert _built_run_folders(tmp_path, monkeypatch, overrides) == set(_folders(planned))
    assert all(r.complete for r in plan.plan_book(overrides))


@pytest.mark.slow
def test_the_plan_lists_exactly_what_a_book_with_every_optional_part_creates(roots, tmp_path, monkeypatch):
    """Two seeds, an OOD split, a stress set, the validity-preserving probe and the forced tool choice: every
    part a chapter can declare (but the extra models, which the reference backend cannot be)."""
    overrides = {"backend": "reference", "limit": 6, "seeds": [0, 1], "temperature": 0.7, **roots}
    parameters = {"ood_split": "generated:paraphrase", "stress_families": ["alarm7"], "stress_graphs": 1,
                  "stress_per_graph": 2, "probes": ["scramble_full", "swap_valid_cpdag"], "compare_tool_choice": True}
    planned = plan.plan_book(overrides, parameters=parameters)
    monkeypatch.setattr(book, "render", lambda root, *_: root / "_build" / "html" / "index.html")
    book.build(overrides, root=tmp_path, parameters=parameters)
    assert {str(p) for p in (tmp_path / "runs").iterdir()} == set(_folders(planned))
    assert {r.group for r in planned} == {"reference-default-seed0", "reference-default-seed1"}


def _every_cell(source: Path, path: Path, per_cell: int) -> Path:
    """A Corr2Cause CSV at ``path`` of the first ``per_cell`` rows of ``source`` in each (variable count, gold
    label) cell, in split order: a whole split on which every chapter has rows of each size and label to read."""
    import csv
    from collections import Counter

    taken: Counter = Counter()
    rows = []
    for instance in RunConfig(data=str(source), limit=0).instances():
        cell = (instance.num_variables, instance.label)
        if taken[cell] < per_cell:
            taken[cell] += 1
            rows.append(int(instance.id.rpartition("-")[2]))
    with open(source, newline="", encoding="utf-8") as f:
        table = list(csv.DictReader(f))
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=list(table[0]))
        writer.writeheader()
        writer.writerows(table[i] for i in rows)
    return path


@pytest.mark.slow
def test_the_plan_lists_exactly_the_run_folders_of_the_reference_book_on_the_whole_split(roots, tmp_path,
                                                                                        monkeypatch, test_csv):
    """``make book BACKEND=reference LIMIT=0``: every chapter executed on the whole of a split (the test split's
    first four rows of every variable count and label, so each notebook takes its whole-split path over every
    size in seconds) creates exactly the folders planned; on the real split the plan lists the same runs, each
    over all its rows (executing them is ``benchmarks/golden.py``'s scale, not this test's)."""
    data = _every_cell(test_csv, tmp_path / "every-cell.csv", per_cell=4)
    overrides = {"backend": "reference", "limit": 0, "data": str(data), **roots}
    planned = plan.plan_book(overrides)
    assert {r.instances.count for r in planned} == {len(RunConfig(data=str(data), limit=0).all_instances())}
    assert _built_run_folders(tmp_path, monkeypatch, overrides) == set(_folders(planned))
    whole = plan.plan_book({"backend": "reference", "limit": 0, **roots})

    def runs(planned):
        return sorted((r.config.condition, r.config.probe or "", r.config.seed, tuple(r.chapters), r.group)
                      for r in planned)

    assert runs(whole) == runs(planned)
    assert {r.instances.count for r in whole} == {len(RunConfig(data=str(test_csv), limit=0).all_instances())}


def test_a_run_several_chapters_read_appears_once_with_every_chapter(roots):
    planned = plan.plan_book({"backend": "reference", **roots})
    assert len(set(_folders(planned))) == len(planned) == 13
    structured = next(r for r in planned if r.config.condition == "structured" and r.config.probe is None)
    assert structured.chapters == ["01_main_results", "02_complexity", "03_ablations", "04_probes", "05_audit",
                                   "06_failure_gallery"]
    assert {r.config.probe for r in planned if r.chapters == ["04_probes"]} == {
        "scramble_full", "scramble_skeleton", "scramble_v_structures", "scramble_directed", "drop_premise"}
    assert {r.group for r in planned} == {"reference-default-seed0"}


def test_the_default_book_plans_the_local_model_and_the_reference_agent_apart(roots):
    """On the local model, the reference agent's rows (chapters 01 and 04) are a group of their own; the
    model's runs are those of the reference book's plan, on the local backend."""
    local = plan.plan_book(roots)
    groups = plan.groups(local)
    assert list(groups) == ["local-default-seed0", "reference-default-seed0"]
    assert {c for r in groups["reference-default-seed0"] for c in r.chapters} == {"01_main_results", "04_probes"}
    reference = plan.plan_book({"backend": "reference", **roots})

    def runs(planned):
        return sorted((r.config.condition, r.config.probe or "", r.config.seed, tuple(r.chapters)) for r in planned)

    assert runs(groups["local-default-seed0"]) == runs(reference)
    assert {r.config.decoding.temperature for r in groups["local-default-seed0"]} == {0.7}  # the model's sampling


def test_only_selects_chapters_and_a_chapter_ignores_parameters_it_does_not_declare(roots):
    gallery = plan.plan_book({"backend": "reference", **roots}, only=["06"])
    assert [r.config.condition for r in gallery] == ["structured", "baseline_enhanced", "twoturn_prose_pc"]
    assert all(r.chapters == ["06_failure_gallery"] for r in gallery)
    # probes is 04's parameter: 01 runs as without it; a chapter's own parameter changes its runs
    both = plan.plan_book({"backend": "reference", **roots}, only=["01", "04"], parameters={"probes": ["drop_premise"]})
    alone = plan.plan_book({"backend": "reference", **roots}, only=["01"])
    assert [r.folder for r in both if "01_main_results" in r.chapters] == _folders(alone)
    assert [r.config.probe for r in both if r.chapters == ["04_probes"]] == ["drop_premise"]
    with pytest.raises(ValueError, match="no selected chapter takes the parameter 'probes'"):
        plan.plan_book({"backend": "reference", **roots}, only=["01"], parameters={"probes": ["drop_premise"]})


def test_extra_models_and_the_forced_tool_choice_are_planned_without_building_a_backend(roots):
    planned = plan.plan_book({"backend": "openai", "model": "gpt-4o", **roots}, only=["03"],
                             parameters={"models": ["gpt-4o-mini"], "compare_tool_choice": True,
                                         "conditions": ["structured", "baseline_enhanced"]})
    assert {g: [(r.config.condition, r.config.decoding.tool_choice) for r in runs]
            for g, runs in plan.groups(planned).items()} == {
        "openai-gpt-4o-seed0": [("structured", "auto"), ("baseline_enhanced", "auto"), ("structured", "forced")],
        "openai-gpt-4o-mini-seed0": [("structured", "auto"), ("baseline_enhanced", "auto")]}
    assert planned[-1].folder.endswith("tool-forced")


def test_a_model_that_cannot_serve_a_condition_plans_without_it(roots):
    """o3 always reasons: ``no_thinking`` is refused by its profile, so chapter 03 neither plans nor reads it."""
    planned = plan.plan_book({"backend": "openai", "model": "o3", **roots}, only=["03"])
    assert "no_thinking" not in {r.config.condition for r in planned}
    assert "structured" in {r.config.condition for r in planned}


def test_an_endpoint_with_options_is_a_group_of_its_own_and_file_name_safe(roots):
    planned = plan.plan_book({"backend": "openai", "model": "Qwen/Qwen3.5-27B", "backend_options": {"regex_mode": "vllm"},
                              **roots},
                             only=["06"])
    (group,) = plan.groups(planned)
    assert group.startswith("openai-Qwen_Qwen3.5-27B-seed0-") and "/" not in group


def test_execute_computes_what_is_missing_and_the_plan_then_says_complete(roots):
    overrides = {"backend": "reference", **roots}
    planned = plan.plan_book(overrides, only=["06"])
    plan.execute(planned[:2], progress=False)
    assert [r.complete for r in plan.plan_book(overrides, only=["06"])] == [True, True, False]
    for run in planned[:2]:  # the rows planned are the rows the run records
        metadata = json.loads((Path(run.folder) / METADATA).read_text())
        assert metadata["instances_sha256"] == run.instances.sha256 and metadata["instances"] == run.instances.count
    # a lost record, or a session that did not finish, makes a run incomplete again
    records, summary = Path(planned[0].folder) / RECORDS, Path(planned[1].folder) / SUMMARY
    records.write_text("".join(records.read_text().splitlines(keepends=True)[:-1]))
    summary.write_text(summary.read_text().replace('"finished"', '"interrupted"'))
    assert [r.complete for r in plan.plan_book(overrides, only=["06"])] == [False, False, False]


def test_execute_refuses_rows_other_than_those_planned(roots):
    (run, *_) = plan.plan_book({"backend": "reference", **roots}, only=["06"])
    changed = run.model_copy(update={"instances": run.instances.model_copy(update={"sha256": "0" * 64})})
    with pytest.raises(CpdagthinkError, match="not those planned"):
        plan.execute([changed], progress=False)


def test_cli_prints_the_plan_and_executes_one_group(roots, capsys):
    flags = ["--backend", "reference", "--only", "06", "-p", f"out_root={roots['out_root']}",
             "-p", f"cache_dir={roots['cache_dir']}"]
    assert main(["plan", *flags]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert [set(r) for r in printed] == [{"chapters", "config", "instances", "folder", "complete", "group",
                                          "not_applied"}] * 3
    assert printed[0]["config"]["condition"] == "structured" and printed[0]["complete"] is False
    assert main(["plan", *flags, "--group", "nosuch", "--execute"]) == 2
    assert "no group 'nosuch' in this plan; its groups are: reference-default-seed0" in capsys.readouterr().err
    assert main(["plan", *flags, "--group", "reference-default-seed0", "--execute"]) == 0
    capsys.readouterr()
    assert main(["plan", *flags]) == 0
    assert all(r["complete"] for r in json.loads(capsys.readouterr().out))


def test_a_notebook_reads_its_runs_by_part_and_key_in_the_order_declared(roots):
    namespace = {**chapters.chapter_values(chapters.NOTEBOOKS / "04_probes.ipynb", {"backend": "reference", **roots}),
                 "probes": '["drop_premise", "scramble_full"]'}  # as papermill passes a list: text
    parts = plan.run_chapter("04_probes", namespace, progress=False)
    assert list(parts) == ["runs"]  # the reference backend is the reference agent: no second part
    assert list(parts["runs"]) == [("unprobed", 0), ("drop_premise", 0), ("scramble_full", 0)]
    assert all(r.intervention.name == "drop_premise" for r in parts["runs"][("drop_premise", 0)])
    assert [r.id for r in parts["runs"][("unprobed", 0)]] == [i.id for i in plan.declared(
        "04_probes", namespace)[0].config.instances()]


@pytest.mark.slow
def test_a_chapter_renders_from_records_alone_once_its_planned_groups_are_executed(roots, tmp_path, monkeypatch):
    """What the workflow does: `plan --group KEY --execute` for each group, then the chapter render-only (a run
    the chapter read outside its plan would fail it, naming the run folder)."""
    flags = ["--backend", "reference", "--only", "06", "-p", f"out_root={roots['out_root']}",
             "-p", f"cache_dir={roots['cache_dir']}"]
    for group in plan.groups(plan.plan_book({"backend": "reference", **roots}, only=["06"])):
        assert main(["plan", *flags, "--group", group, "--execute"]) == 0
    monkeypatch.setattr(book, "render", lambda root, *_: root / "_build" / "html" / "index.html")
    book.build({"backend": "reference", **roots}, only=["06"], root=tmp_path, render_only=True)
    assert (tmp_path / "book" / "06_failure_gallery.ipynb").is_file()


def test_render_only_and_run_agree_on_every_folder_of_the_plan(roots, monkeypatch):
    """The same server at another address: the plan names the same folders and groups, each complete, and
    render-only reads every one of them as running would, with no model call."""
    from reasoning_api_server import ReasoningAPIServer

    from cpdagthink.book import experiments as ex

    with ReasoningAPIServer() as server:
        given = {"backend": "openai", "model": "gpt-5-mini", "limit": 4, **roots}
        planned = plan.plan_book({**given, "backend_options": {"base_url": [server.url]}}, only=["06"])
        plan.execute(planned, progress=False)
        asked = len(server.requests)
        alias = plan.plan_book({**given, "backend_options": {"base_url": [server.url.replace("127.0.0.1", "localhost")]}},
                               only=["06"])
        assert [(r.folder, r.group, r.complete) for r in alias] == [(r.folder, r.group, True) for r in planned]
        ran = [ex.run(r.config, progress=False) for r in alias]
        monkeypatch.setenv(ex.ENV_RENDER_ONLY, "1")
        assert [ex.run(r.config) for r in alias] == ran and all(ran)
        assert len(server.requests) == asked


def test_a_book_on_an_api_computes_every_chapters_api_runs_first_and_leaves_the_others_to_their_chapters(roots):
    from loopback_api import LoopbackAPI

    with LoopbackAPI() as server:
        overrides = {"backend": "openai", "model": "gpt-4.1-mini", "limit": 2,
                     "backend_options": {"base_url": server.url}, **roots}
        computed = plan.execute_streamed(overrides, only=["01", "03"])
    after = plan.plan_book(overrides, only=["01", "03"])
    assert computed and {r.config.backend for r in computed} == {"openai"}
    assert {r.folder for r in after if r.complete} == {r.folder for r in computed}
    assert {r.config.backend for r in after if not r.complete} == {"reference"}  # its chapter computes it
    assert server.peak_in_flight > 1


def test_an_ablation_the_backend_does_not_apply_is_flagged_by_the_plan_with_the_reason(roots, capsys):
    """A generic OpenAI-compatible server is sent no regex unless ``regex_mode=vllm``: no_constrained_decoding
    then sends Structured Thinking's own turn 1, so its plan entry says it is not applied and why (what its page
    says too); through a vLLM server, and for every other condition, the entry flags nothing."""
    conditions = {"conditions": ["structured", "no_constrained_decoding", "minimal_instruction"]}
    generic = plan.plan_book({"backend": "openai", "model": "Qwen/Qwen3.5-27B", **roots}, only=["03"],
                             parameters=conditions)
    assert {r.config.condition: r.not_applied for r in generic} == {
        "structured": "", "minimal_instruction": "",
        "no_constrained_decoding": "not applied on this backend: turn 1 is unconstrained in both conditions; a vLLM "
                                   "server applies the constraint with regex_mode=vllm"}
    vllm = plan.plan_book({"backend": "openai", "model": "Qwen/Qwen3.5-27B", "backend_options": {"regex_mode": "vllm"},
                           **roots}, only=["03"], parameters=conditions)
    assert {r.not_applied for r in vllm} == {""}
    local = plan.plan_book({"backend": "reference", **roots}, only=["03"], parameters=conditions)
    assert {r.not_applied for r in local} == {""}
    assert main(["plan", "--backend", "openai", "--model", "Qwen/Qwen3.5-27B", "--only", "03", "-p",
                 'conditions=["structured", "no_constrained_decoding"]', "-p", f"out_root={roots['out_root']}",
                 "-p", f"cache_dir={roots['cache_dir']}"]) == 0
    printed = {entry["config"]["condition"]: entry["not_applied"] for entry in json.loads(capsys.readouterr().out)}
    assert printed["no_constrained_decoding"].startswith("not applied on this backend: turn 1 is unconstrained")
    assert printed["structured"] == ""


def test_runs_whose_split_is_not_here_are_set_aside_with_the_reason_and_the_hub_is_asked_once(test_csv, tmp_path,
                                                                                             monkeypatch):
    """Chapter 02 with the hub's Paraphrase-OOD split, offline: the ID grid is planned, the OOD grid set aside
    (the reason names the file to place), the hub tried once for both OOD runs; unasked, the plan raises."""
    from cpdagthink.run import data

    shutil.copy(test_csv, tmp_path / "test.csv")
    monkeypatch.setenv("CORR2CAUSE_CSV", str(tmp_path / "test.csv"))
    asked = []

    def unreachable(split, cache=None):
        asked.append(split)
        raise data.DataError(f"could not fetch split {split!r}: place its {data.HUB_FILES[split]} at "
                             f"{data.local_split_csv(split)}")

    monkeypatch.setattr(data, "download_split", unreachable)
    values = chapters.chapter_values(chapters.NOTEBOOKS / "02_complexity.ipynb",
                                     {"backend": "reference", "ood_split": "perturbation_by_paraphrasing",
                                      "out_root": str(tmp_path / "runs"), "cache_dir": str(tmp_path / "cache")})
    unplanned: list[plan.Unplanned] = []
    runs = plan.plan_chapters([("02_complexity", values)], unplanned)
    assert [r.config.split for r in runs] == ["test", "test"] and asked == ["perturbation_by_paraphrasing"]
    assert [(u.execution, u.config.split) for u in unplanned] == [(0, "perturbation_by_paraphrasing")] * 2
    assert all(str(tmp_path / "perturbation_by_paraphrasing_test.csv") in u.reason for u in unplanned)
    with pytest.raises(data.DataError):
        plan.plan_chapters([("02_complexity", values)])
