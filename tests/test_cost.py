"""The cost before the run: the calls ``reproduce --dry-run`` counts are those the run then makes, what is done
is not priced, and earlier runs of the same model measure the tokens and the time per call."""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cpdagthink.book.cost import Pricing, plan_cost
from cpdagthink.book.recipes import selected
from cpdagthink.book.reproduce import plan_recipes


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cpdagthink", *args], capture_output=True, text=True, timeout=600)


def total_calls(text: str) -> int:
    return int(re.search(r"total: ([\d,]+) calls", text).group(1).replace(",", ""))


def calls_made(runs: Path) -> int:
    return sum(json.loads((f / "metadata.json").read_text())["model_calls_this_session"] for f in runs.iterdir())


@pytest.fixture
def where(test_csv, tmp_path, monkeypatch):
    monkeypatch.setenv("CORR2CAUSE_CSV", str(test_csv))
    return ["-p", f"out_root={tmp_path / 'runs'}", "-p", f"cache_dir={tmp_path / 'cache'}"]


def test_the_dry_run_counts_the_calls_a_loopback_api_run_then_makes(where, tmp_path):
    """Appendix A.1 against a loopback OpenAI-compatible server: three runs (auto, forced, the baseline) whose
    turn 1 differs; the server counts every request it answers."""
    sys.path.insert(0, str(Path(__file__).parent))
    from reasoning_api_server import ReasoningAPIServer

    with ReasoningAPIServer() as server:
        flags = ["APPENDIX_A1", "--limit", "4", "--base-url", server.url, *where]
        planned = cli("reproduce", *flags, "--dry-run", "--price-input", "0.5", "--price-output", "4")
        assert planned.returncode == 0, planned.stderr
        assert total_calls(planned.stdout) == 4 * 2 + 4 * 2 + 4  # two turns, two turns, one
        assert "call cache: empty" in planned.stdout and "price $" in planned.stdout
        made = cli("reproduce", *flags)
        assert made.returncode == 0, made.stderr
        assert len(server.requests) == total_calls(planned.stdout) == calls_made(tmp_path / "runs")
        again = cli("reproduce", *flags, "--dry-run", "--price-input", "0.5", "--price-output", "4")
    assert total_calls(again.stdout) == 0 and "4 of 4 rows recorded" in again.stdout
    assert "price $0.00–$0.00" in again.stdout


def test_cached_calls_are_not_priced_and_earlier_runs_measure_tokens_and_time(where, tmp_path):
    """A run whose folder is gone but whose calls are cached costs nothing; a new sample of the same model is
    priced from the tokens its earlier runs' records counted."""
    sys.path.insert(0, str(Path(__file__).parent))
    from reasoning_api_server import ReasoningAPIServer

    with ReasoningAPIServer() as server:
        overrides = {"backend": "openai", "backend_options": {"base_url": server.url}, "limit": 4,
                     "out_root": str(tmp_path / "runs"), "cache_dir": str(tmp_path / "cache")}
        recipes = selected(["APPENDIX_A1"])
        assert cli("reproduce", "APPENDIX_A1", "--limit", "4", "--base-url", server.url, *where).returncode == 0
        other = plan_cost(plan_recipes(recipes, {**overrides, "limit": 6}), Pricing(1.0, 10.0))
        for folder in (tmp_path / "runs").iterdir():
            shutil.copytree(folder, tmp_path / "kept" / folder.name)
            shutil.rmtree(folder)
        refetched = plan_cost(plan_recipes(recipes, overrides), Pricing(1.0, 10.0))
    assert all(c.pending.calls == 0 and c.pending.cached > 0 for c in refetched)  # the cache answers all
    measured = [c for c in other if c.tokens_measured]
    assert measured and all(c.expected is not None and c.expected <= c.ceiling for c in measured)
    assert all(c.price[0] <= c.price[1] for c in other)
    assert all(c.wall_s is not None for c in other)  # the records' latencies


