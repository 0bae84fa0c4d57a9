"""Chapter 07's runs: the design's cells from the chapter's parameters, refused cells with their reasons, the cost
before anything runs, and the records read back only when every run is complete."""

from __future__ import annotations

import pytest

from cpdagthink.book import components, experiments as ex, plan
from cpdagthink.method.design import Point


@pytest.fixture()
def roots(test_csv, tmp_path, monkeypatch):
    monkeypatch.setenv("CORR2CAUSE_CSV", str(test_csv))
    return {"out_root": str(tmp_path / "runs"), "cache_dir": str(tmp_path / "cache")}


def _setup(roots, **values):
    return ex.setup_from_parameters({"backend": "reference", "limit": 6, "sample_variables": [5, 6],
                                     "sample_min_positives": 2, **roots, **values})


def test_the_cells_follow_the_design_parameters():
    assert len(components.cells_of({})) == 18 and components.cells_of({})[0] == Point()
    assert len(components.cells_of({"design": "half"})) == 10
    assert [p.name for p in components.cells_of({"factors": '["constraint"]', "include_prose": False})] == \
        ["structured", "no_constrained_decoding"]
    with pytest.raises(ValueError, match="unknown factor"):
        components.cells_of({"factors": ["colour"]})


def test_the_design_runs_only_when_asked_and_its_cost_is_counted_before(roots):
    setup = _setup(roots)
    assert components.design_runs(setup, {}) == []
    runs = components.design_runs(setup, {"run_design": True})
    assert len(runs) == 19 and runs[-1][0] == ("structured_repair", 0)
    cost = components.design_cost(setup, {}, 6)
    assert (cost.runs, cost.instances, cost.calls) == (19, 19 * 6, 18 * 2 * 6 + 3 * 6)
    assert cost.tokens == 18 * 6 * (setup.decoding.max_tokens_turn1 + setup.decoding.max_tokens_answer) + \
        6 * (2 * setup.decoding.max_tokens_turn1 + setup.decoding.max_tokens_answer)


def test_a_cell_the_backend_cannot_apply_is_refused_by_the_plan_with_its_reason(roots):
    overrides = {"backend": "openai", "model": "gpt-5.4-mini", "backend_options": {"base_url": "http://127.0.0.1:9/v1"},
                 **roots}
    setup = ex.setup_from_parameters(overrides)
    refused = components.refused_cells(setup, components.cells_of({}))
    assert set(refused) == {p.name for p in components.cells_of({}) if p.intermediate == "typed"
                            and p.constraint == "regex"}
    assert all("regex_mode=vllm" in why for why in refused.values())
    planned = plan.plan_book(overrides, only=["07"], parameters={"run_design": True})
    names = {r.config.condition for r in planned}
    assert not names & set(refused) and "no_constrained_decoding" in names and "light_prose" in names
    vllm = {**overrides, "backend_options": {**overrides["backend_options"], "regex_mode": "vllm"}}
    assert components.refused_cells(ex.setup_from_parameters(vllm), components.cells_of({})) == {}


def test_the_default_book_plans_no_design_run_and_run_design_plans_them_all(roots):
    assert plan.plan_book({"backend": "reference", **roots}, only=["07"]) == []
    planned = plan.plan_book({"backend": "reference", **roots}, only=["07"], parameters={"run_design": True})
    assert len(planned) == 19 and all(r.chapters == ["07_components"] for r in planned)


def test_records_are_read_back_only_when_every_run_is_complete(roots):
    setup = _setup(roots)
    values = {"factors": ["constraint"], "include_prose": False, "include_repair": False}
    instances = setup.instances()
    assert components.held(setup, values, instances) == {}
    first = components.design_runs(setup, values, planned=True)[0][1]
    ex.run(first, instances, progress=False)
    assert components.held(setup, values, instances) == {}  # one of two: not yet
    for _, config in components.design_runs(setup, values, planned=True):
        ex.run(config, instances, progress=False)
    held = components.held(setup, values, instances)
    assert set(held) == {("structured", 0), ("no_constrained_decoding", 0)}
    cells = components.cell_runs(held, 0)
    assert set(cells) == {Point(), Point(constraint="none")} and all(len(r) == 6 for r in cells.values())


def test_the_paper_scale_call_counts_in_the_docs_are_what_the_plan_counts(roots):
    """"Re-running the chapters" states the design's calls on the whole test split (1162 rows): the same counts."""
    from cpdagthink.paths import PROJECT_ROOT

    text = (PROJECT_ROOT / "book" / "using" / "rerunning.md").read_text(encoding="utf-8")
    setup = _setup(roots)
    for values, runs in (({}, 19), ({"design": "half"}, 11)):
        cost = components.design_cost(setup, values, 1162)
        assert cost.runs == runs and f"# {runs} runs, at most {cost.calls:,} model calls" in text


@pytest.mark.slow
def test_the_chapter_recovers_effects_a_loopback_server_plants(test_csv, tmp_path):
    """End to end, through the OpenAI backend and the runner: a server that reads each request's cell from what
    the request shows (tests/planted_server.py) answers with planted effects; the half fraction and the prose
    arms on 300 rows (about a minute: 6000 calls). Each planted effect lies inside its interval, the large ones
    are detected, and the null field names and delivery are called nulls."""
    from functools import partial

    from planted_server import PlantedServer
    from planted_effects import PLANTED, TYPED_OVER_LIGHT, planted_probability

    from cpdagthink.analysis import factorial

    planted = {**PLANTED, "constraint": 8.0}
    values = {"backend": "openai", "model": "planted-model", "data": str(test_csv), "limit": 300,
              "sample_variables": None, "out_root": str(tmp_path / "runs"), "cache_dir": str(tmp_path / "cache")}
    instances = ex.setup_from_parameters({**values, "backend": "reference", "model": None}).instances()
    with PlantedServer(instances, partial(planted_probability, planted=planted)) as server:
        setup = ex.setup_from_parameters({**values, "backend_options": {"base_url": server.url, "regex_mode": "vllm"}})
        design = {"run_design": True, "design": "half", "include_repair": False}
        runs = {key: ex.run(config, instances, progress=False) for key, config in components.design_runs(setup, design)}
    found = {e.name: e for e in factorial.effects(factorial.Cells.of(components.cell_runs(runs, 0)))}
    for name in ("constraint", "field_names", "delivery", "instruction"):
        assert found[name].low <= planted[name] <= found[name].high, found[name]
    interaction = next(e for e in found.values() if "delivery x instruction" in (e.name, e.aliases))
    assert interaction.low <= planted["delivery x instruction"] <= interaction.high and interaction.detected
    assert found["constraint"].detected and not found["field_names"].detected and not found["delivery"].detected
    typed = found["typed vs lightly structured prose"]
    assert typed.low <= TYPED_OVER_LIGHT <= typed.high and typed.detected
