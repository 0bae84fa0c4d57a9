"""The book's grid on Snakemake (workflow/Snakefile, cpdagthink.workflow, workflow/cluster/simulated.py).

The workflow tests run Snakemake on a copy of the project (its lib/, notebooks, prompts, workflow/ and book
sources) with the copy's package first on the path, so the chapters, the book and Snakemake's own state land
in the copy, and runs and the call cache in its outputs/.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cpdagthink.paths import PROJECT_ROOT
from cpdagthink.run.config import RunConfig
from cpdagthink.workflow import (ChapterJob, WorkflowConfigError, book_parameters, group_limits, job_resources,
                                 plan_grid, shell_words)

sys.path.insert(0, str(Path(__file__).resolve().parent))

from reasoning_api_server import ReasoningAPIServer  # noqa: E402
from snakemake_project import (assert_cache_intact, assert_every_instance_once, one_group_execution,  # noqa: E402,F401
                               plan_of, project, records_of, run_snakemake, snakemake, wait_for)

SIMULATED = PROJECT_ROOT / "workflow" / "cluster" / "simulated.py"


# ------------------------------------------------------------------------------------------------ units
def test_each_backend_sizes_its_job_from_its_own_option_or_its_default():
    vllm = RunConfig(backend="vllm", model="Qwen/Qwen3-8B", backend_options={})
    assert job_resources(vllm) == {"threads": 1, "gpu": 2, "api_slots": 0}  # VLLMBackend's default tensor parallel
    assert job_resources(RunConfig(backend="local")) == {"threads": 2, "gpu": 0, "api_slots": 0}  # n_threads=2
    api = RunConfig(backend="openai", model="gpt-5.4-mini", backend_options={"base_url": "http://127.0.0.1:1/v1"})
    assert job_resources(api) == {"threads": 1, "gpu": 0, "api_slots": 1}
    assert job_resources(RunConfig(backend="reference")) == {"threads": 1, "gpu": 0, "api_slots": 0}


def test_a_group_gets_the_runtime_and_memory_of_its_kind_from_the_slurm_profile(tmp_path, test_csv):
    """The shipped group-limits.yaml gives every backend a row (its own or the default); the grid hands each
    group job the row of its backend, and a config without limits leaves Snakemake's defaults alone."""
    import yaml

    roots_config = {"data": str(test_csv), "out_root": str(tmp_path / "runs"), "cache_dir": str(tmp_path / "cache")}
    shipped = yaml.safe_load((PROJECT_ROOT / "workflow" / "profiles" / "slurm" / "group-limits.yaml").read_text())
    table = shipped["group_limits"]
    assert group_limits(shipped, {"vllm", "local", "openai", "reference"}) == {
        "vllm": table["vllm"], "local": table["local"], "openai": table["openai"], "reference": table["default"]}
    grid = plan_grid({**roots_config, **shipped, "backend": "reference", "limit": 4, "only": ["06"]})
    key = next(iter(grid.groups))
    sized = grid.limit_resources()
    wildcards = type("Wildcards", (), {"group": key})()
    assert {name: size(wildcards) for name, size in sized.items()} == table["default"]
    assert "group_limits" not in grid.parameters  # the scheduler's, never a chapter's parameter
    assert plan_grid({**roots_config, "backend": "reference", "limit": 4, "only": ["06"]}).limit_resources() == {}
    for bad, says in (({"vllm": {"runtime": 60, "mem_mb": 100}}, "reference groups need runtime and mem_mb"),
                      ({"default": {"runtime": 0, "mem_mb": 100}}, "runtime must be a whole number of at least 1"),
                      ({"default": {"runtime": 60, "mem_mb": "lots"}}, "mem_mb must be a whole number"),
                      ([1, 2], "maps a backend")):
        with pytest.raises(WorkflowConfigError, match=says):
            group_limits({"group_limits": bad}, {"reference"})