def test_plan_cost_prints_per_run_and_total(where):
    shown = cli("plan", "--cost", "--backend", "reference", "--limit", "3", "--only", "01", *where)
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[0].startswith("calls") and any(line.startswith("total: ") for line in lines)
    assert "estimated from characters" in shown.stdout


def test_the_batch_price_stands_beside_the_direct_one_where_the_backend_offers_batches(tmp_path):
    from cpdagthink.book.cost import BATCH_SHARE, cost_lines

    def costs(**overrides):
        return plan_cost(plan_recipes(selected(["APPENDIX_A1"]), {"limit": 4, "out_root": str(tmp_path / "runs"),
                                                                  "cache_dir": str(tmp_path / "cache"), **overrides}),
                         Pricing(1.0, 10.0))

    api = costs(backend="openai", backend_options={"base_url": "http://127.0.0.1:9/v1"})
    assert all(c.batch_price == (c.price[0] * BATCH_SHARE, c.price[1] * BATCH_SHARE) for c in api)
    shown = "\n".join(cost_lines(api))
    assert "batch price" in shown and "with batch files where a backend offers them" in shown
    batched = costs(backend="openai", backend_options={"base_url": "http://127.0.0.1:9/v1", "batch": True})
    assert all(c.wall_s is None and c.batch_price == a.batch_price for c, a in zip(batched, api))
    local = costs(backend="local")
    assert all(c.price is not None and c.batch_price is None for c in local)
    assert "with batch files" not in "\n".join(cost_lines(local))


def test_without_given_prices_a_run_on_the_service_is_priced_at_its_list_price_with_date_and_source(tmp_path):
    """Appendix A.1 on OpenAI's service (nothing is called: the plan only builds the client) is priced at
    GPT-5.4-mini's list price, its batch price at the listed batch price; given prices win; a self-hosted model
    has no price and the notes say so."""
    from cpdagthink.backends.profiles import list_price
    from cpdagthink.book.cost import cost_lines

    def costs(pricing=Pricing(), **overrides):
        return plan_cost(plan_recipes(selected(["APPENDIX_A1"]), {"limit": 4, "out_root": str(tmp_path / "runs"),
                                                                  "cache_dir": str(tmp_path / "cache"), **overrides}),
                         pricing)

    listed = list_price("gpt-5.4-mini")
    api = costs()
    for c in api:
        paid = c.prompt_tokens * listed.input_per_m
        assert c.price == pytest.approx((paid / 1e6, (paid + c.ceiling * listed.output_per_m) / 1e6))
        batch = c.prompt_tokens * listed.batch_input_per_m + c.ceiling * listed.batch_output_per_m
        assert c.batch_price[1] == pytest.approx(batch / 1e6) and c.rates.source == listed.citation
    shown = "\n".join(cost_lines(api))
    assert f"price of openai:gpt-5.4-mini: $0.75 a million prompt tokens, $4.50 a million completion tokens, batch " \
           f"$0.375 and $2.25; {listed.citation}" in shown and "total: " in shown and "price $" in shown
    given = costs(Pricing(1.0, 10.0))
    assert all(c.rates.source == "given" and c.price[1] > a.price[1] for c, a in zip(given, api))
    assert "given (--price-input, --price-output)" in "\n".join(cost_lines(given))
    local = costs(backend="vllm", model="Qwen/Qwen3.5-27B")
    assert all(c.price is None and c.rates is None for c in local)
    assert "no price for vllm:Qwen/Qwen3.5-27B: no list price recorded" in "\n".join(cost_lines(local))


# ------------------------------------------------------------------------------ the Paraphrase-OOD split, absent and placed
OOD_FILE = "perturbation_by_paraphrasing_test.csv"


@pytest.fixture
def beside(test_csv, tmp_path) -> Path:
    """A folder holding a copy of the test split, where the OOD split is then looked for (beside it)."""
    shutil.copy(test_csv, tmp_path / "test.csv")
    return tmp_path


