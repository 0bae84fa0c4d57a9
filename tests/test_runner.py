"""The runner: records, cache, resumption after a kill, metadata (reference agent; real models below)."""

from __future__ import annotations

import gc
import json
import re
import time

import pytest

from cpdagthink.backends.base import Backend
from cpdagthink.backends.reference import ReferenceBackend
from cpdagthink.method.chat import Completion, Request
from cpdagthink.method.conditions import CONDITIONS
from cpdagthink.method.decoding import Decoding
from cpdagthink.run.data import read_csv, sample
from cpdagthink.run.records import RunRecord
from cpdagthink.run.runfolder import read_records
from cpdagthink.run.runner import RunMismatchError, run_config
from cpdagthink.run.streaming import LANES_PER_SLOT
from conftest import configured
from dying_backend import DiesAfter, Killed
from loopback_api import Faults, Latency, LoopbackAPI, backend_on, key_of, key_of_instance, reference_answer, turn_of


class InterruptedMidBatch(Backend):
    """A batch interrupted (Ctrl-C, a job's SIGTERM) after its first request was answered, as the OpenAI
    backend raises it: the interruption carries the finished completions."""

    def __init__(self, inner: Backend):
        self.inner = inner

    def identity(self):
        return self.inner.identity()

    def complete(self, request: Request) -> Completion:
        return self.inner.complete(request)

    def complete_batch(self, requests):
        stopped = KeyboardInterrupt()
        stopped.completions = [self.inner.complete(requests[0]), *[None] * (len(requests) - 1)]
        raise stopped


def test_an_interrupted_batch_keeps_what_was_answered_in_the_cache(tmp_path, test_csv):
    from cpdagthink.run.cache import CallCache
    from cpdagthink.run.runner import CachedBackend

    from cpdagthink.method.conditions import first_request

    requests = [first_request(CONDITIONS["baseline_enhanced"], i, Decoding()) for i in sample(read_csv(test_csv), 3)]
    cached = CachedBackend(InterruptedMidBatch(ReferenceBackend()), CallCache(tmp_path / "cache"))
    with pytest.raises(KeyboardInterrupt):
        cached.complete_batch(requests)
    assert cached.calls == 1
    again = CachedBackend(ReferenceBackend(), CallCache(tmp_path / "cache")).complete_batch(requests)
    assert [hit for _, hit in again] == [True, False, False]


@pytest.fixture()
def items(test_csv):
    return sample(read_csv(test_csv), 12, seed=1)


def test_records_cache_and_rerun_makes_no_calls(items, tmp_path):
    condition = CONDITIONS["structured"]
    first = run_config(configured(condition.name, cache_dir=tmp_path / "cache"),
                       ReferenceBackend(), items, tmp_path / "run", progress=False)
    assert first.model_calls == 24 and len(first.records) == 12
    record = first.records[0]
    assert record.emitted.variables and record.emitted_error is None and record.tool_flow
    assert record.answer in ("YES", "NO") and not record.unparsed and not record.rejected
    assert all(r.prediction == r.oracle_label for r in first.records)
    again = run_config(configured(condition.name, cache_dir=tmp_path / "cache"),
                       ReferenceBackend(), items, tmp_path / "run2", progress=False)
    assert again.model_calls == 0 and all(t.cache_hit for r in again.records for t in r.turns)
    assert again.summary.cache_hits == 24 and again.summary.status == "finished"
    meta = json.loads((tmp_path / "run" / "metadata.json").read_text())
    assert meta["condition"]["prompt_hashes"]["pc_scaffold"] and meta["backend"]["backend"] == "reference"
    assert meta["decoding"]["seed"] == 0 and "git" in meta and "packages" in meta


def test_killed_run_resumes_with_exactly_one_record_each(items, tmp_path):
    condition = CONDITIONS["twoturn_prose_pc"]
    with pytest.raises(Killed):
        run_config(configured(condition.name, cache_dir=tmp_path / "c", chunk_size=2),
                   DiesAfter(ReferenceBackend(), 13), items, tmp_path / "run", progress=False)
    partial = read_records(tmp_path / "run")
    assert 0 < len(partial) < len(items)
    with (tmp_path / "run" / "records.jsonl").open("a") as handle:
        handle.write('{"id": "torn')  # a write cut off by the kill
    resumed = run_config(configured(condition.name, cache_dir=tmp_path / "c", chunk_size=2),
                         ReferenceBackend(), items, tmp_path / "run", progress=False)
    ids = [r.id for r in resumed.records]
    assert sorted(ids) == sorted(i.id for i in items) and len(ids) == len(set(ids))


def test_a_folder_of_another_configuration_is_not_resumed(items, tmp_path):
    condition = CONDITIONS["baseline_enhanced"]
    run_config(configured(condition.name, cache_dir=tmp_path / "c"),
               ReferenceBackend(), items[:3], tmp_path / "run", progress=False)
    with pytest.raises(RunMismatchError, match=r"different run \(run.decoding.max_tokens_turn1"):
        run_config(configured(condition.name, cache_dir=tmp_path / "c", decoding=Decoding(max_tokens_turn1=64)),
                   ReferenceBackend(), items, tmp_path / "run", progress=False)
    with pytest.raises(RunMismatchError, match=r"different run \(run.condition"):
        run_config(configured("singleturn_structured", cache_dir=tmp_path / "c"),
                   ReferenceBackend(), items, tmp_path / "run", progress=False)
    assert len(read_records(tmp_path / "run")) == 3  # nothing was appended
    resumed = run_config(configured(condition.name, cache_dir=tmp_path / "c"),
                         ReferenceBackend(), items, tmp_path / "run", progress=False)
    assert len(resumed.records) == len(items)


