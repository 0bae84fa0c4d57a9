"""Run folders under hostile use: concurrent runs, garbled lines, kills during a rewrite, bad folders."""

from __future__ import annotations

import json
import os

import pytest

from analyses import run_record
from cpdagthink.runfolder import (
    REJECTED_LINES,
    RECORDS,
    RunFolder,
    RunFolderError,
    RunLockedError,
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
