"""The command line's contracts: the subcommands, flags, exit codes and messages that the Makefile, the
workflow, the notebooks and the README rely on."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys

import pytest


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cpdagthink", *args], capture_output=True, text=True, timeout=300)


def test_oracle_command_writes_rows_and_lists_the_eighteen(test_csv, tmp_path):
    out = tmp_path / "oracle.jsonl"
    result = run("oracle", "--data", str(test_csv), "--out", str(out))
    assert result.returncode == 0, result.stderr
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["index"] for r in records] == list(range(1162))
    assert sum(r["oracle_label"] != r["gold_label"] for r in records) == 18
    assert "disagreeing rows (18)" in result.stdout
    assert re.search(r"precision 0\.922, recall 0\.983, F1 0\.952", result.stdout)
    assert "agreement by template" in result.stdout and "agreement by num_variables" in result.stdout


def test_reference_command_writes_cpdag_and_causal_analysis(test_csv, tmp_path):
    out = tmp_path / "ref.jsonl"
    assert run("reference", "--data", str(test_csv), "--out", str(out)).returncode == 0
    first = json.loads(out.read_text().splitlines()[-1])
    for key in ("variables", "skeleton", "separating_sets", "v_structures", "directed_edges", "undirected_edges"):
        assert key in first and key in first["causal_analysis"]
    assert list(first["causal_analysis"]) == ["variables", "skeleton", "separating_sets", "v_structures",
                                              "directed_edges", "undirected_edges"]


def test_generate_command(tmp_path):
    out = tmp_path / "asia.csv"
    result = run("generate", "--family", "asia8", "--per-graph", "40", "--out", str(out))
    assert result.returncode == 0 and "wrote 40 rows" in result.stdout


def test_schema_command_prints_schema_and_regex():
    schema = json.loads(run("schema", "--variables", "A,B,C").stdout)
    assert schema["properties"]["variables"]["items"]["enum"] == ["A", "B", "C"]
    regex = run("schema", "--variables", "A,B", "--regex").stdout.strip()
    assert re.fullmatch(regex, '{"variables":["A","B"],"skeleton":[["A","B"]],"separating_sets":[],'
                               '"v_structures":[],"directed_edges":[],"undirected_edges":[["A","B"]]}')


def test_bad_input_is_a_clear_error(tmp_path):
    result = run("oracle", "--data", str(tmp_path / "missing.csv"), "--out", str(tmp_path / "o.jsonl"))
    assert result.returncode == 2 and "no such file" in result.stderr


def test_book_passes_its_overrides_to_every_notebook(monkeypatch, capsys):
    import cpdagthink.book.build
    import cpdagthink.book.plan
    from cpdagthink.cli import main

    streamed = []  # an API book computes its runs first, every chapter's at once
    monkeypatch.setattr(cpdagthink.book.plan, "execute_streamed", lambda *args: streamed.append(args))
    seen = {}
    monkeypatch.setattr(cpdagthink.book.build, "build", lambda overrides, only=None, parameters=None, render_only=False,
                        render_book=True, allow_partial=False, watch=None: seen.update(
                            overrides, only=only, parameters=parameters, render_only=render_only,
                            render_book=render_book, allow_partial=allow_partial) or "index.html")
    assert main(["book", "--backend", "openai", "--model", "gpt-4.1-mini", "--limit", "0", "--seeds", "0", "1", "--temperature", "0.7",
                 "--max-tokens-turn1", "8192", "--max-tokens-answer", "4096", "--only", "01",
                 "--sample-variables", "5", "6", "--api", "chat"]) == 0
    assert seen == {"backend": "openai", "model": "gpt-4.1-mini", "limit": 0, "seeds": [0, 1], "temperature": 0.7,
                    "max_tokens_turn1": 8192,
                    "max_tokens_answer": 4096, "only": ["01"], "sample_variables": [5, 6],
                    "backend_options": {"api": "chat"},
                    "parameters": {}, "render_only": False, "render_book": True, "allow_partial": False}
    assert streamed == [({k: v for k, v in seen.items() if k not in ("only", "parameters", "render_only",
                                                                       "render_book", "allow_partial")}, ["01"], {})]
    assert main(["book", "--render-only", "--only", "01"]) == 0 and seen["render_only"] is True
    assert len(streamed) == 1  # nothing computed when rendering only, nor for the local model's book
    assert main(["book", "--allow-partial", "--only", "01"]) == 0 and seen["allow_partial"] is True
    assert "book: index.html" in capsys.readouterr().out
    assert main(["book", "--no-build", "--only", "01"]) == 0 and seen["render_book"] is False
    assert main(["book", "--sample-variables", "all"]) == 0 and seen["sample_variables"] is None
    with pytest.raises(SystemExit):
        main(["book", "--sample-variables", "five"])
    assert main(["book", "--only", "04", "-p", 'probes=["scramble_full"]', "-p", "backend=reference"]) == 0
    assert seen["parameters"] == {"probes": ["scramble_full"], "backend": "reference"}


def test_oracle_refuses_to_write_over_its_input(tmp_path):
    data = tmp_path / "mine.csv"
    data.write_text("input,label,num_variables,template\n")
    for command in ("oracle", "reference"):
        result = run(command, "--data", str(data), "--out", str(tmp_path / "." / "mine.csv"))
        assert result.returncode == 2 and "is the input CSV" in result.stderr, result.stderr
    assert data.read_text() == "input,label,num_variables,template\n"


@pytest.mark.parametrize("args, message", [
    (["generate", "--family", "random7", "--graphs", "0"], "--graphs must be at least 1 (got 0)"),
    (["generate", "--family", "alarm7", "--per-graph", "-2"], "--per-graph must be at least 1 (got -2)"),
    (["book", "--only", "nosuch"], "no chapter starts with 'nosuch'; the chapters are: 01_main_results"),
    (["book", "--backend", "nosuch"], "unknown backend 'nosuch'"),
    (["book", "--limit", "-5"], "limit: Input should be greater than or equal to 0"),
    (["book", "--backend", "reference", "--seeds", "0", "1", "--sampling", "greedy", "--temperature", "0"],
     "would be copies of one output"),
    (["run", "--condition", "structured", "--backend", "reference", "--limit", "-1"],
     "limit: Input should be greater than or equal to 0"),
    (["run", "--condition", "structured", "--backend", "reference", "--chunk-size", "0"],
     "chunk_size: Input should be greater than 0"),
    (["run", "--condition", "structured", "--backend", "reference", "--chunk-size", "-2"],
     "chunk_size: Input should be greater than 0"),
    (["run", "--condition", "structured", "--backend", "reference", "--max-tokens-turn1", "0"],
     "max_tokens_turn1: Input should be greater than 0"),
    (["run", "--condition", "structured", "--backend", "reference", "--max-tokens-answer", "-5"],
     "max_tokens_answer: Input should be greater than 0"),
    (["run", "--condition", "structured", "--backend", "reference", "--model", "x"],
     "backend 'reference' does not take model"),
    (["run", "--condition", "nosuch", "--backend", "reference"], "unknown condition 'nosuch'"),
    (["prompt", "--condition", "structured", "--backend", "openai", "--row", "0"],
     "backend 'openai' needs model: give it with --model NAME"),
    (["run", "--condition", "structured", "--backend", "openai"], "backend 'openai' needs model"),
])
def test_bad_flags_are_clear_errors(tmp_path, args, message):
    result = run(*args, *(["--out", str(tmp_path / "g.csv")] if args[0] == "generate" else []))
    assert result.returncode == 2 and message in result.stderr and "Traceback" not in result.stderr, result.stderr


def test_run_defaults_do_not_depend_on_the_working_directory(tmp_path):
    from cpdagthink.paths import PROJECT_ROOT

    def help_text(**env):
        import os

        return subprocess.run([sys.executable, "-m", "cpdagthink", "run", "--help"], capture_output=True, text=True,
                              cwd=tmp_path, env={**os.environ, "COLUMNS": "1000", **env}, timeout=60).stdout

    text = help_text()
    assert re.search(rf"default:\s+{re.escape(str(PROJECT_ROOT / 'outputs' / 'cache'))}", text), text[text.find("--cache"):]
    moved = tmp_path / "elsewhere"
    text = help_text(CPDAGTHINK_OUTPUTS=str(moved))
    assert re.search(rf"default:\s+{re.escape(str(moved / 'runs'))}", text), text[text.find("--out"):]


def test_the_command_line_starts_without_scipy_or_pandas():
    """`cpdagthink oracle` must not pay for libraries only the analyses use (benchmarks/oracle_cli.py times it)."""
    probe = ("import sys, cpdagthink.cli, cpdagthink.analysis.metrics, cpdagthink.causal.oracle\n"
             "print(sorted({m.split('.')[0] for m in sys.modules} & {'scipy', 'pandas', 'matplotlib', 'seaborn'}))")
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and result.stdout.strip() == "[]", result.stdout + result.stderr


def test_run_reports_n_of_m_and_fails_when_instances_are_missing(test_csv, tmp_path):
    args = ("run", "--condition", "baseline_enhanced", "--backend", "reference", "--data", str(test_csv),
            "--limit", "4", "--out", str(tmp_path / "run"), "--cache", str(tmp_path / "cache"))
    done = run(*args)
    assert done.returncode == 0 and "4 of 4 instances" in done.stdout, done.stderr
    (tmp_path / "file").write_text("x")
    clash = run(*args[:-4], "--out", str(tmp_path / "file"), "--cache", str(tmp_path / "cache"))
    assert clash.returncode == 2 and "is a file" in clash.stderr and "Traceback" not in clash.stderr


def test_prompt_command_prints_turns_and_a_probed_turn2_carries_no_trace_of_the_probe(test_csv, tmp_path, monkeypatch):
    monkeypatch.setenv("CPDAGTHINK_OUTPUTS", str(tmp_path))  # turn 1 goes through a call cache of its own

    def prompt(*extra: str) -> dict:
        result = run("prompt", "--condition", "structured", "--backend", "reference", "--data", str(test_csv),
                     "--row", "300", *extra)
        assert result.returncode == 0, result.stderr
        return json.loads(result.stdout)

    first = prompt("--turn", "1")
    assert [m["role"] for m in first["messages"]] == ["system", "user"]
    assert first["tools"][0]["function"]["name"] == "record_causal_analysis" and first["tool_choice"] == "auto"
    plain = prompt("--turn", "2")
    probed = prompt("--turn", "2", "--probe", "scramble_full", "--seed", "1")
    assert [m["role"] for m in plain["messages"]] == ["system", "user", "assistant", "tool"]
    assert plain["tool_choice"] == probed["tool_choice"] == "none" and "probe" not in plain
    assert probed["messages"][:2] == plain["messages"][:2]
    shown = probed["messages"][2]["tool_calls"][0]["function"]["arguments"]
    assert shown != plain["messages"][2]["tool_calls"][0]["function"]["arguments"]
    assert shown in probed["messages"][3]["content"]
    note = probed["probe"]["note"]
    assert note.startswith("scramble_full") and note not in json.dumps(probed["messages"])
    assert "scramble" not in json.dumps(probed["messages"])
    assert probed == prompt("--turn", "2", "--probe", "scramble_full", "--seed", "1")  # the runner's seeded draw
    assert probed["messages"] != prompt("--turn", "2", "--probe", "scramble_full", "--seed", "2")["messages"]
    assert any((tmp_path / "cache").rglob("*.json"))


def test_prompt_command_refuses_what_does_not_exist(test_csv, tmp_path, monkeypatch):
    monkeypatch.setenv("CPDAGTHINK_OUTPUTS", str(tmp_path))
    for extra, message in ((("--condition", "baseline_enhanced", "--turn", "2"), "no turn 2"),
                           (("--condition", "structured", "--probe", "magic", "--turn", "2"), "unknown probe"),
                           (("--condition", "structured", "--row", "5000"), "outside the data's rows")):
        args = ("prompt", "--data", str(test_csv), "--row", "0", *extra)
        result = run(*args)
        assert result.returncode == 2 and message in result.stderr, result.stderr


@pytest.mark.parametrize("extra", [[], ["--tool-choice", "forced"], ["--condition", "baseline_enhanced"],
                                   ["--condition", "no_thinking"], ["--seeds", "0", "1", "2"]])
def test_the_readme_api_commands_run_against_a_reasoning_model_api(test_csv, tmp_path, monkeypatch, capsys, extra):
    """The documented `cpdagthink run ... --backend openai --model gpt-5.4-mini` commands (the book's "Your own
    model and server"), as written but for the endpoint and sample size, against a server that enforces the
    reasoning-model rules (HTTP 400 for max_tokens or a temperature; reasoning tokens in usage)."""
    from reasoning_api_server import ReasoningAPIServer

    from cpdagthink.cli import main
    from cpdagthink.run.runfolder import read_records

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    args = ["run", "--condition", "structured", "--backend", "openai", "--model", "gpt-5.4-mini",
            "--reasoning-effort", "medium", "--max-tokens-turn1", "8192", "--max-tokens-answer", "4096", "--limit", "6",
            "--data", str(test_csv), "--cache", str(tmp_path / "cache"), "--out", str(tmp_path / "run"), *extra]
    with ReasoningAPIServer() as server:
        assert main([*args, "--base-url", server.url]) == 0, capsys.readouterr().err
    assert server.rejected == 0 and server.requests and set(server.paths) == {"/v1/responses"}
    assert all("max_tokens" not in body and "temperature" not in body for body in server.requests)
    thinking_off = extra[-1:] == ["no_thinking"]
    assert {body["reasoning"]["effort"] for body in server.requests} == {"none" if thinking_off else "medium"}
    folders = [tmp_path / "run"] if "--seeds" not in extra else [tmp_path / "run" / f"seed{s}" for s in (0, 1, 2)]
    for folder in folders:
        records = read_records(folder)
        assert len(records) == 6 and all(r.answer and not r.rejected for r in records)
        assert all((t.meta.get("reasoning_tokens", 0) > 0) != thinking_off for r in records for t in r.turns)
        assert all(t.meta["api"] == "responses" and (t.reasoning is None) == thinking_off
                   for r in records for t in r.turns)
    out = capsys.readouterr().out
    assert out.count("6 of 6 instances") == len(folders)


@pytest.mark.parametrize("extra, message", [
    (["--seeds", "3", "3"], "seeds: Value error, seeds repeat: [3, 3] names 3 more than once"),
    (["--backend", "openai", "--model", "m", "--timeout", "inf"], "timeout: Input should be a finite number"),
    (["-o", "max_concurrency=4"], "backend 'reference' does not take max_concurrency; it takes: no options"),
    (["--backend", "openai", "--model", "m", "-o", "max_concurrency=4", "-o", "no_such_option=1"],
     "backend 'openai' does not take no_such_option; it takes: model, base_url, api_key_env, max_concurrency"),
    (["-o", "max_concurrency"], "a backend option is KEY=VALUE, e.g. max_model_len=32768; one word has no '='"),
    (["--limit", "1100", "--sample-min-positives", "1000"],
     "a sample of 1100 rows with at least 1000 gold positives cannot be drawn: the 1162 rows"),
])
def test_run_names_what_is_wrong(test_csv, tmp_path, extra, message):
    result = run("run", "--condition", "structured", "--backend", "reference", "--data", str(test_csv),
                 "--out", str(tmp_path / "run"), "--cache", str(tmp_path / "cache"), *extra)
    assert result.returncode == 2 and message in result.stderr and "Traceback" not in result.stderr, result.stderr
    assert not (tmp_path / "run").exists()


def test_backend_options_reach_the_backend_from_dash_o_and_its_shorthands(test_csv, monkeypatch, capsys):
    """`-o KEY=VALUE` (the value read as JSON where it is JSON) and the shorthand flags fill one dict, a later one
    winning; the backend is built with exactly those options."""
    import cpdagthink.backends
    from cpdagthink.cli import main

    built = []
    make_backend = cpdagthink.backends.make_backend
    monkeypatch.setattr(cpdagthink.backends, "make_backend",
                        lambda name, **options: built.append(options) or make_backend(name, **options))
    assert main(["prompt", "--condition", "structured", "--row", "0", "--data", str(test_csv), "--backend", "openai",
                 "--model", "gpt-5.4-mini", "-o", "max_concurrency=2", "--timeout", "9", "-o", "timeout=30",
                 "--base-url", "http://127.0.0.1:9/v1", "-o", "backoff_max=1.5", "--jump-forward"]) == 2
    assert "backend 'openai' does not take jump_forward" in capsys.readouterr().err and not built
    assert main(["prompt", "--condition", "structured", "--row", "0", "--data", str(test_csv), "--backend", "openai",
                 "--model", "gpt-5.4-mini", "-o", "max_concurrency=2", "--timeout", "9", "-o", "timeout=30",
                 "--base-url", "http://127.0.0.1:9/v1", "-o", "backoff_max=1.5"]) == 0
    assert built == [{"model": "gpt-5.4-mini", "max_concurrency": 2, "timeout": 30.0,
                      "base_url": "http://127.0.0.1:9/v1", "backoff_max": 1.5}]


def test_data_with_nothing_to_run_is_refused_clearly(tmp_path):
    (tmp_path / "empty.csv").write_text("input,label,num_variables,template\n")
    for data, message in ((tmp_path / "empty.csv", "empty.csv holds no rows (a header only?)"),
                          (tmp_path, f"{tmp_path} is a directory, not a CSV file")):
        result = run("run", "--condition", "structured", "--backend", "reference", "--data", str(data),
                     "--out", str(tmp_path / "run"), "--cache", str(tmp_path / "cache"))
        assert result.returncode == 2 and message in result.stderr and "0 of 0" not in result.stdout, result.stderr


def test_run_sends_each_host_only_its_own_key_and_refuses_a_key_in_a_query_string(test_csv, tmp_path, monkeypatch,
                                                                                  capsys):
    """`run --base-url` of a non-OpenAI host: the environment's OPENAI_API_KEY never reaches it; the URL's key,
    or the variable named by --api-key-env, does. A key in the query string or with an unencoded '/' is refused
    before anything is written, and the console, config.json and metadata.json hold none of it."""
    from reasoning_api_server import ReasoningAPIServer

    from cpdagthink.backends.openai_api.endpoints import NO_KEY
    from cpdagthink.cli import main
    from cpdagthink.credentials import ENV_CREDENTIALS

    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai-only-1111")
    monkeypatch.setenv("PROXY_KEY", "sk-proxy-2222")
    monkeypatch.setenv(ENV_CREDENTIALS, "{}")
    args = ["run", "--condition", "baseline_enhanced", "--backend", "openai", "--model", "gpt-5.4-mini",
            "--reasoning-effort", "low", "--limit", "2", "--data", str(test_csv)]
    with ReasoningAPIServer() as server:
        plain = server.url
        keyed = plain.replace("http://", "http://u:sk-url%2Fkey-urlsecretqz@")
        for n, (extra, sent) in enumerate((([plain], NO_KEY), ([keyed], "sk-url/key-urlsecretqz"),
                                           ([plain, "--api-key-env", "PROXY_KEY"], "sk-proxy-2222"))):
            before = len(server.authorizations)
            monkeypatch.setenv(ENV_CREDENTIALS, "{}")  # each command a process of its own
            assert main([*args, "--base-url", *extra, "--out", str(tmp_path / f"run{n}"),
                         "--cache", str(tmp_path / f"cache{n}")]) == 0, capsys.readouterr().err
            assert server.rejected == 0 and set(server.authorizations[before:]) == {f"Bearer {sent}"}
        for bad, says in ((f"{plain}?api-key=sk-query-querysecretqz", "query string (api-key)"),
                          (plain.replace("http://", "http://u:sk-query/querysecretqz@"), "percent-encode the key")):
            assert main([*args, "--base-url", bad, "--out", str(tmp_path / "refused"),
                         "--cache", str(tmp_path / "refused")]) == 2
            err = capsys.readouterr().err
            assert says in err and "querysecretqz" not in err and "Port could not be cast" not in err
    assert not (tmp_path / "refused").exists()
    console = capsys.readouterr()
    written = b"".join(p.read_bytes() for p in tmp_path.rglob("*.json*"))
    for secret in ("sk-openai-only-1111", "sk-proxy-2222", "urlsecretqz", "querysecretqz"):
        assert secret not in console.out + console.err and secret.encode() not in written
    assert b'"api_key_env": "PROXY_KEY"' in (tmp_path / "run2" / "config.json").read_bytes()


def test_a_run_whose_every_request_is_refused_fails_with_its_own_message(test_csv, tmp_path, monkeypatch, capsys):
    """Fewer requests than the early stop needs (five), every one refused (HTTP 400 for max_tokens)."""
    from reasoning_api_server import ReasoningAPIServer

    from cpdagthink.cli import main

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    with ReasoningAPIServer() as server:
        code = main(["run", "--condition", "baseline_enhanced", "--backend", "openai", "--model", "gpt-5.4-mini",
                     "--api", "chat", "--token-param", "max_tokens", "--limit", "2", "--data", str(test_csv),
                     "--base-url", server.url,
                     "--cache", str(tmp_path / "cache"), "--out", str(tmp_path / "run")])
    assert code == 1 and server.rejected == 2
    err = capsys.readouterr().err
    assert "the service refused every request of this run (2 instances, none answered)" in err
    assert "max_tokens" in err


def test_sigterm_ends_a_run_like_ctrl_c(test_csv, tmp_path):
    import os
    import signal
    import time

    from reasoning_api_server import ReasoningAPIServer

    with ReasoningAPIServer(latency_s=2.0) as server:
        process = subprocess.Popen(
            [sys.executable, "-m", "cpdagthink", "run", "--condition", "baseline_enhanced", "--backend", "openai",
             "--model", "gpt-5.4-mini", "--limit", "20", "--data", str(test_csv), "--base-url", server.url,
             "--cache", str(tmp_path / "cache"), "--out", str(tmp_path / "run")],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, "OPENAI_API_KEY": "sk-test"})
        deadline = time.monotonic() + 60
        while not server.requests and time.monotonic() < deadline:
            time.sleep(0.05)
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=60)
    assert process.returncode == 143, err
    assert "terminated by SIGTERM; every finished record is kept" in err and "Traceback" not in err
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["status"] == "interrupted" and summary["message"] == "terminated by SIGTERM"


@pytest.mark.parametrize("extra, message", [
    (["--sample-min-positives", "9"], "a sample of 4 rows cannot hold 9 positives"),
    (["--sample-variables", "99"], "no row has [99] variables"),
    (["--backend", "reference", "--model", "x"], "backend 'reference' does not take model"),
])
def test_book_refuses_what_run_refuses_before_any_notebook(test_csv, tmp_path, monkeypatch, capsys, extra, message):
    """The chapters' own defaults (a sample of 4 drawn from rows with five and six variables) with the flags given."""
    import cpdagthink.book.build
    from cpdagthink.cli import main

    monkeypatch.setenv("CORR2CAUSE_CSV", str(test_csv))
    started = []
    monkeypatch.setattr(cpdagthink.book.build, "execute", lambda *args: started.append(args))
    assert main(["book", *extra]) == 2
    assert message in capsys.readouterr().err and not started
    if "--sample-variables" not in extra:  # a flag of `book` only
        assert main(["run", "--condition", "structured", "--backend", "reference", "--limit", "4", *extra,
                     "--out", str(tmp_path / "run")]) == 2
        assert message in capsys.readouterr().err


def _main_alone(tmp_path, prelude: str, *args: str, **env: str) -> subprocess.CompletedProcess:
    """``cpdagthink ARGS`` in a process of its own after ``prelude`` (Python that sets what the test needs): its
    standard error holds only what the command wrote (in this process, a loopback server an earlier test left
    may write there too)."""
    script = tmp_path / "main_alone.py"
    script.write_text(f"import sys\n{prelude}\nfrom cpdagthink.cli import main\nsys.exit(main(sys.argv[1:]))\n")
    return subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True, timeout=300,
                          env={**os.environ, **env})