def test_sample_is_seeded_stratified_and_ordered(test_csv):
    rows = read_csv(test_csv)
    picked = sample(rows, 100, seed=3)
    assert picked == sample(rows, 100, seed=3) and len(picked) == 100
    assert sum(i.label for i in picked) == round(100 * 180 / 1162)
    assert [rows.index(i) for i in picked] == sorted(rows.index(i) for i in picked)


class RejectsOne(Backend):
    """Refuses every request about one instance (as a too-long prompt would be), serves the rest."""

    def __init__(self, inner: Backend, marker: str):
        self.inner, self.marker = inner, marker

    def identity(self):
        return self.inner.identity()

    def complete(self, request: Request) -> Completion:
        if any(self.marker in (m.get("content") or "") for m in request.messages):
            from cpdagthink.backends.base import RequestRejected

            raise RequestRejected("prompt of 9999 tokens does not fit n_ctx=4096")
        return self.inner.complete(request)


def test_a_rejected_request_is_recorded_and_the_run_goes_on(items, tmp_path):
    condition = CONDITIONS["baseline_enhanced"]
    victim = items[3]
    marker = f"{victim.premise}\n\nHypothesis: {victim.hypothesis}"
    result = run_config(configured(condition.name, cache_dir=tmp_path / "c", chunk_size=4),
                        RejectsOne(ReferenceBackend(), marker), items, tmp_path / "run", progress=False)
    by_id = {r.id: r for r in result.records}
    assert len(by_id) == len(items)
    assert "n_ctx" in by_id[victim.id].turns[0].rejected and by_id[victim.id].rejected
    assert by_id[victim.id].prediction is None and not by_id[victim.id].unparsed
    assert sum(r.rejected for r in result.records) == 1 and result.summary.rejected == 1
    again = run_config(configured(condition.name, cache_dir=tmp_path / "c"),
                       ReferenceBackend(), items, tmp_path / "again", progress=False)
    assert again.model_calls == 1  # only the rejected call was not cached
    retried = run_config(configured(condition.name, cache_dir=tmp_path / "c"),
                         ReferenceBackend(), items, tmp_path / "run", progress=False)
    assert retried.model_calls == 0 and retried.summary.rejected == 0  # the rejected instance is asked again
    assert len(read_records(tmp_path / "run")) == len(items)


def test_a_folder_made_from_other_data_of_the_same_name_is_refused(test_csv, tmp_path):
    """dataA/mydata.csv then dataB/mydata.csv (or the CSV edited in place) into one folder."""
    import csv

    rows = list(csv.DictReader(open(test_csv, newline="", encoding="utf-8")))[:6]
    for folder, edit in (("dataA", False), ("dataB", True)):
        (tmp_path / folder).mkdir()
        with open(tmp_path / folder / "mydata.csv", "w", newline="", encoding="utf-8") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
            writer.writeheader()
            for i, row in enumerate(rows):
                writer.writerow({**row, "label": 1 - int(row["label"])} if edit and i == 2 else row)
    a, b = read_csv(tmp_path / "dataA" / "mydata.csv"), read_csv(tmp_path / "dataB" / "mydata.csv")
    assert [i.id for i in a] == [i.id for i in b]
    condition = CONDITIONS["baseline_enhanced"]
    run_config(configured(condition.name, cache_dir=tmp_path / "c"),
               ReferenceBackend(), a, tmp_path / "run", progress=False)
    before = (tmp_path / "run" / "metadata.json").read_text()
    with pytest.raises(RunMismatchError, match="other data"):
        run_config(configured(condition.name, cache_dir=tmp_path / "c"),
                   ReferenceBackend(), b, tmp_path / "run", progress=False)
    assert (tmp_path / "run" / "metadata.json").read_text() == before  # only rewritten when it matches


class Refuses(Backend):
    """A service that refuses every request, as an API does for a parameter the model does not take."""

    def identity(self):
        return {"backend": "refuses"}

    def complete(self, request: Request) -> Completion:
        from cpdagthink.backends.base import RequestRejected

        raise RequestRejected("Unsupported parameter: 'max_tokens' is not supported with this model.")


def test_a_run_whose_first_requests_are_all_refused_stops_with_the_service_message(items, tmp_path):
    from cpdagthink.run.runner import RunAborted

    with pytest.raises(RunAborted, match="Unsupported parameter: 'max_tokens'"):
        run_config(configured("baseline_enhanced", cache_dir=tmp_path / "c", chunk_size=1),
                   Refuses(), items, tmp_path / "run", progress=False, abort_after=3)
    records = read_records(tmp_path / "run")
    assert len(records) == 3 and all(r.rejected and r.prediction is None for r in records)
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["status"] == "aborted"
    assert not list((tmp_path / "c").rglob("*.json"))  # rejections are never cached


def test_ctrl_c_keeps_every_finished_record_and_says_so(items, tmp_path):
    with pytest.raises(KeyboardInterrupt):
        run_config(configured("baseline_enhanced", cache_dir=tmp_path / "c", chunk_size=1),
                   DiesAfter(ReferenceBackend(), 5, KeyboardInterrupt), items, tmp_path / "run", progress=False)
    assert len(read_records(tmp_path / "run")) == 5
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["status"] == "interrupted" and summary["records"] == summary["asked_records"] == 5
    assert summary["asked"] == len(items) and summary["message"] == "interrupted by Ctrl-C"