def test_config_values_read_as_the_book_reads_them_and_a_key_in_a_url_is_refused(monkeypatch):
    from cpdagthink.credentials import ENV_CREDENTIALS

    monkeypatch.setenv(ENV_CREDENTIALS, "{}")  # what reading a URL's user info writes, removed after the test
    # Snakemake's --config gives every scalar as text: seeds=[0,1] arrives as ["0", "1"]
    only, parameters = book_parameters({"backend": "reference", "limit": 0, "seeds": ["0", "1"], "only": ["01", "04"],
                                        "probes": ["scramble_full"], "sample_variables": "null", "model": "a:b"})
    assert only == ["01", "04"]
    assert parameters == {"backend": "reference", "limit": 0, "seeds": [0, 1], "probes": ["scramble_full"],
                          "sample_variables": None, "model": "a:b"}
    # the backend's own options: a mapping (its scalars as text too), a JSON object, or KEY=VALUE words
    for given in ({"max_model_len": "32768", "tensor_parallel_size": "4"}, '{"max_model_len": 32768, '
                  '"tensor_parallel_size": 4}', "max_model_len=32768 tensor_parallel_size=4"):
        assert book_parameters({"backend_options": given})[1] == {"backend_options": {"max_model_len": 32768,
                                                                                      "tensor_parallel_size": 4}}
    with pytest.raises(WorkflowConfigError, match="OPENAI_API_KEY"):
        book_parameters({"backend_options": "base_url=http://user:sk-SECRET@127.0.0.1:1/v1"})
    with pytest.raises(WorkflowConfigError, match="OPENAI_API_KEY"):
        book_parameters({"backend_options": {"base_url": ["http://127.0.0.1:2/v1", "http://user:sk-SECRET@h/v1"]}})
    with pytest.raises(ValueError, match=r"query string \(api-key\)") as raised:  # quoting none of it
        book_parameters({"backend_options": "base_url=http://127.0.0.1:1/v1?api-key=sk-SECRET"})
    assert "SECRET" not in str(raised.value)


def test_a_chapter_job_passes_hostile_values_to_the_shell_as_data(tmp_path):
    job = ChapterJob("01_main_results", (), {"model": "x'; touch pwned; echo '$(touch pwned2)"})
    line = shell_words(["printf", "%s\\n", *job.arguments()])
    out = subprocess.run(line, shell=True, cwd=tmp_path, capture_output=True, text=True, check=True).stdout
    assert out.splitlines()[-1] == 'model="x\'; touch pwned; echo \'$(touch pwned2)"'
    assert not list(tmp_path.iterdir())


