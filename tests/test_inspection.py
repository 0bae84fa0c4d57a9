"""inspect_request rebuilds a run's request: turn 2 from turn 1's output, probed with the runner's draw."""

from __future__ import annotations

import hashlib
import json

import pytest

from cpdagthink.backends.reference import ReferenceBackend
from cpdagthink.method.conditions import CONDITIONS
from cpdagthink.method.decoding import Decoding
from cpdagthink.run.data import read_csv, sample
from cpdagthink.run.inspection import inspect_request
from cpdagthink.run.runfolder import read_records
from cpdagthink.run.runner import run_config
from conftest import configured


class Unreachable(ReferenceBackend):
    def complete(self, request):
        raise AssertionError("turn 1 should have come from the cache")


def test_turn2_under_a_probe_is_the_request_the_probed_run_sent(test_csv, tmp_path):
    instances = sample(read_csv(test_csv), 4, seed=5)
    decoding = Decoding(seed=7)
    run_config(configured("structured", cache_dir=tmp_path / "cache", decoding=decoding, probe="scramble_skeleton"),
               ReferenceBackend(), instances, tmp_path / "run", progress=False)
    for instance, record in zip(instances, read_records(tmp_path / "run")):
        inspected = inspect_request(CONDITIONS["structured"], Unreachable(), instance, 2, decoding=decoding,
                                    probe="scramble_skeleton", cache_dir=tmp_path / "cache")
        assert inspected.given.note == record.intervention.note == inspected.to_json()["probe"]["note"]
        assert inspected.given.analysis == record.intervention.analysis
        sent = json.dumps(inspected.request.to_json(), sort_keys=True).encode()
        assert hashlib.sha256(sent).hexdigest() == record.turns[1].request_sha256  # the very request


def test_refuses_turns_a_condition_does_not_have(test_csv):
    instance = read_csv(test_csv)[0]
    with pytest.raises(ValueError, match="no turn 2"):
        inspect_request(CONDITIONS["baseline_enhanced"], ReferenceBackend(), instance, 2)
    with pytest.raises(ValueError, match="turn 2 of a tool condition"):
        inspect_request(CONDITIONS["twoturn_prose_pc"], ReferenceBackend(), instance, 2, probe="drop_premise")
    with pytest.raises(ValueError, match="turn must be 1 or 2"):
        inspect_request(CONDITIONS["structured"], ReferenceBackend(), instance, 3)


class ReasoningService(ReferenceBackend):
    """The reference agent as the Responses API serves it: each answer carries reasoning items the next turn
    sends back, and names its API in ``meta``."""

    def complete(self, request):
        out = super().complete(request)
        out.reasoning_items = [{"type": "reasoning", "id": "rs_1", "encrypted_content": "opaque"}]
        out.meta = {**out.meta, "api": "responses"}
        return out


def test_a_responses_api_turn_2_is_not_called_another_settings_request(test_csv, tmp_path):
    """Its reasoning items are in the request the runner recorded, never in the record: rebuilt from the record,
    turn 2 cannot match, which says nothing about the settings; turn 1 is still checked."""
    from cpdagthink.run.inspection import recorded_requests

    instances = sample(read_csv(test_csv), 2, seed=5)
    decoding = Decoding(seed=7)
    records = run_config(configured("structured", cache_dir=tmp_path / "cache", decoding=decoding),
                         ReasoningService(), instances, tmp_path / "run", progress=False).records
    for record, instance in zip(records, instances):
        assert [r.as_recorded for r in recorded_requests(record, instance, decoding)] == [True, None]
        assert [r.as_recorded for r in recorded_requests(record, instance, Decoding(seed=8))][0] is False


def _cli(*args: str) -> "subprocess.CompletedProcess":
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-m", "cpdagthink", *args], capture_output=True, text=True, timeout=300)


def test_prompt_of_a_run_folder_prints_the_recorded_request_byte_for_byte(test_csv, tmp_path):
    """The run's own settings (paper budgets, seed, probe), none of them given to ``prompt``."""
    out = tmp_path / "run"
    made = _cli("run", "--data", str(test_csv), "--condition", "structured", "--probe", "drop_premise",
                "--backend", "reference", "--limit", "3", "--seeds", "4", "--budgets", "paper", "--out", str(out),
                "--cache", str(tmp_path / "cache"))
    assert made.returncode == 0, made.stderr
    from cpdagthink.run.config import RunConfig

    instances = RunConfig.model_validate_json((out / "config.json").read_text()).instances()
    records = {r.id: r for r in read_records(out)}
    for row, instance in enumerate(instances):
        for turn in (1, 2):
            shown = _cli("prompt", "--run", str(out), "--row", str(row), "--turn", str(turn))
            assert shown.returncode == 0, shown.stderr
            printed = json.loads(shown.stdout)
            assert printed.pop("probe", None) == (None if turn == 1 else
                                                  {"name": "drop_premise", "note": records[instance.id].intervention.note,
                                                   "include_premise": False})
            sent = json.dumps(printed, sort_keys=True).encode()
            assert hashlib.sha256(sent).hexdigest() == records[instance.id].turns[turn - 1].request_sha256
            assert printed["max_tokens"] == (16384 if turn == 1 else 8192) and printed["seed"] == 4


def test_prompt_of_a_run_folder_refuses_what_it_did_not_record(test_csv, tmp_path):
    from cpdagthink.run.inspection import NotRecordedError, recorded_request

    out = tmp_path / "run"
    assert _cli("run", "--data", str(test_csv), "--condition", "baseline_enhanced", "--backend", "reference",
                "--limit", "2", "--out", str(out), "--cache", str(tmp_path / "cache")).returncode == 0
    with pytest.raises(NotRecordedError, match="there is no turn 2"):
        recorded_request(out, 0, 2)
    with pytest.raises(NotRecordedError, match="outside the run's rows 0..1"):
        recorded_request(out, 2)
    with pytest.raises(NotRecordedError, match="not a run folder"):
        recorded_request(tmp_path, 0)
    missing = _cli("prompt", "--row", "0")
    assert missing.returncode == 2 and "--condition" in missing.stderr
