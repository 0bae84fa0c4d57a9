"""What a run is (``run/spec.py``): its identity, folder name and group, derived from the spec alone, and the
transport options that never separate two runs."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from cpdagthink.method.conditions import CONDITIONS, describe
from cpdagthink.method.decoding import Decoding
from cpdagthink.run.data import read_csv
from cpdagthink.run.spec import (TRANSPORT_OPTIONS, RunSpec, Sample, bounded, computed_options, rows_sha256,
                                 run_identity)

PREMISE = ("Premise: Suppose there is a closed system of 2 variables, A and B. All the statistical relations among "
           "these 2 variables are as follows: {facts}.\\nHypothesis: {hypothesis}")
ROWS = [("A correlates with B", "A directly causes B.", 0), ("A correlates with B", "A and B are correlated.", 1),
        ("A is independent of B", "A directly causes B.", 0), ("A correlates with B", "B directly causes A.", 0)]


@pytest.fixture()
def rows(tmp_path) -> list:
    """Four two-variable rows of a Corr2Cause-format CSV (one gold positive)."""
    lines = ["input,label,num_variables,template"]
    lines += [f'"{PREMISE.format(facts=f, hypothesis=h)}",{label},2,parent' for f, h, label in ROWS]
    path = tmp_path / "two.csv"
    path.write_text("\n".join(lines).replace("\\n", "\n") + "\n", encoding="utf-8")
    return read_csv(path)


def _spec(**changes) -> RunSpec:
    fields = {"condition": "structured", "backend": "openai", "model": "gpt-4o", "decoding": Decoding(),
              "sample": Sample(), **changes}
    return RunSpec(**fields)


def test_the_identity_is_plain_json_of_the_condition_as_described_and_every_computed_choice():
    spec = _spec(probe="scramble_full", options={"reasoning_effort": "low"}, decoding=Decoding(seed=3))
    identity = spec.identity()
    assert json.loads(json.dumps(identity)) == identity
    assert identity == {"condition": json.loads(json.dumps(describe(CONDITIONS["structured"]))),
                        "probe": "scramble_full", "backend": "openai", "model": "gpt-4o",
                        "options": {"reasoning_effort": "low"}, "decoding": Decoding(seed=3).model_dump(mode="json")}
    assert identity["condition"]["prompt_hashes"]  # a prompt file edited makes another run
    assert identity == run_identity(describe(CONDITIONS["structured"]), "scramble_full", "openai", "gpt-4o",
                                    {"reasoning_effort": "low"}, Decoding(seed=3))


@pytest.mark.parametrize("change", [{"condition": "baseline_enhanced"}, {"probe": "scramble_full"},
                                    {"backend": "vllm"}, {"model": "gpt-4o-mini"}, {"options": {"api": "chat"}},
                                    {"decoding": Decoding(seed=1)}, {"decoding": Decoding(max_tokens_answer=64)},
                                    {"decoding": Decoding(tool_choice="forced")}])
def test_each_computed_choice_makes_another_run_with_its_own_folder(change, rows):
    base, other = _spec(), _spec(**change)
    assert other.identity() != base.identity() and other.folder_name(rows) != base.folder_name(rows)


def test_the_sample_is_not_part_of_the_identity_but_the_rows_name_the_folder(rows):
    """A folder resumed on a subset of its rows stays the same run; another sample gets another folder."""
    base, other = _spec(), _spec(sample=Sample(limit=2, sample_seed=5))
    assert other.identity() == base.identity()
    assert base.folder_name(rows) != base.folder_name(rows[:3]) != base.folder_name(rows[::-1])


def test_the_folder_name_reads_as_what_the_run_is(rows):
    spec = _spec(model="org/Model-7B", probe="drop_premise", decoding=Decoding(seed=2, tool_choice="forced"),
                 sample=Sample(data="/data/stress alarm7.csv"))
    name = spec.folder_name(rows)
    assert name.startswith(f"structured-openai-org_Model-7B-stress alarm7-n4-{rows_sha256(rows)[:8]}-seed2-dec")
    assert name.endswith("-tool-forced-probe-drop_premise") and "/" not in name
    assert _spec(model=None, sample=Sample(split="generated:paraphrase")).folder_name(rows).startswith(
        "structured-openai-default-generated_paraphrase-n4-")
    long = _spec(model="m" * 300, sample=Sample(data="/d/" + "x" * 300 + ".csv")).folder_name(rows)
    assert len(long.encode()) < 255


def test_the_group_is_one_backend_and_model_with_its_computed_options_at_one_seed():
    assert _spec(backend="reference", model=None).group == "reference-default-seed0"
    assert _spec(model="Qwen/Qwen3-8B:q4 k", decoding=Decoding(seed=2)).group == "openai-Qwen_Qwen3-8B_q4_k-seed2"
    assert _spec(condition="baseline_enhanced", probe="scramble_full").group == _spec().group  # one job, many runs
    effort = _spec(options={"reasoning_effort": "low"}).group
    assert effort.startswith("openai-gpt-4o-seed0-") and effort != _spec(options={"reasoning_effort": "high"}).group
    assert len(_spec(model="m" * 300).group) < 80


def test_transport_options_never_separate_two_runs(rows):
    """How a model is reached (its address, waits, retries, concurrency, the key's variable) is not what it
    computes: a run served from another address, or by replicas in turn, is the same run, folder and job."""
    transport = {"base_url": ["http://a/v1", "http://b/v1"], "timeout": 5, "retries": 1, "max_concurrency": 9,
                 "api_key_env": "OTHER_KEY", "fail_on_error": 0.2, "batch": True,
                 "batch_poll_s": 5, "run_batch": "vllm run-batch", "run_batch_args": "-tp 2", "max_cost": 3.0,
                 "price_input": 1.0, "price_output": 10.0, "share_cores": False}
    assert set(transport) == TRANSPORT_OPTIONS
    assert computed_options({**transport, "regex_mode": "vllm"}) == {"regex_mode": "vllm"}
    from cpdagthink.run.config import RunConfig

    here = RunConfig(backend="openai", model="gpt-4o", backend_options={"base_url": "http://a/v1"})
    served = {k: v for k, v in transport.items()
              if k not in ("run_batch", "run_batch_args", "share_cores")}  # a node's, llama.cpp's, not a server's
    there = RunConfig(backend="openai", model="gpt-4o", backend_options={**served, "base_url": "http://b/v1"})
    assert here.spec == there.spec and here.folder(rows) == there.folder(rows)
    computed = RunConfig(backend="openai", model="gpt-4o", backend_options={"regex_mode": "vllm"})
    assert computed.spec.identity() != here.spec.identity() and computed.spec.group != here.spec.group
    threads = [RunConfig(backend="local", backend_options=options) for options in ({}, {"share_cores": False})]
    assert threads[0].spec == threads[1].spec and threads[0].folder(rows) == threads[1].folder(rows)


def test_a_spec_is_frozen_and_takes_no_unknown_field():
    spec = _spec()
    with pytest.raises(ValidationError):
        spec.model = "other"  # type: ignore[misc]
    with pytest.raises(ValidationError, match="base_url"):
        RunSpec(**_spec().model_dump(), base_url="http://a/v1")


def test_bounded_keeps_a_short_part_and_shortens_a_long_one_by_a_hash():
    assert bounded("qwen2.5-0.5b") == "qwen2.5-0.5b"
    long, other = bounded("m" * 100), bounded("m" * 99 + "n")
    assert len(long) == 64 and long.startswith("m" * 55 + "-") and long != other
    assert bounded("é" * 20, 32) != "é" * 20  # 20 characters but 40 bytes: a file name is counted in bytes


def test_the_rows_digest_follows_ids_contents_and_order(rows):
    assert rows_sha256(rows) == rows_sha256(list(rows)) and len(rows_sha256(rows)) == 64
    assert rows_sha256(rows) != rows_sha256(rows[::-1]) and rows_sha256(rows) != rows_sha256(rows[:3])


def test_a_sample_is_drawn_by_its_fields_and_refuses_a_mix_it_cannot_draw(rows, tmp_path):
    data = str(tmp_path / "two.csv")
    assert Sample(data=data).source == data and Sample(split="test").source == "split:test"
    assert Sample(data=data).instances() == rows  # limit 0: every row
    drawn = Sample(data=data, limit=2, sample_seed=1).instances()
    assert len(drawn) == 2 and sum(r.label for r in drawn) == 1 and drawn == Sample(data=data, limit=2, sample_seed=1).instances()
    with pytest.raises(ValueError, match="at least 2 gold positives cannot be drawn"):
        Sample(data=data, limit=3, sample_min_positives=2).instances()