def test_the_grid_sizes_a_job_per_group_until_complete_and_marks_a_stale_output_in_its_plan_file(tmp_path, test_csv,
                                                                                                monkeypatch):
    from cpdagthink.book.plan import execute, plan_book

    monkeypatch.setenv("CORR2CAUSE_CSV", str(test_csv))
    monkeypatch.setattr("cpdagthink.workflow.MARKERS", tmp_path / "plan")
    config = {"backend": "openai", "model": "gpt-5.4-mini", "backend_options": "base_url=http://127.0.0.1:9/v1",
              "limit": "4", "only": ["01"], "out_root": str(tmp_path / "runs"), "cache_dir": str(tmp_path / "cache")}
    grid = plan_grid(config)
    api, reference = sorted(grid.groups)  # chapter 01: the model's conditions, and the reference agent's row
    assert api.startswith("openai-gpt-5.4-mini-seed0") and reference == "reference-default-seed0"
    assert (grid.groups[api].api_slots, grid.groups[reference].threads) == (1, 1)
    assert grid.chapters["01_main_results"].groups == tuple(sorted([api, reference]))
    assert "--render-only" in grid.chapters["01_main_results"].arguments()
    assert grid.group_arguments(api)[-3:] == ["--group", api, "--execute"]

    execute([r for r in plan_book({}, ["01"], book_parameters(config)[1])
             if r.group == reference], progress=False)
    (tmp_path / "plan").mkdir()
    for key in (api, reference):
        (tmp_path / "plan" / f"{key}.done").touch()
    grid = plan_grid(config)
    assert grid.groups[reference].complete and not grid.groups[api].complete
    book = tmp_path / "book"
    files = [tmp_path / "plan" / "groups" / f"{api}.json", tmp_path / "plan" / "groups" / f"{reference}.json",
             tmp_path / "plan" / "chapters" / "01_main_results.json"]
    assert sorted(grid.write_plan_files(book)) == sorted(files)
    plans = [json.loads(f.read_text()) for f in files]
    assert "not complete" in plans[0]["stale"] and "stale" not in plans[1]  # the api group's marker is stale
    assert plans[2]["parameters"] == {**{k: v for k, v in config.items() if k != "only"}, "limit": 4,
                                      "backend_options": {"base_url": "http://127.0.0.1:9/v1"}}
    assert len(plans[2]["runs"]) == 5
    texts = [f.read_text() for f in files]
    # Planned again: the stale marker's plan file changes again (until its group runs), the others stay as they are
    assert plan_grid(config).write_plan_files(book) == [files[0]]
    assert [f.read_text() for f in files[1:]] == texts[1:] and files[0].read_text() != texts[0]
    (tmp_path / "plan" / f"{api}.done").unlink()
    assert plan_grid(config).write_plan_files(book) == []  # no marker: the group runs as its output is missing

    # A chapter in book/ executed with other parameters (a `make book` since) is stale; with the grid's, it is not
    from cpdagthink.cli import book_papermill_parameters

    given = book_papermill_parameters(grid.chapters["01_main_results"].arguments())["01_main_results"]
    assert given["limit"] == 4 and given["backend_options"] == {"base_url": "http://127.0.0.1:9/v1"}  # as `book`'s
    book.mkdir()
    executed = book / "01_main_results.ipynb"
    executed.write_text(json.dumps({"metadata": {"papermill": {"parameters": {**given, "limit": 3}}}}))
    assert plan_grid(config).write_plan_files(book) == [files[2]]
    assert "other parameters" in json.loads(files[2].read_text())["stale"]
    executed.write_text(json.dumps({"metadata": {"papermill": {"parameters": given}}}))
    assert plan_grid(config).write_plan_files(book) == []


def test_the_configs_backend_options_reach_each_group_job_and_one_the_backend_does_not_take_is_refused(
        tmp_path, test_csv, monkeypatch, capsys):
    """`--config backend_options=...` sizes the group's job from the backend's option and reaches the
    backend's arguments of every run the group job's `cpdagthink plan` computes."""
    from cpdagthink.cli import main

    monkeypatch.setenv("CORR2CAUSE_CSV", str(test_csv))
    monkeypatch.setattr("cpdagthink.workflow.MARKERS", tmp_path / "plan")
    config = {"backend": "vllm", "model": "Qwen/Qwen3-8B", "limit": "4", "only": ["01"],
              "backend_options": "tensor_parallel_size=4 max_model_len=32768", "out_root": str(tmp_path / "runs"),
              "cache_dir": str(tmp_path / "cache")}
    grid = plan_grid(config)
    (key,) = [k for k in grid.groups if k.startswith("vllm-")]
    assert grid.groups[key].gpu == 4
    assert main(["plan", *grid.group_arguments(key)[:-1]]) == 0  # what the job runs, without --execute
    runs = json.loads(capsys.readouterr().out)
    assert runs and all(r["config"]["backend_options"] == {"tensor_parallel_size": 4, "max_model_len": 32768}
                        for r in runs)
    with pytest.raises(ValueError, match="backend 'vllm' option max_model_len: Input should be a valid integer"):
        plan_grid({**config, "backend_options": "max_model_len=long"})
    with pytest.raises(ValueError, match="backend 'local' does not take max_model_len, tensor_parallel_size; it takes: model"):
        plan_grid({**config, "backend": "local", "model": "qwen2.5-0.5b"})


