"""Where batch mode writes its batches down: one run's folder, or the folders of runs made together whose
requests share batches, each keeping its own requests and answers."""

from __future__ import annotations

import json

from cpdagthink.backends.openai_api.batch_state import BatchRecord, BatchState, read_lines


def _record(ids: list[str], status: str = "completed") -> BatchRecord:
    return BatchRecord(tag="f" * 64, service="openai", endpoint="/v1/responses", custom_ids=ids, submitted_at=1.0,
                       batch_id="batch_1", status=status)


def _output(ids: list[str]) -> bytes:
    return b"".join(json.dumps({"custom_id": k, "response": {"status_code": 200, "body": {"id": k}}}).encode() + b"\n"
                    for k in ids)


def test_runs_sharing_a_batch_each_keep_it_with_their_own_requests_and_answers(tmp_path):
    a, b, c = (tmp_path / run / "batches" for run in ("a", "b", "c"))
    state = BatchState.shared({a: {"k1", "k2"}, b: {"k3"}, c: {"k9"}})
    record = _record(["k1", "k2", "k3"])
    state.save(record)
    assert json.loads((a / f"{record.name}.json").read_text())["custom_ids"] == ["k1", "k2"]
    assert json.loads((b / f"{record.name}.json").read_text())["custom_ids"] == ["k3"]
    assert not c.exists()  # none of its requests is in the batch
    assert state.paths(record) == [a / f"{record.name}.json", b / f"{record.name}.json"]
    state.keep(record, "output", _output(["k3", "k1", "k2"]) + b'{"cut by a ki')
    assert [line["custom_id"] for line in BatchState(a).lines(record, "output")] == ["k1", "k2"]
    assert [line["custom_id"] for line in BatchState(b).lines(record, "output")] == ["k3"]
    assert sorted(line["custom_id"] for line in state.lines(record, "output")) == ["k1", "k2", "k3"]
    assert state.runs == [tmp_path / "a", tmp_path / "b", tmp_path / "c"]


def test_a_batch_kept_by_several_folders_is_read_as_one_at_its_least_advanced_state(tmp_path):
    """A run collected alone ends its own copy, having kept only its own answers: read with the others, the batch
    is still running, so it is polled (and its answers kept) for them too, never submitted again."""
    a, b = tmp_path / "a" / "batches", tmp_path / "b" / "batches"
    shared = BatchState.shared({a: {"k1"}, b: {"k2"}})
    shared.save(_record(["k1", "k2"], status="in_progress"))
    alone = BatchState(a)
    collected = alone.records()[0]
    collected.status = "completed"
    alone.save(collected)
    merged = shared.records()
    assert len(merged) == 1 and merged[0].status == "in_progress" and sorted(merged[0].custom_ids) == ["k1", "k2"]
    assert BatchState(a).records()[0].status == "completed"
    shared.forget(merged[0])
    assert shared.records() == []


def test_one_runs_folder_keeps_everything_as_before(tmp_path):
    state = BatchState(tmp_path / "batches")
    record = _record(["k1", "k2"])
    state.save(record)
    state.keep(record, "output", _output(["k2", "k1"]))
    assert state.records() == [record] and [line["custom_id"] for line in state.lines(record, "output")] == ["k2", "k1"]
    assert state.file(record, "input") == tmp_path / "batches" / f"{record.name}.input.jsonl"


def test_an_answer_holding_a_line_separator_is_one_line_of_the_output_file():
    """A service writes a model's U+2028 or U+0085 as it is inside a JSON string (``ensure_ascii=False``); split
    there, the answer's line was lost and its request counted as unanswered."""
    lines = [{"custom_id": "a", "text": "one\u2028two\x85three"}, {"custom_id": "b", "text": "plain"}]
    text = "\n".join(json.dumps(line, ensure_ascii=False) for line in lines) + "\n"
    assert read_lines(text) == lines
