"""Run folders under hostile use: concurrent runs, garbled lines, kills during a rewrite, bad folders; and when a
folder holds its run whole."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from analyses import run_record
from cpdagthink.backends.reference import ReferenceBackend
from cpdagthink.run.runfolder import (
    REJECTED_LINES,
    RECORDS,
    RunFolder,
    RunFolderError,
    RunLockedError,
    completeness,
    is_complete,
    read_records,
)


def test_a_second_writer_is_refused_while_the_first_holds_the_lock(tmp_path):
    folder = RunFolder(tmp_path / "run")
    with folder.locked():
        with pytest.raises(RunLockedError, match=f"pid {os.getpid()}"):
            with RunFolder(tmp_path / "run").locked():
                pass
    with RunFolder(tmp_path / "run").locked():  # released: the next run goes ahead
        pass


def test_a_record_whose_text_holds_a_line_separator_reads_back_whole(tmp_path):
    """JSON leaves U+2028, U+2029 and U+0085 as they are inside a string, and ``str.splitlines`` splits at each:
    a model's text holding one cut its record in two, set aside as two bad lines at the next resume."""
    from cpdagthink.run.records import TurnRecord

    text = "A\u2028B\u2029C\x85D\x0bE\x1cF\nAnswer: NO"
    odd = run_record("odd", turns=[TurnRecord(messages_sha256="", request_sha256="", text=text)])
    folder = RunFolder(tmp_path)
    with folder.locked(), folder.appender() as append:
        for record in (run_record("r0"), odd, run_record("r1")):
            append(record)
    assert [r.id for r in read_records(tmp_path)] == ["r0", "odd", "r1"] and read_records(tmp_path)[1] == odd
    with folder.locked():
        assert len(folder.load_records()) == 3 and not (tmp_path / REJECTED_LINES).exists()


def test_a_ctrl_c_while_a_record_is_written_is_an_interruption_and_leaves_no_line(tmp_path):
    """pydantic wraps what a computed field raises while it serializes: a Ctrl-C there read as an error."""
    from cpdagthink.run.records import RunRecord
    from pydantic import computed_field

    class Interrupted(RunRecord):
        @computed_field
        @property
        def cut_off(self) -> bool:
            raise KeyboardInterrupt

    folder = RunFolder(tmp_path)
    with folder.locked(), folder.appender() as append:
        append(run_record("r0"))
        with pytest.raises(KeyboardInterrupt, match="interrupted while a record was written"):
            append(Interrupted(**run_record("r1").model_dump(exclude={"rejected", "unparsed", "cut_off", "prediction"})))
    assert [r.id for r in read_records(tmp_path)] == ["r0"]


def test_a_garbled_line_in_the_middle_loses_nothing_after_it(tmp_path):
    folder = RunFolder(tmp_path)
    good = [run_record(f"r{i}") for i in range(4)]
    lines = [r.model_dump_json() for r in good]
    lines.insert(2, '{"id": "r9", "garbled')
    lines.insert(3, "[1, 2, 3]")  # valid JSON but not a record
    lines.insert(4, '{"condition": "structured"}')  # an object without an id
    (tmp_path / RECORDS).write_text("\n".join(lines) + "\n")
    with folder.locked():
        kept = folder.load_records()
    assert [r.id for r in kept] == ["r0", "r1", "r2", "r3"]
    rejected = [json.loads(line) for line in (tmp_path / REJECTED_LINES).read_text().splitlines()]
    assert [r["line"] for r in rejected] == [3, 4, 5] and rejected[0]["text"].startswith('{"id": "r9"')
    assert [r.id for r in read_records(tmp_path)] == ["r0", "r1", "r2", "r3"]  # the file now holds just them


def test_readers_ignore_a_repeated_id(tmp_path):
    first, again = run_record("a", answer="YES"), run_record("a", answer="NO")
    (tmp_path / RECORDS).write_text(first.model_dump_json() + "\n" + again.model_dump_json() + "\n")
    assert [r.answer for r in read_records(tmp_path)] == ["YES"]