def test_a_tensor_parallel_size_out_of_range_is_refused_before_the_grid_sizes_a_job(tmp_path, test_csv, monkeypatch):
    """No SLURM job is ever asked for gpu=-1 (or a billion GPUs): the plan refuses the option by name."""
    monkeypatch.setenv("CORR2CAUSE_CSV", str(test_csv))
    monkeypatch.setattr("cpdagthink.workflow.MARKERS", tmp_path / "plan")
    config = {"backend": "vllm", "model": "Qwen/Qwen3-8B", "limit": "4", "only": ["01"],
              "out_root": str(tmp_path / "runs"), "cache_dir": str(tmp_path / "cache")}
    for size in ("-1", "0", "1e9"):
        with pytest.raises(ValueError, match="backend 'vllm' option tensor_parallel_size:"):
            plan_grid({**config, "backend_options": f"tensor_parallel_size={size}"})
    with pytest.raises(ValueError, match="backend 'vllm' option tensor_parallel_size:"):
        job_resources(RunConfig(backend="vllm", model="m", backend_options={"tensor_parallel_size": -1}))


def test_make_grid_hands_each_value_to_snakemake_as_one_config_entry(make_argv):
    """`make grid` passes the book variables as `--config name=value` words (a list as a YAML list), the
    profile named by PROFILE; neither make nor the shell runs any value."""
    options = ("revision=$(HOME)`touch${IFS}pwned-backquote`'x'$HOME\\ token_param=max_tokens#: "
               'base_url=["http://127.0.0.1:1/v1","http://127.0.0.1:2/v1"] reasoning_effort="low"')
    values = {"MODEL": "a (b); touch pwned-shell", "TEMPERATURE": "$(shell touch pwned-make)",
              "BACKEND_OPTIONS": options, "SEEDS": "0 1", "ONLY": "01 04", "SAMPLE_VARIABLES": "all", "PROFILE": "slurm"}
    argv, _ = make_argv("grid", "snakemake", values)
    escaped = options.replace("\\", "\\\\").replace('"', '\\"')
    assert argv == ["--profile", "workflow/profiles/slurm", "--config", f"model={values['MODEL']}",
                    f'backend_options= "{escaped}" ', "seeds=[0,1]", "only=[01,04]", "sample_variables=null",
                    f"temperature={values['TEMPERATURE']}"]
    # as Snakemake reads the entry, and the workflow then: each word one option, the value read as JSON or kept
    from snakemake.cli import parse_config

    entry = parse_config([argv[4]])["backend_options"]
    assert book_parameters({"backend_options": entry})[1]["backend_options"] == {
        "revision": "$(HOME)`touch${IFS}pwned-backquote`'x'$HOME\\", "token_param": "max_tokens#:",
        "reasoning_effort": "low",
        "base_url": ["http://127.0.0.1:1/v1", "http://127.0.0.1:2/v1"]}


def _release(snakemake_dir: Path, hold: bool = False) -> subprocess.Popen:
    """release_stale_locks in its own process (which holds the workflow's flock while it lives), printing its
    result as JSON; with ``hold`` it then sleeps, as a running Snakemake would."""
    code = ("import json, sys, time; from pathlib import Path; from cpdagthink.workflow import release_stale_locks; "
            "released, elsewhere = release_stale_locks(Path(sys.argv[1])); "
            "print(json.dumps([[p.name for p in released], elsewhere]), flush=True); "
            "time.sleep(60 if sys.argv[2] == 'hold' else 0)")
    return subprocess.Popen([sys.executable, "-c", code, str(snakemake_dir), "hold" if hold else "-"],
                            stdout=subprocess.PIPE, text=True)