def test_a_premise_that_cannot_be_posed_is_recorded_and_the_run_goes_on(items, tmp_path):
    broken = items[0].model_copy(update={"premise": "Premise: Suppose there is a closed system of 2 variables, A "
                                         "and B. All the statements are about them. A correlates with Q."})
    result = run_config(configured("structured", cache_dir=tmp_path / "c"),
                        ReferenceBackend(), [broken, *items[1:4]], tmp_path / "run", progress=False)
    by_id = {r.id: r for r in result.records}
    assert by_id[broken.id].problem and by_id[broken.id].prediction is None and not by_id[broken.id].turns
    assert sum(r.problem is not None for r in result.records) == 1 and result.summary.problems == 1
    assert all(r.answer for r in result.records if r.id != broken.id)


def test_a_concurrent_run_into_the_same_folder_fails_at_once(items, tmp_path):
    from cpdagthink.run.runfolder import RunFolder, RunLockedError

    with RunFolder(tmp_path / "run").locked():
        with pytest.raises(RunLockedError, match="another run"):
            run_config(configured("baseline_enhanced", cache_dir=tmp_path / "c"),
                       ReferenceBackend(), items, tmp_path / "run", progress=False)
    assert read_records(tmp_path / "run") == []


UNSATISFIABLE = ("Premise: Suppose there is a closed system of 3 variables, A, B and C. All the statistical relations "
                 "among these 3 variables are as follows: A correlates with B. A correlates with C. B correlates with "
                 "C. However, A and C are independent given B. A and B are independent given C.\n"
                 "Hypothesis: A directly causes B.")