def test_a_file_or_unwritable_folder_is_refused_clearly(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(RunFolderError, match="is a file"):
        RunFolder(tmp_path / "file")
    if os.geteuid() != 0:  # root writes anywhere
        locked = tmp_path / "ro"
        locked.mkdir(mode=0o500)
        with pytest.raises(RunFolderError, match="not writable"):
            RunFolder(locked)
    with pytest.raises(RunFolderError, match="cannot create"):
        RunFolder(tmp_path / "file" / "below")


def test_a_full_disk_leaves_no_torn_line_and_no_temporary_file(tmp_path, monkeypatch):
    import errno

    folder, real_write = RunFolder(tmp_path), os.write

    def full_disk(fd, data):
        real_write(fd, bytes(data[: len(data) // 2]))  # part of the line reaches the disk, then it is full
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    with folder.locked(), folder.appender() as append:
        append(run_record("kept"))
        monkeypatch.setattr(os, "write", full_disk)
        with pytest.raises(RunFolderError, match=f"{tmp_path / RECORDS}: No space left on device"):
            append(run_record("lost"))
        monkeypatch.setattr(os, "fsync", lambda fd: full_disk(fd, b""))
        with pytest.raises(RunFolderError, match="No space left on device"):
            folder.write_json("summary.json", {"records": 1})
        monkeypatch.undo()
    assert (tmp_path / RECORDS).read_text().endswith("}\n")
    assert [r.id for r in read_records(tmp_path)] == ["kept"] and not (tmp_path / REJECTED_LINES).exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == [".lock", RECORDS]


def test_a_kill_at_the_rename_that_ends_a_rewrite_leaves_no_trace_once_the_run_resumes(tmp_path):
    """``kill -9`` as the rewrite's temporary file is renamed over ``records.jsonl``: the next run removes the
    dead writer's temporary file and does not set the same bad line aside a second time."""
    import subprocess
    import sys
    import textwrap

    good = [run_record(f"r{i}").model_dump_json() for i in range(3)]
    (tmp_path / RECORDS).write_text("\n".join([good[0], '{"id": "r9", "torn', *good[1:]]) + "\n")
    killed_at_the_rename = textwrap.dedent(f"""
        import os, pathlib, signal
        from cpdagthink.run.runfolder import RunFolder
        pathlib.Path.replace = lambda self, target: os.kill(os.getpid(), signal.SIGKILL)
        folder = RunFolder({str(tmp_path)!r})
        with folder.locked():
            folder.load_records()
    """)
    killed = subprocess.run([sys.executable, "-c", killed_at_the_rename], capture_output=True, text=True, timeout=60)
    assert killed.returncode == -9, killed.stderr
    left = [p.name for p in tmp_path.glob(f".{RECORDS}.*.tmp")]
    assert len(left) == 1 and (tmp_path / REJECTED_LINES).read_text().count('"line": 2') == 1  # the kill's traces
    alive = tmp_path / f".{RECORDS}.{os.getpid()}-0123abcd.tmp"  # a live writer's file is not touched
    alive.write_text("")
    with RunFolder(tmp_path).locked() as folder:
        assert [r.id for r in folder.load_records()] == ["r0", "r1", "r2"]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([".lock", RECORDS, REJECTED_LINES, alive.name])
    rejected = [json.loads(line) for line in (tmp_path / REJECTED_LINES).read_text().splitlines()]
    assert [(r["line"], r["text"]) for r in rejected] == [(2, '{"id": "r9", "torn')]


# ------------------------------------------------------------------------------------------------ completeness
class _Answering(ReferenceBackend):
    """A thinking model behind an API, answered by the reference agent (no server needed to write a folder)."""

    thinking_supported = True


@pytest.fixture()
def made(test_csv, tmp_path, monkeypatch):
    """A finished run of ``structured`` on 4 rows through an API configuration (base URL, timeout, retries)."""
    from cpdagthink.book import experiments as ex
    from cpdagthink.run.runner import run_config

    monkeypatch.setenv("CORR2CAUSE_CSV", str(test_csv))
    setup = ex.setup_from_parameters({"backend": "openai", "model": "gpt-4o", "backend_options": {
                                          "base_url": ["http://127.0.0.1:9/v1"], "timeout": 5, "retries": 1}, "limit": 4, "out_root": str(tmp_path / "runs"),
                                      "cache_dir": str(tmp_path / "cache")})
    config = setup.for_run("structured", 0)
    instances = config.instances()
    folder = config.folder(instances)
    run_config(config, _Answering(), instances, folder, progress=False)
    return config, instances, folder


def _files(folder):
    return {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in folder.iterdir()}


def test_a_finished_run_is_complete_and_is_read_without_changing_its_folder(made, tmp_path):
    config, instances, folder = made
    before = _files(folder)
    held = completeness(folder, config, instances)
    assert held.complete and held.missing is None and is_complete(folder, config, instances)
    assert [r.id for r in held.records] == [i.id for i in instances]
    assert [r.id for r in completeness(folder, config, instances[::-1]).records] == [i.id for i in instances[::-1]]
    assert _files(folder) == before  # no lock taken, nothing rewritten
    # copied back from a cluster to another place: the records and configuration still hold the run
    elsewhere = tmp_path / "laptop" / folder.name
    shutil.copytree(folder, elsewhere)
    assert is_complete(elsewhere, config.model_copy(update={"out_root": str(tmp_path / "laptop")}), instances)


def test_a_missing_record_or_a_row_edited_since_makes_a_run_incomplete(made):
    config, instances, folder = made
    lines = (folder / RECORDS).read_text().splitlines(keepends=True)
    (folder / RECORDS).write_text("".join(lines[:-1]))
    missing = completeness(folder, config, instances).missing
    assert missing == f"1 of 4 asked instances have no record (first: {instances[-1].id})"
    (folder / RECORDS).write_text("".join(lines[:-1]) + lines[-1][:40] + "\n")  # the record edited into garbage
    assert "1 of 4 asked instances have no record" in completeness(folder, config, instances).missing
    (folder / RECORDS).write_text("".join(lines))
    assert is_complete(folder, config, instances)
    edited = [instances[0].model_copy(update={"hypothesis": instances[0].hypothesis + " (edited)"}), *instances[1:]]
    missing = completeness(folder, config, edited).missing
    assert missing.startswith(f"1 record(s) answer a row of the same id but other content (first: {instances[0].id})")
    never_asked = next(i for i in config.all_instances() if i.id not in {j.id for j in instances})
    assert completeness(folder, config, [*instances, never_asked]).missing == \
        f"1 of 5 asked instances have no record (first: {never_asked.id})"


def test_another_model_condition_probe_or_decoding_is_not_the_run_held(made):
    config, instances, folder = made
    others = {
        "run.model": config.model_copy(update={"model": "gpt-4.1"}),
        "run.options.api": config.model_copy(update={"backend_options": {**config.backend_options,
                                                                         "api": "responses"}}),
        "run.decoding.max_tokens_turn1": config.model_copy(
            update={"decoding": config.decoding.model_copy(update={"max_tokens_turn1": 64})}),
        "run.decoding.temperature": config.model_copy(
            update={"decoding": config.decoding.model_copy(update={"temperature": 0.7})}),
        "run.decoding.tool_choice": config.model_copy(
            update={"decoding": config.decoding.model_copy(update={"tool_choice": "forced"})}),
        "run.decoding.seed": config.model_copy(update={"decoding": config.decoding.model_copy(update={"seed": 1})}),
        "run.probe": config.model_copy(update={"probe": "drop_premise"}),
        "run.condition": config.model_copy(update={"condition": "minimal_instruction"}),
    }
    for field, other in others.items():
        missing = completeness(folder, other, instances).missing
        assert missing.startswith(f"made as another run ({field}"), (field, missing)


def test_transport_options_and_the_sample_description_do_not_separate_runs(made):
    config, instances, folder = made
    moved = config.model_copy(update={"backend_options": {"base_url": "http://10.0.0.7:8000/v1", "timeout": 600,
                                                          "api_key_env": "OTHER_KEY"},
                                      "limit": 0, "cache_dir": "/elsewhere/cache"})
    assert is_complete(folder, moved, instances)


def test_an_unfinished_session_or_stale_metadata_leaves_a_run_incomplete(made, tmp_path):
    from cpdagthink.run.runner import run_config

    config, instances, folder = made

    class Interrupted(_Answering):
        calls = 0

        def complete(self, request):
            Interrupted.calls += 1
            if Interrupted.calls > 2:
                raise KeyboardInterrupt("stopped")
            return super().complete(request)

    other = tmp_path / "interrupted"
    with pytest.raises(KeyboardInterrupt):
        run_config(config.model_copy(update={"cache_dir": str(tmp_path / "cache2"), "chunk_size": 1}), Interrupted(),
                   instances, other, progress=False)
    assert completeness(other, config, instances).missing == \
        "its last session did not finish (status 'interrupted': stopped)"
    summary = json.loads((folder / "summary.json").read_text())
    (folder / "summary.json").write_text(json.dumps({**summary, "status": "error", "message": "disk full"}))
    assert "status 'error': disk full" in completeness(folder, config, instances).missing
    (folder / "summary.json").write_text(json.dumps(summary))
    metadata = json.loads((folder / "metadata.json").read_text())
    (folder / "metadata.json").write_text(json.dumps({k: v for k, v in metadata.items() if k != "thinking_supported"}))
    assert "thinking mode" in completeness(folder, config, instances).missing
    prompts = {**metadata["run"]["condition"], "prompt_hashes": {"structured_turn1_system": "0" * 64}}
    (folder / "metadata.json").write_text(json.dumps({**metadata, "run": {**metadata["run"], "condition": prompts}}))
    assert completeness(folder, config, instances).missing.startswith("made as another run (run.condition.prompt")
    (folder / "metadata.json").write_text("{not json")
    assert "is not valid JSON" in completeness(folder, config, instances).missing
    assert completeness(tmp_path / "absent", config, instances).missing == "no run folder"


def _as_written_before_the_run_identity(folder):
    """Rewrite a folder's ``metadata.json`` and ``config.json`` as an earlier version wrote them: no ``run``, the
    condition, probe and decoding at the top, the backend's identity naming its endpoints, a config of one seed."""
    metadata = json.loads((folder / "metadata.json").read_text())
    run = metadata.pop("run")
    metadata.update(condition=run["condition"], intervention=run["probe"], decoding=run["decoding"],
                    backend={**metadata["backend"], "base_urls": ["http://127.0.0.1:9/v1"]})
    (folder / "metadata.json").write_text(json.dumps(metadata))
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "seeds": [config["decoding"]["seed"]]}))


def test_a_folder_written_before_the_run_identity_is_read_whole_and_resumed_without_a_call(made, tmp_path):
    from cpdagthink.run.runfolder import read_metadata
    from cpdagthink.run.runner import run_config

    config, instances, folder = made
    before = read_metadata(folder)
    _as_written_before_the_run_identity(folder)
    upgraded = read_metadata(folder)
    assert upgraded.run == before.run == config.spec.identity() and "base_urls" not in upgraded.backend
    assert is_complete(folder, config, instances)
    lines = (folder / RECORDS).read_text().splitlines(keepends=True)
    (folder / RECORDS).write_text("".join(lines[:-1]))  # a run stopped before its last row
    resumed = run_config(config, _Answering(), instances, folder, progress=False)
    assert resumed.model_calls == 0 and resumed.cache_hits == 2
    assert read_metadata(folder).run == config.spec.identity() and is_complete(folder, config, instances)


def test_a_record_whose_answer_was_edited_against_its_output_is_named_and_not_read(made):
    """Every answer flipped by hand while each turn's text still says the opposite: the folder is not complete,
    the message names the first such record, and no reader takes the flipped answers."""
    config, instances, folder = made
    flip = {"YES": "NO", "NO": "YES"}
    records = read_records(folder)
    assert records and all(r.answer in flip for r in records)
    (folder / RECORDS).write_text("".join(r.model_copy(update={"answer": flip[r.answer]}).model_dump_json() + "\n"
                                          for r in records))
    missing = completeness(folder, config, instances).missing
    first = records[0]
    assert missing == (f"{RECORDS} line 1 does not hold what its model said (record {first.id}: its answer is "
                       f"\"{flip[first.answer]}\" but its final turn's text reads \"{first.answer}\"), and "
                       f"{len(records) - 1} more such line(s)")
    assert read_records(folder) == []
    held = RunFolder(folder)
    with held.locked():
        assert held.load_records() == []  # a resume sets them aside and asks again (from the cache)
    assert len((folder / REJECTED_LINES).read_text().splitlines()) == len(records)