def test_a_lock_of_a_killed_snakemake_is_released_and_a_live_ones_or_another_hosts_is_not(tmp_path):
    state = tmp_path / ".snakemake"
    (state / "locks").mkdir(parents=True)
    lock = state / "locks" / "0.input.lock"
    lock.write_text("/some/file\n")
    live = _release(state, hold=True)
    assert json.loads(live.stdout.readline()) == [["0.input.lock"], None]  # no Snakemake held it: released
    lock.write_text("/some/file\n")  # the lock of the Snakemake that runs
    assert json.loads(_release(state).communicate(timeout=60)[0]) == [[], None]
    assert lock.is_file()
    live.kill()  # kill -9: the kernel frees the flock, Snakemake's lock stays
    live.wait()
    assert json.loads(_release(state).communicate(timeout=60)[0]) == [["0.input.lock"], None]
    assert not lock.exists()
    lock.write_text("/some/file\n")
    (state / "cpdagthink-grid.lock").write_text("another-host 4242\n")  # left by a Snakemake on another host
    released, elsewhere = json.loads(_release(state).communicate(timeout=60)[0])
    assert released == [] and "another-host" in elsewhere and "make grid SNAKEMAKE_ARGS=--unlock" in elsewhere
    assert lock.is_file()


def test_a_group_job_stops_as_on_sigterm_when_its_scheduler_ends(tmp_path):
    """stop_with_scheduler: the process named by $CPDAGTHINK_SCHEDULER_PID ends (SIGKILL), and the job gets
    SIGTERM within a second, whatever else it is doing."""
    scheduler = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    code = ("import signal, sys, time; from cpdagthink.scheduler import stop_with_scheduler; "
            "signal.signal(signal.SIGTERM, lambda *_: (print('SIGTERM', flush=True), sys.exit(143))); "
            "stop_with_scheduler(); print('watching', flush=True); time.sleep(60)")
    job = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                           env={**os.environ, "CPDAGTHINK_SCHEDULER_PID": str(scheduler.pid)})
    assert job.stdout.readline().strip() == "watching"
    start = time.monotonic()
    scheduler.kill()
    scheduler.wait()
    assert job.wait(timeout=10) == 143 and job.stdout.read().strip() == "SIGTERM"
    assert time.monotonic() - start < 3


def _simulated(*args: str, state: Path) -> str:
    env = {**os.environ, "CPDAGTHINK_CLUSTER_DIR": str(state)}
    return subprocess.run([sys.executable, str(SIMULATED), *args], env=env, capture_output=True, text=True,
                          check=True).stdout.strip()


def test_the_simulated_cluster_reports_a_job_running_then_its_exit_and_a_killed_job_as_failed(tmp_path):
    state = tmp_path / "state"
    scripts = {}
    go = tmp_path / "go"
    for name, body in {"ok": f"while [ ! -e '{go}' ]; do sleep 0.1; done", "bad": "exit 3", "lost": "sleep 60"}.items():
        scripts[name] = tmp_path / f"{name}.sh"
        scripts[name].write_text(f"#!/bin/sh\n{body}\n")
    ok, bad, lost = (_simulated("submit", str(scripts[n]), state=state) for n in ("ok", "bad", "lost"))
    assert _simulated("status", ok, state=state) == "running"
    go.touch()
    os.killpg(int(lost), signal.SIGKILL)  # a lost node: the job writes no exit code
    deadline = time.monotonic() + 30
    while _simulated("status", ok, state=state) == "running" and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _simulated("status", ok, state=state) == "success"
    assert _simulated("status", bad, state=state) == "failed"
    assert _simulated("status", lost, state=state) == "failed"
    assert (state / f"{ok}.sh").read_text() == scripts["ok"].read_text()  # kept after Snakemake deletes its own


# ----------------------------------------------------------------------------------------- the workflow
def simulated_jobs(root: Path) -> dict[str, dict]:
    """The simulated cluster's jobs: id -> the properties Snakemake wrote into its job script."""
    state = root / ".snakemake" / "simulated-cluster"
    jobs = {}
    for script in state.glob("*.sh"):
        line = next((l for l in script.read_text().splitlines() if l.startswith("# properties = ")), None)
        if line:
            jobs[script.stem] = json.loads(line.removeprefix("# properties = "))
    return jobs