def test_a_split_out_of_reach_offline_is_one_line_naming_the_file_to_place_and_where(test_csv, tmp_path):
    """The paraphrase split offline: ``run`` and ``book`` (its chapter 02's OOD split, before any notebook) say in
    one line which file to place where; once placed, that file is what is read."""
    # the hub client fails at once, as with no network, and finds no earlier download
    offline = {"HF_HUB_OFFLINE": "1", "CORR2CAUSE_CSV": str(tmp_path / "test.csv")}
    no_download = f"import cpdagthink.run.data as data; data.HUB_CACHE = __import__('pathlib').Path({str(tmp_path / 'hub')!r})"
    shutil.copy(test_csv, tmp_path / "test.csv")
    place = f"place its perturbation_by_paraphrasing_test.csv at {tmp_path / 'perturbation_by_paraphrasing_test.csv'}"
    run_ood = ["run", "--condition", "structured", "--backend", "reference", "--split", "perturbation_by_paraphrasing",
               "--out", str(tmp_path / "run")]
    for args in (run_ood, ["book", "--only", "02", "--backend", "reference", "-p", "ood_split=perturbation_by_paraphrasing"]):
        result = _main_alone(tmp_path, no_download, *args, **offline)
        assert result.returncode == 2 and len(result.stderr.splitlines()) == 1, result.stderr
        assert "could not fetch split 'perturbation_by_paraphrasing'" in result.stderr and place in result.stderr
        assert "set CORR2CAUSE_CSV" not in result.stderr and "executing" not in result.stdout  # no notebook started
    shutil.copy(test_csv, tmp_path / "perturbation_by_paraphrasing_test.csv")  # the test split: not its size
    result = _main_alone(tmp_path, no_download, *run_ood, **offline)
    assert "the 'perturbation_by_paraphrasing' split does not match its fingerprint" in result.stderr, result.stderr


