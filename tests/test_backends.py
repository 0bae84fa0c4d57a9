"""The registry and what a backend family declares: a new backend added by the recipe of "How it fits
together" alone (a ``Backend`` subclass with its class-level answers, one ``BACKENDS`` entry) runs a condition,
is planned into a chapter and sized as a grid job, with no other module told of it."""

from __future__ import annotations

import subprocess
import sys
from typing import Any, Mapping

import pytest

from cpdagthink.backends import BACKENDS, Backend, backend_class, check_options, make_backend
from cpdagthink.backends.base import Provenance
from cpdagthink.backends.profiles import RecommendedSampling
from cpdagthink.backends.reference import ReferenceBackend
from cpdagthink.method.chat import Completion, Request


class Toy(Backend):
    """A toy family: the reference agent's answers under another name, with every family answer its own."""

    name = "toy"
    sized_by = ("threads", "workers")  # a grid job holds its workers

    def __init__(self, model: str = "toy-1", *, workers: int = 3):
        self.model, self.workers, self.agent = model, workers, ReferenceBackend()

    @classmethod
    def model_title(cls, model: str | None) -> str:
        return f"Toy {model or 'toy-1'}"

    @classmethod
    def recommended_sampling(cls, model: str | None, thinking: bool) -> RecommendedSampling | None:
        return RecommendedSampling(temperature=0.5 if thinking else 0.2, top_p=0.9, source="the toy's card")

    @classmethod
    def check_condition(cls, model: str | None, thinking: bool, options: Mapping[str, Any]) -> None:
        if not thinking:
            raise ValueError("a toy model always thinks")

    def identity(self) -> dict[str, Any]:
        return {"backend": "toy", "model": self.model}

    def provenance(self) -> Provenance:
        return Provenance(api="none: a toy")

    def complete(self, request: Request) -> Completion:
        return self.agent.complete(request)


@pytest.fixture()
def toy(monkeypatch, test_csv, tmp_path) -> dict[str, str]:
    """The toy registered by its one entry, and run folders and a cache of their own on the test split."""
    monkeypatch.setitem(BACKENDS, "toy", Toy)
    monkeypatch.setenv("CORR2CAUSE_CSV", str(test_csv))
    return {"backend": "toy", "out_root": str(tmp_path / "runs"), "cache_dir": str(tmp_path / "cache")}


def test_a_toy_backend_runs_a_condition_with_its_own_title_sampling_and_refusals(toy):
    from cpdagthink.book import experiments as ex
    from cpdagthink.run.config import RunConfig, RunParameters

    setup = RunParameters(**toy, limit=4).to_config()
    assert (setup.decoding.temperature, setup.decoding.top_p) == (0.5, 0.9)  # the toy's recommendation
    assert ex.model_name(setup) == "Toy toy-1"
    refused = ex.refusals(setup, ["baseline_enhanced", "baseline_no_thinking"])
    assert list(refused) == ["baseline_no_thinking"] and "a toy model always thinks" in refused["baseline_no_thinking"]
    with pytest.raises(ValueError, match="a toy model always thinks"):
        RunConfig(**toy, condition="baseline_no_thinking")
    config = setup.for_run("baseline_enhanced", 0)
    records = ex.run(config, progress=False)
    assert len(records) == 4 and all(r.answer == ("YES" if r.oracle_label else "NO") for r in records)  # the agent's
    assert "toy" in str(config.folder(config.instances()))


def test_a_toy_backend_is_planned_into_a_chapter_and_sized_as_a_grid_job_by_its_own_option(toy, tmp_path, monkeypatch):
    from cpdagthink.book import plan
    from cpdagthink.workflow import job_resources, plan_grid

    monkeypatch.setattr("cpdagthink.workflow.MARKERS", tmp_path / "plan")
    planned = plan.plan_book({**toy, "limit": 4}, ["01"])
    toys = {r.group for r in planned if r.config.backend == "toy"}
    assert len(toys) == 1 and {r.config.backend for r in planned} == {"toy", "reference"}  # and the agent's row
    assert job_resources(planned[0].config) == {"threads": 3, "gpu": 0, "api_slots": 0}  # Toy's default workers
    grid = plan_grid({**toy, "limit": "4", "only": ["01"], "backend_options": "workers=5"})
    sized = {job.backend: (job.threads, job.gpu, job.api_slots) for job in grid.groups.values()}
    assert sized == {"toy": (5, 0, 0), "reference": (1, 0, 0)}