def offline_cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    """``cpdagthink ARGS`` on the test split in ``tmp_path`` (:func:`beside`), the hub unreachable (it fails at
    once, as with no network) and its cache empty (no earlier download is found)."""
    script = tmp_path / "offline_cli.py"
    script.write_text("import pathlib, sys\nimport cpdagthink.run.data as data\n"
                      f"data.HUB_CACHE = pathlib.Path({str(tmp_path / 'hub')!r})\n"
                      "from cpdagthink.cli import main\nsys.exit(main(sys.argv[1:]))\n")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "CORR2CAUSE_CSV": str(tmp_path / "test.csv")}
    return subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True, timeout=600, env=env)


def place_ood_file(tmp_path: Path) -> None:
    """A stand-in for the Paraphrase-OOD file where it is looked for: the test split's rows, then its first ones
    again, to the split's published size (2246 rows), which is all its fingerprint checks."""
    with (tmp_path / "test.csv").open(newline="", encoding="utf-8") as handle:
        header, *rows = list(csv.reader(handle))
    with (tmp_path / OOD_FILE).open("w", newline="", encoding="utf-8") as handle:
        csv.writer(handle).writerows([header, *rows, *rows[:2246 - len(rows)]])


def test_a_dry_run_of_every_recipe_without_the_ood_file_prices_the_rest_and_names_the_file_to_place(beside):
    """Exit 1, no traceback: every other run priced and the total of those, then one line naming the results
    that read the split and the file to place where; once placed, those runs are priced too."""
    flags = ["PAPER", "--dry-run", "--backend", "reference", "--temperature", "0.7", "--limit", "3",
             "-p", "stress_families=[]", "-p", f"out_root={beside / 'runs'}", "-p", f"cache_dir={beside / 'cache'}"]
    shown = offline_cli(beside, "reproduce", *flags)
    assert shown.returncode == 1 and "Traceback" not in shown.stderr, shown.stderr
    lines = shown.stdout.splitlines()
    missing = [line for line in lines if line.startswith("not planned: ")]
    assert len(missing) == 1 and sum(line.startswith("total: ") for line in lines) == 1
    left = int(re.match(r"not planned: (\d+) run\(s\) of TABLE1, FIGURE2, SEC7_1, left out of the total: ",
                        missing[0]).group(1))
    assert f"place its {OOD_FILE} at {beside / OOD_FILE}" in missing[0]
    place_ood_file(beside)
    placed = offline_cli(beside, "reproduce", *flags)
    assert placed.returncode == 0 and "not planned" not in placed.stdout, placed.stderr
    runs = [line for line in lines if line.endswith("rows recorded)")]
    assert len([line for line in placed.stdout.splitlines() if line.endswith("rows recorded)")]) == len(runs) + left


def test_with_the_ood_file_placed_the_dry_run_counts_the_calls_a_loopback_run_of_figure_2_then_makes(beside):
    """Figure 2's recipe (chapter 02 on ID and on Paraphrase-OOD) against a loopback chat-completions server: the
    dry run without the file leaves out the OOD grid; with it, counts every call, and the run makes as many."""
    sys.path.insert(0, str(Path(__file__).parent))
    from loopback_api import LoopbackAPI

    with LoopbackAPI() as server:
        flags = ["FIGURE2", "--backend", "openai", "--model", "gpt-4.1-mini", "--base-url", server.url, "--limit", "4",
                 "-p", f"out_root={beside / 'runs'}", "-p", f"cache_dir={beside / 'cache'}"]
        without = offline_cli(beside, "reproduce", *flags, "--dry-run")
        assert without.returncode == 1 and "not planned: 2 run(s) of FIGURE2" in without.stdout, without.stderr
        place_ood_file(beside)
        planned = offline_cli(beside, "reproduce", *flags, "--dry-run")
        assert planned.returncode == 0 and "not planned" not in planned.stdout, planned.stderr
        assert total_calls(planned.stdout) == 2 * total_calls(without.stdout)  # the OOD grid: as many rows and turns
        made = offline_cli(beside, "reproduce", *flags)
        assert made.returncode == 0, made.stderr
        assert len(server.log) == total_calls(planned.stdout) == calls_made(beside / "runs")
    assert len(list((beside / "runs").iterdir())) == 4  # two conditions on each split