def test_a_chapter_that_cannot_write_its_runs_says_so_in_one_line(test_csv, tmp_path):
    """The outputs folder cannot be written (here a file stands where a folder should, which even root cannot
    write into): ``book`` says what ``run`` says, naming the chapter, in one line."""
    into_here = ("import functools, pathlib, cpdagthink.book.build as build\n"
                 f"build.build = functools.partial(build.build, root=pathlib.Path({str(tmp_path)!r}))")
    (tmp_path / "outputs").write_text("a file, not a folder")
    result = _main_alone(tmp_path, into_here, "book", "--only", "01", "--backend", "reference", "--limit", "2",
                         "--no-build", "-p", f"out_root={tmp_path / 'outputs' / 'runs'}",
                         "-p", f"cache_dir={tmp_path / 'cache'}", CORR2CAUSE_CSV=str(test_csv))
    assert result.returncode == 2 and len(result.stderr.splitlines()) == 1, result.stderr
    assert re.match(rf"cpdagthink book: error: 01_main_results: cannot create the run folder "
                    rf"{re.escape(str(tmp_path / 'outputs' / 'runs'))}/\S+: Not a directory", result.stderr)
    assert not (tmp_path / "book" / "01_main_results.ipynb").exists()


README_API_RUN = ["run", "--condition", "structured", "--backend", "openai", "--model", "gpt-5.4-mini",
                  "--reasoning-effort", "medium", "--max-tokens-turn1", "8192", "--max-tokens-answer", "4096"]