def test_every_registered_family_answers_for_itself_without_building_a_backend():
    from cpdagthink.backends.local import LocalBackend
    from cpdagthink.backends.openai_api import OpenAIBackend
    from cpdagthink.backends.vllm_offline import VLLMBackend

    assert [backend_class(name) for name in ("local", "openai", "vllm", "reference")] == [
        LocalBackend, OpenAIBackend, VLLMBackend, ReferenceBackend]
    assert LocalBackend.job_resources({}) == {"threads": 2} and LocalBackend.job_resources({"n_threads": 8}) == {"threads": 8}
    assert VLLMBackend.job_resources({}) == {"gpu": 2} and OpenAIBackend.job_resources({}) == {"api_slots": 1}
    assert ReferenceBackend.job_resources({}) == {}
    assert LocalBackend.model_title("model.gguf") == "model.gguf" and OpenAIBackend.model_title("gpt-x") == "gpt-x"
    assert OpenAIBackend.sends_sampling("gpt-5.4-mini") is False and OpenAIBackend.sends_sampling(None) is True
    assert VLLMBackend.recommended_sampling(None, True) is None and ReferenceBackend.recommended_sampling(None, True) is None
    with pytest.raises(ValueError, match="no off switch"):
        OpenAIBackend.check_condition("o3", False, {})
    OpenAIBackend.check_condition(None, False, {})  # no model named: no profile to check


def test_a_factory_that_is_no_class_answers_with_the_defaults(monkeypatch):
    monkeypatch.setitem(BACKENDS, "built", lambda: ReferenceBackend())
    assert backend_class("built") is Backend and make_backend("built").identity()["backend"] == "reference"
    with pytest.raises(ValueError, match="unknown backend 'nope'"):
        backend_class("nope")


def test_reading_the_families_imports_no_model_library():
    """The registry is read for job sizing and titles before anything is built: no llama.cpp, vLLM or
    OpenAI client is imported to answer."""
    code = ("import sys\nfrom cpdagthink.backends import backend_class\n"
            "for name in ('local', 'openai', 'vllm', 'reference'):\n"
            "    cls = backend_class(name); cls.job_resources({}); cls.model_title(None)\n"
            "print(sorted(m for m in ('llama_cpp', 'vllm', 'openai', 'torch', 'outlines') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


@pytest.mark.parametrize(("backend", "option", "value", "says"), [
    ("openai", "max_concurrency", -3, "greater than or equal to 1"),
    ("openai", "max_concurrency", 10**6, "less than or equal to 256"),
    ("openai", "retries", 1e9, "less than or equal to 10"),
    ("openai", "retries", "1e9", "valid integer"),
    ("openai", "backoff_base", "1e9", "less than or equal to 120"),
    ("openai", "backoff_max", -1, "greater than or equal to 0"),
    ("openai", "timeout", 1e9, "less than or equal to 3600"),
    ("openai", "base_url", "", "base_url is empty"),
    ("openai", "base_url", "file:///etc/passwd", "an http:// or https:// URL"),
    ("openai", "base_url", ["http://127.0.0.1:8000/v1", "ftp://h/v1"], "an http:// or https:// URL"),
    ("openai", "base_url", "http:///v1", "with a host"),
    ("vllm", "tensor_parallel_size", -1, "greater than or equal to 1"),
    ("vllm", "tensor_parallel_size", 1e9, "less than or equal to 64"),
    ("vllm", "gpu_memory_utilization", 1.5, "less than or equal to 1"),
    ("vllm", "max_model_len", 0, "greater than or equal to 1"),
])
def test_every_option_out_of_its_declared_range_is_refused_by_name_before_anything_runs(backend, option, value, says):
    with pytest.raises(ValueError, match=f"backend '{backend}' option {option}: .*{says}"):
        check_options(backend, {"model": "m", option: value})


def test_a_refused_url_is_not_repeated_nor_its_scheme_a_key_pasted_as_a_url_would_show():
    for url in ("sk-proj-0123456789abcdef:x", "file://user:hunter2secret@host/etc/passwd"):
        with pytest.raises(ValueError, match="base_url must be an http") as refused:
            check_options("openai", {"model": "m", "base_url": url})
        assert "0123456789abcdef" not in str(refused.value) and "hunter2secret" not in str(refused.value)
        assert "sk-proj" not in str(refused.value) and "file" not in str(refused.value)


def test_values_within_their_ranges_are_read_as_the_annotations_read_them():
    assert check_options("openai", {"model": "m", "max_concurrency": "16", "retries": 10, "backoff_base": "0.5",
                                    "base_url": ["http://a:1/v1", "HTTPS://b/v1"]}) == {
        "model": "m", "max_concurrency": 16, "retries": 10, "backoff_base": 0.5,
        "base_url": ["http://a:1/v1", "HTTPS://b/v1"]}
    assert check_options("vllm", {"model": "m", "tensor_parallel_size": "8", "max_model_len": None}) == {
        "model": "m", "tensor_parallel_size": 8, "max_model_len": None}