@pytest.mark.slow
def test_a_job_killed_on_the_simulated_cluster_reruns_with_nothing_lost_or_duplicated(project, tmp_path):
    """Snakemake's generic cluster executor submits each job as its own detached process; one group job is
    killed (its whole session, SIGKILL: a lost node) between its runs, with some complete and some not. The
    rerun computes what is missing: every instance has one record, the runs finished before the kill are
    byte for byte as they were, the cache holds only whole entries, and a third pass asks nothing."""
    log = tmp_path / "snakemake.log"
    with ReasoningAPIServer(latency_s=0.25) as server:
        config = ["backend=openai", "model=gpt-5.4-mini", f"backend_options=reasoning_effort=low base_url={server.url}",
                  "limit=12", "only=[01]"]
        command = snakemake(project, "simulated-cluster", "runs", "--config", *config)
        with log.open("ab") as sink:
            first = subprocess.Popen(command, cwd=project, stdout=sink, stderr=subprocess.STDOUT)
        plan = plan_of(project, config)
        api_runs = [Path(r["folder"]) for r in plan if r["config"]["backend"] == "openai"]
        assert len(api_runs) == 4  # chapter 01's four conditions, one group (model and seed)

        def finished(folder: Path) -> bool:
            summary = folder / "summary.json"
            return summary.is_file() and json.loads(summary.read_text()).get("status") == "finished"

        wait_for(lambda: any(finished(f) for f in api_runs), 300, "the API group's first run")
        group = next(job for job, p in simulated_jobs(project).items()
                     if p["rule"] == "group" and p["wildcards"]["group"].startswith("openai-"))
        done_before = {f: (f / "records.jsonl").read_bytes() for f in api_runs if finished(f)}
        os.killpg(int(group), signal.SIGKILL)
        assert len(done_before) < len(api_runs), "the group ended before it could be killed"
        asked_before = {json.dumps(body, sort_keys=True) for body in server.requests}
        assert first.wait(timeout=600) != 0  # Snakemake saw the job fail
        assert "Error in rule group" in log.read_text()

        assert run_snakemake(project, command, log).returncode == 0, log.read_text()[-3000:]
        asked_again = [b for b in server.requests[len(asked_before):] if json.dumps(b, sort_keys=True) in asked_before]
        calls = len(server.requests)
        assert run_snakemake(project, command, log).returncode == 0
        assert len(server.requests) == calls  # nothing left to ask

    plan = plan_of(project, config)
    assert_every_instance_once(plan)
    for folder, text in done_before.items():
        assert (folder / "records.jsonl").read_bytes() == text
    # Only the run the kill interrupted is asked again, and at most its rows' two turns
    assert len(asked_again) <= 2 * 12
    assert_cache_intact(project / "outputs" / "cache")
    assert sorted(p.name for p in (project / "outputs" / "plan").glob("*.done")) == sorted(
        {f"{r['group']}.done" for r in plan})