def test_a_run_whose_every_request_is_refused_exits_non_zero(test_csv, tmp_path, monkeypatch, capsys):
    """The documented command forced onto chat completions, which refuse tools with an effort from gpt-5.4 on."""
    from reasoning_api_server import ReasoningAPIServer

    from cpdagthink.cli import main

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    with ReasoningAPIServer() as server:
        code = main([*README_API_RUN, "--api", "chat", "--limit", "6", "--data", str(test_csv), "--base-url", server.url,
                     "--cache", str(tmp_path / "cache"), "--out", str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert code == 2 and server.rejected == len(server.requests) == 6, err  # one chunk, then it stops
    assert "Function tools with reasoning_effort are not supported for gpt-5.4-mini" in err


def test_timeout_bounds_a_trickling_server(test_csv, tmp_path, monkeypatch, capsys):
    import time

    from reasoning_api_server import ReasoningAPIServer

    from cpdagthink.cli import main

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    with ReasoningAPIServer(fault="trickle") as server:
        start = time.perf_counter()
        code = main([*README_API_RUN, "--limit", "1", "--data", str(test_csv), "--base-url", server.url,
                     "--timeout", "3", "--retries", "0", "--cache", str(tmp_path / "cache"), "--out", str(tmp_path / "run")])
        took = time.perf_counter() - start
    assert code != 0 and took < 8 and "did not answer within 3 s" in capsys.readouterr().err


def test_generate_and_oracle_refuse_an_out_they_cannot_write_before_any_work(tmp_path):
    """A folder, or a path under a file (a path no one can create, root included), is refused in one line."""
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    data = tmp_path / "rows.csv"
    data.write_text("input,label,num_variables,template\n")
    for out, said in ((tmp_path, "is a folder: name the file to write"),
                      (blocker / "g.csv", f"cannot be written (not a folder: {blocker})"),
                      (blocker / "deeper" / "g.csv", f"cannot be written (not a folder: {blocker})")):
        for args in (["generate", "--family", "asia8", "--per-graph", "2"], ["oracle", "--data", str(data)],
                     ["reference", "--data", str(data)]):
            result = run(*args, "--out", str(out))
            assert result.returncode == 2 and said in result.stderr and "Traceback" not in result.stderr, result.stderr


def test_generate_refuses_a_csv_without_rows(tmp_path):
    data = tmp_path / "header.csv"
    data.write_text("input,label,num_variables,template\n")
    result = run("generate", "--family", "paraphrase", "--data", str(data), "--out", str(tmp_path / "p.csv"))
    assert result.returncode == 2 and f"{data} holds no rows (a header only)" in result.stderr, result.stderr
    assert not (tmp_path / "p.csv").exists()


def test_oracle_on_rows_it_labels_none_of_writes_them_and_ends_well(tmp_path):
    header = ("Premise: Suppose there is a closed system of 3 variables, A, B and C. All the statistical relations "
              "among these 3 variables are as follows: A correlates with C. B correlates with C. However, A is "
              "independent of B. A and B are independent given C.\nHypothesis: A directly causes C.")
    data = tmp_path / "unfaithful.csv"
    data.write_text('input,label,num_variables,template\n"' + header + '",0,3,parent\n')
    result = run("oracle", "--data", str(data), "--out", str(tmp_path / "o.jsonl"))
    assert result.returncode == 0, result.stderr
    assert "labelled 0/1 rows" in result.stdout and "no score, no row was labelled" in result.stdout
    assert json.loads((tmp_path / "o.jsonl").read_text())["problem"].startswith("unfaithful premise")


def test_run_ends_non_zero_saying_how_many_instances_were_not_answered(test_csv, tmp_path):
    from loopback_api import Faults, LoopbackAPI

    with LoopbackAPI(faults=Faults(rate=0.5, kinds=("503",), times=1 << 30, seed=4)) as server:
        args = ("run", "--condition", "baseline_enhanced", "--backend", "openai", "--model", "gpt-4.1-mini",
                "--base-url", server.url, "-o", "retries=0", "-o", "fail_on_error=0", "--data", str(test_csv),
                "--limit", "6", "--out", str(tmp_path / "run"), "--cache", str(tmp_path / "cache"))
        done = run(*args)
    missing = 6 - int(done.stdout.split(" of 6")[0])
    assert done.returncode == 1 and 0 < missing < 6, done.stderr
    assert f"finished with {missing} instance" in done.stderr and "not answered" in done.stderr
    assert "Traceback" not in done.stderr


def test_run_stops_at_its_budget_with_exit_3_saying_what_was_spent_and_the_higher_limit_resumes(test_csv, tmp_path):
    from loopback_api import LoopbackAPI

    with LoopbackAPI() as server:
        args = ("run", "--condition", "baseline_enhanced", "--backend", "openai", "--model", "gpt-4.1-mini",
                "--base-url", server.url, "-o", "price_input=1", "-o", "price_output=10", "--data", str(test_csv),
                "--limit", "8", "--out", str(tmp_path / "run"), "--cache", str(tmp_path / "cache"),
                "-o", "max_concurrency=1")  # one call in flight: where it stops does not hang on how calls overlap
        stopped = run(*args, "-o", "max_cost=0.0125")  # above one call's worst case, below eight calls' spending
        kept = json.loads((tmp_path / "run" / "summary.json").read_text())
        resumed = run(*args, "-o", "max_cost=1")
    assert kept["status"] == "stopped" and 0 < kept["records"] < 8
    assert stopped.returncode == 3 and "Traceback" not in stopped.stderr, stopped.stderr
    assert re.search(r"stopped by the budget: spent \$0\.0\d+ of max_cost \$0\.0125 .* left", stopped.stderr)
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["records"] == 8


# ----------------------------------------------------------------------------------------- help that tells the truth
def _help(capsys, *command: str) -> str:
    """``cpdagthink [COMMAND] --help`` as printed, its lines joined (argparse wraps at the terminal's width)."""
    from cpdagthink.cli import main

    with pytest.raises(SystemExit) as done:
        main([*command, "--help"])
    assert done.value.code == 0
    return " ".join(capsys.readouterr().out.split())


def test_the_help_opens_with_a_users_summary_and_says_once_what_needs_a_checkout(capsys):
    from cpdagthink import cli
    from cpdagthink.paths import CHECKOUT_COMMANDS, NEEDS_CHECKOUT

    top = _help(capsys)
    summary = top.split("positional arguments:")[0]
    assert " ".join(cli.DESCRIPTION.split()) in summary and "Corr2Cause" in summary
    assert " ".join(cli.__doc__.split()[:6]) not in top and "a reader greps" not in top  # the maintainer's docstring
    assert top.endswith(" ".join(NEEDS_CHECKOUT.split()) + ".")
    assert top.count("(needs a checkout)") == len(CHECKOUT_COMMANDS) == 3
    for command in ("book", "plan", "render"):
        own = _help(capsys, command)
        assert "(needs a checkout)" in own.split("options:")[0], command  # its description
        assert own.endswith(" ".join(NEEDS_CHECKOUT.split()) + ".")
    for command in ("run", "prompt", "oracle"):
        assert "needs a checkout" not in _help(capsys, command)


def test_prompt_help_names_the_backend_prompt_uses_and_run_help_its_own(test_csv, tmp_path, capsys):
    """`prompt` answers turn 1 with the reference backend unless told otherwise (so a printed turn 2 costs no
    model), and its help says so; `run`'s default is the local model, and its help says that."""
    from cpdagthink.backends.reference import ReferenceBackend
    from cpdagthink.cli import main
    from cpdagthink.method.conditions import first_request, get_condition, read_emitted
    from cpdagthink.method.decoding import Decoding
    from cpdagthink.run.data import read_csv

    assert "--backend BACKEND reference (default here" in _help(capsys, "prompt")
    assert "--backend BACKEND local (default)" in _help(capsys, "run")
    assert main(["prompt", "--condition", "structured", "--row", "3", "--turn", "2", "--data", str(test_csv),
                 "--cache", str(tmp_path / "cache")]) == 0
    shown = json.loads(capsys.readouterr().out)["messages"]
    instance = read_csv(test_csv)[3]
    oracle = read_emitted(ReferenceBackend().complete(first_request(get_condition("structured"), instance, Decoding())))
    assert any(oracle.analysis.model_dump_json() in str(m.get("content")) for m in shown)  # the oracle's answer


def test_a_model_given_to_prompts_default_backend_says_which_backend_runs_it(test_csv):
    result = run("prompt", "--condition", "structured", "--row", "0", "--model", "smollm2-135m", "--data",
                 str(test_csv))
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert "backend 'reference' does not take model" in result.stderr
    assert "name the backend that runs yours, e.g. --backend local" in result.stderr


def test_plan_and_render_outside_a_checkout_say_what_they_need(tmp_path, monkeypatch, capsys):
    """As a package install runs them: no notebooks folder, no _toc.yml (`tests/test_wheel.py` runs them so)."""
    import functools

    from cpdagthink.book import build
    from cpdagthink.cli import main
    from cpdagthink.paths import NEEDS_CHECKOUT

    monkeypatch.setattr("cpdagthink.book.chapters.NOTEBOOKS", tmp_path / "notebooks")
    monkeypatch.setattr("cpdagthink.book.build.render", functools.partial(build.render, root=tmp_path))
    for command, missing in ((["plan", "--only", "06"], "notebooks"), (["plan"], "notebooks"),
                             (["render"], "_toc.yml")):
        assert main(command) == 2
        captured = capsys.readouterr()
        assert captured.err == f"cpdagthink {command[0]}: error: {tmp_path / missing} is missing: {NEEDS_CHECKOUT}\n"
        assert not captured.out  # no empty plan printed


@pytest.mark.parametrize("command", ["book", "plan"])
def test_list_parameters_prints_each_chapters_parameters_defaults_and_help_and_runs_nothing(command, monkeypatch,
                                                                                            capsys):
    import cpdagthink.book.build
    import cpdagthink.book.plan

    from cpdagthink.cli import main

    for module, name in ((cpdagthink.book.build, "build"), (cpdagthink.book.plan, "plan_book")):
        monkeypatch.setattr(module, name, lambda *args, **kwargs: pytest.fail("--list-parameters ran something"))
    assert main([command, "--only", "04", "03", "--list-parameters"]) == 0
    out = capsys.readouterr().out
    chapters = out.split("\n\n")
    assert [c.splitlines()[0] for c in chapters] == ["03_ablations", "04_probes"]
    probes = chapters[1].splitlines()
    assert probes[1:3] == ['  backend = "local"', "      local | openai | vllm | reference"]
    # a comment line above a parameter is its help too; a parameter without a comment has none
    at = probes.index("  include_reference = True")
    assert probes[at - 2].startswith("  probes = ") and at == len(probes) - 1
    assert "      seeds the sample's draw (Sample.sample_seed); the decoding seeds are seeds" in probes
    assert any(line.startswith("      The paper's five probes") for line in probes)
    # a default the cell spreads over two lines keeps its second line, indented under the first
    assert '  conditions = ["structured", "minimal_instruction", "no_thinking", "no_constrained_decoding", ' \
           '"baseline_enhanced",\n                "baseline_no_thinking"]' in chapters[0]


def test_a_named_budget_set_reaches_run_and_the_book_and_an_explicit_budget_wins():
    from cpdagthink.cli import _parameters, book_papermill_parameters, build_parser

    given = book_papermill_parameters(["--budgets", "paper", "--max-tokens-answer", "7", "--only", "01"])
    assert {k: given["01_main_results"][k] for k in ("max_tokens_turn1", "max_tokens_answer")} == \
        {"max_tokens_turn1": 16384, "max_tokens_answer": 7}
    default = book_papermill_parameters(["--only", "01"])["01_main_results"]
    assert "max_tokens_turn1" not in default  # the notebook's own default, the same set
    args = build_parser().parse_args(["run", "--condition", "structured", "--budgets", "paper"])
    assert _parameters(args).to_config().decoding.max_tokens_turn1 == 16384
    assert run("run", "--condition", "structured", "--budgets", "huge").returncode == 2
