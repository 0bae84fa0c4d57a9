"""The command line contracts other issues and reviewers rely on."""

from __future__ import annotations

import json
import re
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
    import cpdagthink.book
    from cpdagthink.cli import main

    seen = {}
    monkeypatch.setattr(cpdagthink.book, "build", lambda overrides, only=None: seen.update(overrides, only=only) or "index.html")
    assert main(["book", "--backend", "openai", "--limit", "0", "--seeds", "0", "1",
                 "--max-tokens-turn1", "8192", "--max-tokens-answer", "4096", "--only", "01",
                 "--sample-variables", "5", "6"]) == 0
    assert seen == {"backend": "openai", "limit": 0, "seeds": [0, 1], "max_tokens_turn1": 8192,
                    "max_tokens_answer": 4096, "only": ["01"], "sample_variables": [5, 6]}
    assert "book: index.html" in capsys.readouterr().out
    assert main(["book", "--sample-variables", "all"]) == 0 and seen["sample_variables"] is None
    with pytest.raises(SystemExit):
        main(["book", "--sample-variables", "five"])


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