@pytest.mark.slow
def test_a_duplicated_group_job_is_refused_by_the_run_lock_and_two_runs_share_one_cache(project, tmp_path):
    """Two jobs at once: the same group twice (a retried job whose first attempt still runs) and two runs
    into different folders writing the same cache entries. Each run folder has one writer (the second job
    fails at once, naming the first's pid); the shared cache ends with whole entries only."""
    with ReasoningAPIServer(latency_s=0.2) as server:
        config, words = one_group_execution(project, server.url)
        jobs = [subprocess.Popen([sys.executable, "-m", "cpdagthink", "plan", *words], cwd=project,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
        outcomes = [job.communicate(timeout=300) for job in jobs]
        codes = sorted(job.returncode for job in jobs)
        assert codes == [0, 2], outcomes
        assert any("another run (pid" in err for _, err in outcomes)
        assert_every_instance_once(plan_of(project, config))

        # Two runs of one configuration into two folders, one cache, at once: both compute every call
        cache = tmp_path / "shared-cache"
        run = [sys.executable, "-m", "cpdagthink", "run", "--condition", "structured", "--backend", "openai",
               "--model", "gpt-5.4-mini", "--reasoning-effort", "low", "--base-url", server.url, "--limit", "30",
               "--cache", str(cache)]
        both = [subprocess.Popen([*run, "--out", str(tmp_path / name)], cwd=project, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True) for name in ("a", "b")]
        results = [job.communicate(timeout=300) for job in both]
        assert [job.returncode for job in both] == [0, 0], results
    a, b = records_of(tmp_path / "a"), records_of(tmp_path / "b")
    assert len(a) == len(b) == 30
    # the same answers; the files hold them in the order they finished (streamed), which two runs need not share
    assert sorted((r["id"], r["prediction"]) for r in a) == sorted((r["id"], r["prediction"]) for r in b)
    # one whole entry per distinct call of either run (a turn 2 differs where the two runs' turn 1 came back with
    # different encrypted reasoning, which the server issues per call)
    assert assert_cache_intact(cache) == len({t["request_sha256"] for r in a + b for t in r["turns"]})


# A small split of every variable count: the proof is of scheduling (a job per group, chapters from records two
# at a time, the book once, a second pass idle), not of scale; `benchmarks/notes/` times the full split.
SMALL_SPLIT = ["backend=reference", "limit=24", "sample_variables=null"]


@pytest.mark.slow
def test_snakemake_with_two_cores_builds_the_book_on_the_reference_backend_over_a_small_split(project, tmp_path):
    """`snakemake --cores 2` on the reference backend (24 rows of every variable count) builds the whole book:
    every chapter executed from records, every planned instance once; a second pass has nothing to do."""
    log = tmp_path / "snakemake.log"
    command = snakemake(project, "local", "--cores", "2", "--config", *SMALL_SPLIT)
    start = time.perf_counter()
    assert run_snakemake(project, command, log, timeout=1800).returncode == 0, log.read_text()[-3000:]
    print(f"reference book, small split, --cores 2: {time.perf_counter() - start:.0f} s")
    assert (project / "_build" / "html" / "index.html").is_file()
    assert sorted(p.stem for p in (project / "book").glob("*.ipynb")) == sorted(
        p.stem for p in (project / "notebooks").glob("*.ipynb"))
    plan = plan_of(project, SMALL_SPLIT)
    assert {r["instances"]["count"] for r in plan if r["instances"]["source"] == plan[0]["instances"]["source"]} == {24}
    assert_every_instance_once(plan)
    again = run_snakemake(project, [*command, "--dry-run"], log)
    assert again.returncode == 0 and "Nothing to be done" in log.read_text().rsplit("Building DAG", 1)[-1]


def chapter_target(root: Path, chapter: str = "01_main_results") -> str:
    return str(root / "book" / f"{chapter}.ipynb")


def papermill_parameters_of(notebook: Path) -> dict:
    return json.loads(notebook.read_text())["metadata"]["papermill"]["parameters"]


@pytest.mark.slow
def test_a_book_of_other_parameters_or_a_removed_run_is_made_again_and_a_second_pass_does_nothing(project, tmp_path):
    """`make grid` after a `make book` of other parameters executes the chapter again with the grid's own (its
    parameters are an input Snakemake sees); after a run folder is removed by hand, the next pass computes
    exactly that run (the others' records stay byte for byte) and executes the chapter again; the same
    parameters once more leave everything as it is."""
    log = tmp_path / "snakemake.log"
    config = ["backend=reference", "limit=4", "only=[01]"]
    command = snakemake(project, "local", "--cores", "2", chapter_target(project), "--config", *config)
    assert run_snakemake(project, command, log).returncode == 0, log.read_text()[-3000:]
    notebook = Path(chapter_target(project))
    assert papermill_parameters_of(notebook)["limit"] == 4

    book = [sys.executable, "-m", "cpdagthink", "book", "--only", "01", "--no-build", "--backend", "reference",
            "--limit", "3"]
    subprocess.run(book, cwd=project, check=True, capture_output=True)
    assert papermill_parameters_of(notebook)["limit"] == 3  # the book of other parameters, newer than every input
    assert run_snakemake(project, command, log).returncode == 0, log.read_text()[-3000:]
    assert papermill_parameters_of(notebook)["limit"] == 4

    folders = [Path(r["folder"]) for r in plan_of(project, config)]
    records = {f: (f / "records.jsonl").read_bytes() for f in folders}
    made = notebook.stat().st_mtime_ns
    shutil.rmtree(folders[1])
    assert run_snakemake(project, command, log).returncode == 0, log.read_text()[-3000:]
    assert notebook.stat().st_mtime_ns > made
    assert [f for f in folders if (f / "records.jsonl").stat().st_mtime_ns > made] == [folders[1]]
    assert {f: (f / "records.jsonl").read_bytes() for f in folders if f != folders[1]} == {
        f: text for f, text in records.items() if f != folders[1]}
    answers = [(r["id"], r["prediction"]) for r in records_of(folders[1])]
    assert answers == [(json.loads(line)["id"], json.loads(line)["prediction"])
                       for line in records[folders[1]].decode().splitlines()]  # the reference agent answers alike
    assert_every_instance_once(plan_of(project, config))

    made = notebook.stat().st_mtime_ns
    assert run_snakemake(project, [*command, "--dry-run"], log).returncode == 0
    assert "Nothing to be done" in log.read_text().rsplit("Building DAG", 1)[-1]
    assert run_snakemake(project, command, log).returncode == 0
    assert notebook.stat().st_mtime_ns == made


def group_processes(root: Path) -> list[int]:
    """The pids of the group jobs (`cpdagthink plan ... --execute`) running in the project copy ``root``."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            words = (entry / "cmdline").read_bytes().split(b"\0")
            if b"--execute" in words and Path(os.readlink(entry / "cwd")) == root:
                found.append(int(entry.name))
        except (OSError, ValueError):
            continue
    return found


@pytest.mark.slow
def test_a_group_job_ends_with_its_killed_snakemake_and_the_next_grid_is_not_locked_out(project, tmp_path):
    """`kill -9` of Snakemake mid-group: the group job stops within seconds (its run interrupted, every finished
    record kept) instead of running on as an orphan, and the next grid releases the dead Snakemake's lock and
    computes the rest."""
    log = tmp_path / "snakemake.log"
    with ReasoningAPIServer(latency_s=1.0) as server:
        config = ["backend=openai", "model=gpt-5.4-mini", f"backend_options=reasoning_effort=low base_url={server.url}",
                  "limit=20", "only=[01]", "conditions=[\"structured\"]", "include_reference=false"]
        command = snakemake(project, "local", "runs", "--config", *config)
        with log.open("ab") as sink:
            first = subprocess.Popen(command, cwd=project, stdout=sink, stderr=subprocess.STDOUT)
        wait_for(lambda: len(server.requests) >= 5, 300, "the group job's first requests")
        (job,) = group_processes(project)
        os.kill(first.pid, signal.SIGKILL)
        first.wait()
        wait_for(lambda: not group_processes(project), 20, "the orphaned group job to end")
        assert list((project / ".snakemake" / "locks").glob("*.lock"))  # the dead Snakemake's lock is left
        (run,) = plan_of(project, config)
        folder = Path(run["folder"])
        assert json.loads((folder / "summary.json").read_text())["status"] == "interrupted"
        kept = len(records_of(folder))
        assert kept < 20

        again = run_snakemake(project, command, log)
        assert again.returncode == 0, log.read_text()[-3000:]
    assert "a lock of a Snakemake that is no longer running" in log.read_text()
    assert_every_instance_once(plan_of(project, config))