def test_a_premise_no_dag_satisfies_is_recorded_on_its_row_and_the_run_goes_on(test_csv, tmp_path):
    """A CSV row whose facts no DAG has exactly (A-B correlated, yet separated given C) is recorded with its
    problem, and the run goes on to the rows after it."""
    import csv

    rows = list(csv.DictReader(open(test_csv, newline="", encoding="utf-8")))[:3]
    rows.insert(1, {"input": UNSATISFIABLE, "label": "0", "num_variables": "3", "template": "parent"})
    with open(tmp_path / "crafted.csv", "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    instances = read_csv(tmp_path / "crafted.csv")
    result = run_config(configured("structured", cache_dir=tmp_path / "c"),
                        ReferenceBackend(), instances, tmp_path / "run", progress=False)
    crafted = next(r for r in result.records if r.id == instances[1].id)
    assert "no DAG has exactly the stated independencies" in crafted.problem
    assert crafted.oracle_label is None and not crafted.turns and crafted.prediction is None
    assert result.summary.status == "finished" and result.summary.problems == 1 and len(result.records) == 4
    assert all(r.answer for r in result.records if r is not crafted)


class Built(Backend):
    """The reference agent, identified by the build that computes it (as the local backend names its build)."""

    def __init__(self, build: str):
        self.inner, self.build = ReferenceBackend(), build

    def identity(self):
        return {**self.inner.identity(), "build": self.build}

    def complete(self, request: Request) -> Completion:
        return self.inner.complete(request)


def test_a_folder_of_another_backend_names_the_field_and_both_values(items, tmp_path):
    condition = CONDITIONS["baseline_enhanced"]
    run_config(configured(condition.name, cache_dir=tmp_path / "c"),
               Built("a"), items[:2], tmp_path / "run", progress=False)
    with pytest.raises(RunMismatchError, match=r'different backend \(backend.build: "b" asked, "a" in the folder\)'):
        run_config(configured(condition.name, cache_dir=tmp_path / "c"),
                   Built("b"), items[:2], tmp_path / "run", progress=False)
    with pytest.raises(RunMismatchError, match=r"different run \(run.decoding.max_tokens_turn1: 64 asked, 512 in the "
                                               r"folder\)"):
        run_config(configured(condition.name, cache_dir=tmp_path / "c", decoding=Decoding(max_tokens_turn1=64)),
                   Built("a"), items[:2], tmp_path / "run", progress=False)


def test_a_rerun_of_a_subset_writes_a_summary_of_the_whole_folder(items, tmp_path):
    condition = CONDITIONS["baseline_enhanced"]
    run_config(configured(condition.name, cache_dir=tmp_path / "c"),
               ReferenceBackend(), items[:10], tmp_path / "run", progress=False)
    subset = run_config(configured(condition.name, cache_dir=tmp_path / "c"),
                        ReferenceBackend(), items[:3], tmp_path / "run", progress=False)
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["records"] == summary["answered"] == 10 and len(read_records(tmp_path / "run")) == 10
    assert summary["asked"] == summary["asked_records"] == 3 and summary["status"] == "finished"
    assert len(subset.records) == 3 and subset.summary.records == 10


def test_a_run_ended_by_a_backend_error_says_so_with_its_message(items, tmp_path):
    from cpdagthink.backends.base import BackendError

    timed_out = BackendError("http://127.0.0.1:9/v1: no answer within 3 s (timeout), after 4 retries")
    with pytest.raises(BackendError):
        run_config(configured("baseline_enhanced", cache_dir=tmp_path / "c", chunk_size=1),
                   DiesAfter(ReferenceBackend(), 4, timed_out), items, tmp_path / "run", progress=False)
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["status"] == "error" and summary["records"] == 4
    assert summary["message"] == "BackendError: http://127.0.0.1:9/v1: no answer within 3 s (timeout), after 4 retries"
    assert json.loads((tmp_path / "run" / "metadata.json").read_text())["status"] == "error"


class SaysYes(Backend):
    """Answers YES to everything: a model needs no parse of the hypothesis to answer it."""

    def identity(self):
        return {"backend": "says-yes"}

    def complete(self, request: Request) -> Completion:
        return Completion(text="Answer: YES", finish_reason="stop")


@pytest.mark.parametrize("condition", ["baseline_enhanced", "twoturn_prose_pc"])
def test_a_hypothesis_the_oracle_cannot_read_is_posed_all_the_same(items, tmp_path, condition):
    """Such a row is posed to every condition like any other; only its oracle label is missing."""
    odd = items[0].model_copy(update={"hypothesis": "A is a close friend of B."})
    result = run_config(configured(condition, cache_dir=tmp_path / "c"),
                        SaysYes(), [odd, *items[1:3]], tmp_path / "run", progress=False)
    record = result.records[0]
    assert record.problem is None and record.turns and record.answer == "YES" and record.oracle_label is None
    assert all(r.oracle_label in (0, 1) for r in result.records[1:]) and result.summary.problems == 0


APP_J = ("model_revision", "tokenizer_revision", "model_package", "api", "served_models", "packages", "hardware",
         "git", "python", "decoding")


def test_metadata_carries_the_app_j_fields(items, tmp_path):
    import os

    run_config(configured("baseline_enhanced", cache_dir=tmp_path / "c"),
               ReferenceBackend(), items[:2], tmp_path / "run", progress=False)
    meta = json.loads((tmp_path / "run" / "metadata.json").read_text())
    assert set(APP_J) <= set(meta)
    assert meta["hardware"]["cpu_cores"] == os.cpu_count() and isinstance(meta["hardware"]["gpus"], list)
    assert meta["packages"]["pydantic"] and meta["served_models"] == [] and meta["api"] is None
    assert meta["model_revision"] is None  # the symbolic reference agent has no weights


class WithProvenance(Backend):
    """The reference agent reporting a local model's provenance, as :class:`LocalBackend` does."""

    def identity(self):
        return ReferenceBackend().identity()

    def provenance(self):
        from cpdagthink.backends.base import Provenance

        return Provenance(model_revision="sha256:" + "ab" * 32, tokenizer_revision="sha256:" + "ab" * 32,
                          model_package="some-gguf==1.0")

    def complete(self, request: Request) -> Completion:
        return ReferenceBackend().complete(request)


def test_metadata_records_the_backends_provenance(items, tmp_path):
    from cpdagthink.run.records import RunMetadata

    run_config(configured("structured", cache_dir=tmp_path / "c"),
               WithProvenance(), items[:2], tmp_path / "run", progress=False)
    meta = RunMetadata.model_validate_json((tmp_path / "run" / "metadata.json").read_text())
    assert meta.model_revision == meta.tokenizer_revision == "sha256:" + "ab" * 32
    assert meta.model_package == "some-gguf==1.0" and meta.status == "finished"


def test_an_api_runs_metadata_names_the_api_and_the_served_snapshot(items, tmp_path, monkeypatch):
    from reasoning_api_server import ReasoningAPIServer

    from cpdagthink.backends import make_backend

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-secret")
    with ReasoningAPIServer() as server:
        backend = make_backend("openai", model="gpt-5.4-mini", base_url=server.url, reasoning_effort="medium")
        run_config(configured("baseline_enhanced", cache_dir=tmp_path / "c",
                              decoding=Decoding(temperature=1.0, max_tokens_turn1=2048, max_tokens_answer=1024)),
                   backend, items[:2], tmp_path / "run", progress=False)
    text = (tmp_path / "run" / "metadata.json").read_text()
    meta = json.loads(text)
    assert meta["served_models"] == ["gpt-5.4-mini-2025-08-07"]  # the response's `model`, not the name asked for
    assert meta["api"].startswith("OpenAI-compatible Responses API at ") and server.url in meta["api"]
    assert "sk-test-secret" not in text


@pytest.mark.slow
def test_a_local_runs_metadata_names_the_gguf_file_and_its_package(tmp_path):
    from cpdagthink.backends import make_backend

    backend = make_backend("local", model="smollm2-135m", n_ctx=2048)
    try:
        run_config(configured("baseline_enhanced", cache_dir=tmp_path / "c"),
                   backend, [], tmp_path / "run", progress=False)
    finally:
        backend.close()
    meta = json.loads((tmp_path / "run" / "metadata.json").read_text())
    sha = "sha256:b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
    assert meta["model_revision"] == meta["tokenizer_revision"] == sha
    assert "==" in meta["model_package"] and meta["packages"]["llama_cpp_python"]


def test_run_config_runs_one_configured_run_into_the_folder_it_names(test_csv, tmp_path):
    from cpdagthink.run.config import RunParameters
    from cpdagthink.run.runner import run_config

    setup = RunParameters(backend="reference", data=str(test_csv), limit=3, probe="drop_premise",
                          out_root=str(tmp_path / "runs"), cache_dir=str(tmp_path / "cache")).to_config().for_run(probe="drop_premise")
    instances = setup.instances()
    result = run_config(setup, ReferenceBackend(), instances, progress=False)
    assert result.out_dir == setup.folder(instances) and result.summary.status == "finished"
    assert [r.intervention.name for r in result.records] == ["drop_premise"] * 3
    assert all(not r.intervention.include_premise for r in result.records)
    assert json.loads((result.out_dir / "config.json").read_text())["probe"] == "drop_premise"


def test_run_config_is_the_one_door_and_a_probe_function_needs_the_name_its_records_carry(items, tmp_path):
    """Every run is a configured one (its identity is its spec's): the runner offers no other way to run, and
    an intervention handed in without the probe's name in the config is refused before anything is written."""
    from cpdagthink.method.interventions import PROBES
    from cpdagthink.run import runner

    assert [name for name in vars(runner) if name.startswith("run_")] == ["run_config"]
    with pytest.raises(ValueError, match="needs its probe's name"):
        runner.run_config(configured(cache_dir=tmp_path / "cache"), ReferenceBackend(), items, tmp_path / "run",
                          intervention=PROBES["drop_premise"], progress=False)
    assert not (tmp_path / "run").exists()
    done = runner.run_config(configured(cache_dir=tmp_path / "cache", probe="drop_premise"), ReferenceBackend(),
                             items[:2], tmp_path / "run", progress=False)
    assert [r.intervention.name for r in done.records] == ["drop_premise"] * 2
    assert json.loads((tmp_path / "run" / "metadata.json").read_text())["run"] == configured(
        cache_dir=tmp_path / "other", probe="drop_premise").spec.identity()


# ----------------------------------------------------------------------------- one run, one identity (an API)
def _api_run(urls, test_csv, tmp_path, *, out_root="runs", cache="cache", condition="baseline_enhanced"):
    """``condition`` on 4 rows through the OpenAI backend at ``urls``, as ``cpdagthink run`` makes it."""
    from cpdagthink.backends import make_backend
    from cpdagthink.run.config import RunParameters
    from cpdagthink.run.runner import run_config

    config = RunParameters(backend="openai", model="gpt-5-mini", backend_options={"base_url": urls}, condition=condition,
                           data=str(test_csv), limit=4, out_root=str(tmp_path / out_root),
                           cache_dir=str(tmp_path / cache)).to_config().for_run()
    backend = make_backend(config.backend, **config.backend_arguments())
    try:
        return run_config(config, backend, config.instances(), progress=False)
    finally:
        backend.close()


def test_the_same_server_at_another_address_resumes_its_run_with_zero_model_calls(test_csv, tmp_path):
    """``--base-url http://127.0.0.1:PORT/v1`` finishes; ``http://localhost:PORT/v1`` names the same folder,
    resumes it, and into another folder replays every call from the cache."""
    from reasoning_api_server import ReasoningAPIServer

    with ReasoningAPIServer() as server:
        first = _api_run([server.url], test_csv, tmp_path)
        asked = len(server.requests)
        alias = server.url.replace("127.0.0.1", "localhost")
        again = _api_run([alias], test_csv, tmp_path)
        elsewhere = _api_run([alias], test_csv, tmp_path, out_root="elsewhere")
        assert len(server.requests) == asked
    assert first.summary.status == "finished" and first.model_calls == asked == 4
    assert again.out_dir == first.out_dir and again.model_calls == 0 and again.records == first.records
    assert elsewhere.model_calls == 0 and elsewhere.cache_hits == 4
    assert [r.answer for r in elsewhere.records] == [r.answer for r in first.records]
    assert {t.meta["base_url"] for r in first.records for t in r.turns} == {server.url}  # provenance, per call


def test_replicas_in_turn_give_the_records_of_one_replica_and_one_cache_entry_per_call(test_csv, tmp_path):
    from reasoning_api_server import ReasoningAPIServer

    with ReasoningAPIServer() as a, ReasoningAPIServer() as b:
        one = _api_run([a.url], test_csv, tmp_path, out_root="one", cache="one-cache")
        two = _api_run([a.url, b.url], test_csv, tmp_path, out_root="two", cache="two-cache")
        assert b.requests  # the second replica served some of the calls

    def computed(records):  # what each call computed, without who served it and how fast (the test server
        # numbers its reasoning summaries by the requests it has seen: ``raw`` and ``reasoning`` say who served)
        return [r.model_dump(exclude={"turns"}) | {"turns": [t.model_dump(exclude={"meta", "latency_s", "raw",
                                                                                   "reasoning"}) for t in r.turns]}
                for r in records]

    def entries(cache):
        return sorted(p.name for p in (tmp_path / cache).rglob("*.json"))

    assert one.out_dir.name == two.out_dir.name and computed(one.records) == computed(two.records)
    assert entries("one-cache") == entries("two-cache") and len(entries("two-cache")) == two.model_calls == 4
    assert {t.meta["base_url"] for r in two.records for t in r.turns} == {a.url, b.url}


@pytest.mark.parametrize("change, field", [({"temperature": 0.7}, "decoding.temperature"),
                                           ({"max_tokens_turn1": 64}, "decoding.max_tokens_turn1"),
                                           ("prompt", "condition.prompt_hashes.structured_turn1_system")])
def test_an_option_that_computes_differently_is_refused_on_resume_and_misses_the_cache(change, field, test_csv,
                                                                                       tmp_path, monkeypatch):
    import shutil

    from cpdagthink.method import prompts
    from cpdagthink.run.config import RunParameters
    from cpdagthink.run.runner import run_config

    given = {"backend": "reference", "data": str(test_csv), "limit": 3, "temperature": 0.5,
             "out_root": str(tmp_path / "runs"), "cache_dir": str(tmp_path / "cache")}
    run = RunParameters(**given).to_config().for_run()
    instances = run.instances()
    first = run_config(run, ReferenceBackend(), instances, progress=False)
    try:
        if change == "prompt":  # the same flags, an edited prompt file
            edited = tmp_path / "prompts"
            shutil.copytree(prompts.PROMPTS, edited)
            with (edited / "structured_turn1_system.md").open("a") as prompt:
                prompt.write("\nThink step by step.")
            monkeypatch.setattr(prompts, "PROMPTS", edited)
            prompts.raw.cache_clear()
            other = run
        else:
            other = RunParameters(**{**given, **change}).to_config().for_run()
        with pytest.raises(RunMismatchError, match=rf"different run \(run\.{re.escape(field)}: "):
            run_config(other, ReferenceBackend(), instances, first.out_dir, progress=False)
        elsewhere = run_config(other, ReferenceBackend(), instances, tmp_path / "elsewhere", progress=False)
    finally:
        monkeypatch.undo()
        prompts.raw.cache_clear()
    # every changed request is asked (a budget of turn 1 alone leaves turn 2 the very request it was)
    assert first.model_calls == 6 and not any(r.turns[0].cache_hit for r in elsewhere.records)
    assert elsewhere.model_calls == (3 if "max_tokens_turn1" in change else 6)


# ----------------------------------------------------------------------------- streaming (an API, one request at a time)
def test_an_instances_turn_2_is_sent_while_another_instances_turn_1_is_still_in_flight(items, tmp_path):
    slow = key_of_instance(items[0])
    latency = Latency(pick=lambda body: 3.0 if turn_of(body) == 1 and key_of(body) == slow else 0.05)
    with LoopbackAPI(latency=latency) as server:
        result = run_config(configured("structured", cache_dir=tmp_path / "cache"), backend_on(server), items,
                            tmp_path / "run", progress=False)
    assert result.summary.status == "finished" and result.model_calls == 24
    assert all(r.prediction == r.oracle_label for r in result.records)
    held = next(s for s in server.log if s.instance == slow and s.turn == 1)
    overtaking = [s for s in server.log if s.turn == 2 and s.instance != slow and held.arrived < s.arrived < held.left]
    assert len(overtaking) >= 5  # in chunks, every turn 2 waited for the slow turn 1 of its chunk
    assert [r.id for r in result.records] == [i.id for i in items]  # the result in the order asked
    assert read_records(tmp_path / "run")[-1].id == items[0].id  # the file in the order finished


def test_streamed_records_and_cache_entries_are_those_of_a_batched_run_and_resume_it_with_zero_calls(
        items, tmp_path, monkeypatch):
    from cpdagthink.backends.openai_api import OpenAIBackend

    def computed(records):  # what each call computed, without how fast or through which attempt
        return [r.model_dump(exclude={"turns"}) | {"turns": [t.model_dump(exclude={"meta", "latency_s"})
                                                             for t in r.turns]} for r in records]

    with LoopbackAPI() as server:
        monkeypatch.setattr(OpenAIBackend, "streams_requests", False)
        batched = run_config(configured("structured", cache_dir=tmp_path / "cache-b"), backend_on(server), items[:6],
                             tmp_path / "batched", progress=False)
        monkeypatch.setattr(OpenAIBackend, "streams_requests", True)
        streamed = run_config(configured("structured", cache_dir=tmp_path / "cache-s"), backend_on(server),
                              items[:6], tmp_path / "streamed", progress=False)
        assert sorted(p.name for p in (tmp_path / "cache-s").rglob("*.json")) == \
            sorted(p.name for p in (tmp_path / "cache-b").rglob("*.json"))
        resumed = run_config(configured("structured", cache_dir=tmp_path / "cache-b"), backend_on(server), items,
                             tmp_path / "batched", progress=False)
    assert computed(streamed.records) == computed(batched.records)
    assert resumed.model_calls == 12 and resumed.records[:6] == batched.records  # only the six it lacked


_KILLED_RUN = """
import sys
from cpdagthink.backends import make_backend
from cpdagthink.run.config import RunConfig
from cpdagthink.run.data import read_csv, sample
from cpdagthink.run.runner import run_config

csv, url, out, cache = sys.argv[1:]
backend = make_backend("openai", model="gpt-4.1-mini", base_url=url, max_concurrency=4)
config = RunConfig(backend="reference", condition="structured", cache_dir=cache)
run_config(config, backend, sample(read_csv(csv), 40, seed=1), out, progress=False)
"""


def test_a_killed_runs_cache_holds_every_answer_that_arrived(test_csv, tmp_path):
    import os
    import signal
    import subprocess
    import sys
    import time

    with LoopbackAPI(latency=Latency(0.1, 0.8, seed=3)) as server:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
        run = subprocess.Popen([sys.executable, "-c", _KILLED_RUN, str(test_csv), server.url, str(tmp_path / "run"),
                                str(tmp_path / "cache")], env=env)
        try:
            deadline = time.monotonic() + 60
            while len(server.answered()) < 30 and time.monotonic() < deadline and run.poll() is None:
                time.sleep(0.01)
            time.sleep(0.05)  # the last answers reach the client
            os.kill(run.pid, signal.SIGKILL)
            run.wait()
            answered = len(server.answered())
        finally:
            run.kill()
        assert run.returncode == -signal.SIGKILL
        kept = len(list((tmp_path / "cache").rglob("*.json")))
        assert 30 <= answered and answered - 4 <= kept <= answered  # at most the calls in flight lost
        before = len(server.log)
        resumed = run_config(configured("structured", cache_dir=tmp_path / "cache"), backend_on(server),
                             sample(read_csv(test_csv), 40, seed=1), tmp_path / "run", progress=False)
        repaid = len(server.log) - before - (80 - answered)
    assert resumed.summary.status == "finished" and len(resumed.records) == 40
    assert resumed.model_calls == 80 - kept and repaid <= 4


def test_a_streaming_session_holds_no_record_it_has_kept(items, tmp_path):
    """A grid's runs made at once keep tens of thousands of records: each is on disk and let go once kept, so
    memory does not grow with the runs held open (the result reads them back when asked)."""
    def records_alive():
        return sum(isinstance(o, RunRecord) for o in gc.get_objects())

    gc.collect()
    before, alive = records_alive(), []

    def answer(body):
        alive.append(records_alive() - before)
        return reference_answer(body)

    with LoopbackAPI(answer=answer) as server:
        result = run_config(configured("structured", cache_dir=tmp_path / "cache"), backend_on(server, max_concurrency=1),
                            items, tmp_path / "run", progress=False)
    assert result.summary.status == "finished" and len(alive) == 24
    # at most the instances on their lanes at once (their records made, not yet kept); before: every one kept, 11
    assert max(alive) <= LANES_PER_SLOT
    assert [r.id for r in result.records] == [i.id for i in items]  # in the order asked, read from the folder
    assert {r.id: r for r in result.records} == {r.id: r for r in read_records(tmp_path / "run")}


def test_a_hanging_call_costs_its_instance_a_retry_and_never_the_run(items, tmp_path):

    slow = key_of_instance(items[2])
    faults = Faults(pick=lambda body: "hang" if key_of(body) == slow and turn_of(body) == 1 else None, times=1, hang_s=3)
    with LoopbackAPI(faults=faults) as server:
        result = run_config(configured("structured", cache_dir=tmp_path / "cache"), backend_on(server, timeout=0.5),
                            items, tmp_path / "run", progress=False)
    assert result.summary.status == "finished" and len(result.records) == 12
    assert [t.meta["attempts"] for t in result.records[2].turns] == [2, 1]  # the hang cost one retry


def test_an_exhausted_retry_leaves_its_instance_unanswered_and_the_rerun_asks_only_those(items, tmp_path):

    failing = {key_of_instance(items[1]): "hang", key_of_instance(items[5]): "500"}
    faults = Faults(pick=lambda body: failing.get(key_of(body)) if turn_of(body) == 2 else None, times=2, hang_s=2)
    with LoopbackAPI(faults=faults) as server:
        first = run_config(configured("structured", cache_dir=tmp_path / "cache"), backend_on(server, timeout=0.5,
                           retries=1), items, tmp_path / "run", progress=False)
        asked = len(server.log)
        again = run_config(configured("structured", cache_dir=tmp_path / "cache"), backend_on(server, timeout=0.5,
                           retries=1), items, tmp_path / "run", progress=False)
        rerun = server.log[asked:]
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert first.summary.status == "incomplete" and set(first.summary.not_answered) == {items[1].id, items[5].id}
    assert "did not answer within 0.5 s" in first.summary.not_answered[items[1].id]
    assert "HTTP 500" in first.summary.not_answered[items[5].id]
    assert first.summary.message.startswith("finished with 2 instances not answered")
    assert first.model_calls == 22 and len(first.records) == 10  # every turn 1 answered and cached
    assert {(s.instance, s.turn) for s in rerun} == {(k, 2) for k in failing} and again.model_calls == 2
    assert again.summary.status == "finished" and len(again.records) == 12 and summary["not_answered"] == {}


def test_the_threshold_stops_a_run_against_a_server_that_fails_everything(test_csv, tmp_path):
    from cpdagthink.run.runner import RunAborted

    rows = sample(read_csv(test_csv), 60, seed=2)
    with LoopbackAPI(faults=Faults(rate=1.0, kinds=("503",), times=1 << 30)) as server:
        with pytest.raises(RunAborted, match=r"the service looks broken: \d+ of the last \d+ requests failed"):
            run_config(configured("structured", cache_dir=tmp_path / "cache"), backend_on(server, retries=1), rows,
                       tmp_path / "run", progress=False)
        time.sleep(0.3)  # what was in flight at the stop lands
        sent = {s.instance for s in server.log}
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["status"] == "aborted" and "HTTP 503" in summary["message"]
    assert len(sent) < 40  # it stopped, the rest never asked


# ----------------------------------------------------------------------------- a budget while it runs
PRICES = {"price_input": 1.0, "price_output": 10.0}  # dollars per million tokens


def _billed(cache: Path) -> float:
    """What every answer the cache holds cost at :data:`PRICES`, by the usage the server reported (the cache holds
    each answer the run received: what the service billed)."""
    usage = [json.loads(p.read_text()) for p in cache.rglob("*.json")]
    return sum(u["prompt_tokens"] * PRICES["price_input"] + u["completion_tokens"] * PRICES["price_output"]
               for u in usage) / 1e6


@pytest.mark.parametrize("streams", [True, False], ids=["streaming", "batched"])
def test_a_budget_stops_a_run_before_it_passes_the_limit_and_a_higher_one_resumes_it(items, tmp_path, monkeypatch,
                                                                                      streams):
    from cpdagthink.backends.openai_api import OpenAIBackend
    from cpdagthink.run.budget import BudgetSpent

    monkeypatch.setattr(OpenAIBackend, "streams_requests", streams)
    limit = 0.05
    budgeted = configured("structured", cache_dir=tmp_path / "cache", chunk_size=2,
                          backend_options={"max_cost": limit, **PRICES})
    with LoopbackAPI() as server:
        with pytest.raises(BudgetSpent, match=r"stopped by the budget: spent \$0\.0\d+ of max_cost \$0\.05 .* left"):
            run_config(budgeted, backend_on(server), items, tmp_path / "run", progress=False)
        time.sleep(0.3)  # nothing is in flight after the stop: this waits for a call that should not come
        first_calls = len(server.log)
        metadata = json.loads((tmp_path / "run" / "metadata.json").read_text())
        summary = json.loads((tmp_path / "run" / "summary.json").read_text())
        assert summary["status"] == "stopped" and "run again with a higher max_cost" in summary["message"]
        assert 0 < summary["records"] < len(items) and first_calls == summary["model_calls"]
        assert _billed(tmp_path / "cache") <= limit  # never past the limit, by what the server reported
        spent = metadata["spent"]
        assert spent["cost"] == pytest.approx(_billed(tmp_path / "cache"), abs=1e-6) and spent["max_cost"] == limit
        assert spent["calls"] == first_calls and spent["price_output"] == PRICES["price_output"]
        assert metadata["run"]["options"] == {}  # a budget is never part of what a run is
        more = budgeted.model_copy(update={"backend_options": {"max_cost": 1.0, **PRICES}})
        resumed = run_config(more, backend_on(server), items, tmp_path / "run", progress=False)
    assert resumed.summary.status == "finished" and len(resumed.records) == len(items)
    assert first_calls + resumed.model_calls == 24 == len(server.log)  # no call paid twice
    total = json.loads((tmp_path / "run" / "metadata.json").read_text())["spent"]
    assert total["calls"] == 24 and total["cost"] == pytest.approx(_billed(tmp_path / "cache"), abs=1e-6)


class BreaksTheGraph(Backend):
    """The reference agent, except that turn 1's graph also lists its first skeleton pair as directed against the
    grain (a graph the validator faults); the repair round and turn 2 are the reference agent's."""

    def identity(self):
        return {"backend": "breaks-the-graph"}

    def complete(self, request: Request) -> Completion:
        from dataclasses import replace

        repairing = request.tool_choice != "none" and any(m["role"] == "tool" for m in request.messages)
        # the repair round asks for the object again: the reference agent emits it from the same first messages
        completion = ReferenceBackend().complete(replace(request, messages=request.messages[:2]) if repairing
                                                 else request)
        if request.tools and request.tool_choice != "none" and not repairing:
            data = json.loads(completion.tool_calls[0].arguments)
            data["directed_edges"] += [pair[::-1] for pair in data["skeleton"][:1]]  # a 2-cycle, or directed and not
            completion.tool_calls = [ToolCall(completion.tool_calls[0].name, json.dumps(data))]
        return completion


from cpdagthink.method.chat import ToolCall  # noqa: E402
from cpdagthink.method.conditions import read_emitted, repair_findings, repair_request  # noqa: E402


def test_the_repair_round_sends_the_findings_once_and_turn_two_shows_the_corrected_object(tmp_path, test_csv):
    from cpdagthink.method.schema import CausalAnalysis

    from cpdagthink.run.config import RunConfig
    from cpdagthink.run.runner import run_config

    items = sample(read_csv(test_csv), 6, seed=1)
    config = RunConfig(backend="reference", condition="structured_repair", cache_dir=str(tmp_path / "cache"))
    result = run_config(config, BreaksTheGraph(), items, tmp_path / "run", progress=False)
    for record in result.records:
        assert len(record.turns) == 3 and record.repair.sent
        assert any(f.startswith(("directed_and_undirected", "directed_cycle")) for f in record.repair.findings)
        assert record.repair.analysis is not None and record.repair.analysis != record.emitted
        # turn 2 shows the corrected object: the reference agent answers from it, so every answer is the oracle's
        assert record.prediction == record.oracle_label
    # what the round shows: the emitted call answered by the findings, and a second call asked for
    record, instance = result.records[0], items[0]
    turn1 = Completion(text="", tool_calls=[ToolCall("record_causal_analysis", record.turns[0].tool_calls[0].arguments)])
    emitted = read_emitted(turn1)
    request = repair_request(CONDITIONS["structured_repair"], instance, Decoding(), turn1, emitted,
                             repair_findings(instance, emitted))
    assert [m["role"] for m in request.messages] == ["system", "user", "assistant", "tool"]
    assert request.tool_choice == "auto" and request.constraint is not None
    assert record.repair.findings[0] in request.messages[-1]["content"]
    assert "YES" not in request.messages[-1]["content"] and "Hypothesis" not in request.messages[-1]["content"]
    assert json.loads(read_records(tmp_path / "run")[0].model_dump_json())["repair"]["findings"] == record.repair.findings
    plain = run_config(config, ReferenceBackend(), items, tmp_path / "valid", progress=False)
    assert all(len(r.turns) == 2 and r.repair.findings == [] and not r.repair.sent for r in plain.records)
    assert isinstance(plain.records[0].emitted, CausalAnalysis)
