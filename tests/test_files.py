"""The atomic writer under kills, full disks and concurrent writers."""

from __future__ import annotations

import errno
import json
import os
import stat
import threading

import pytest

from cpdagthink.files import remove_stale_temporaries, write_atomic


def test_a_write_killed_midway_leaves_the_old_file_and_no_temporary_file(tmp_path, monkeypatch):
    target = tmp_path / "metadata.json"
    target.write_text('{"old": true}')

    def killed(fd):
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "fsync", killed)
    with pytest.raises(KeyboardInterrupt):
        write_atomic(target, '{"new": true}')
    assert json.loads(target.read_text()) == {"old": True}
    assert [p.name for p in tmp_path.iterdir()] == ["metadata.json"]


def test_a_full_disk_raises_the_os_error_and_leaves_the_old_file(tmp_path, monkeypatch):
    target = tmp_path / "entry.json"
    target.write_text("old")

    def full(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(OSError, match="No space left on device"):
        write_atomic(target, "new")
    assert target.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["entry.json"]


def test_without_sync_the_file_is_written_whole_and_not_waited_for_on_the_disk(tmp_path, monkeypatch):
    target = tmp_path / "entry.json"
    target.write_text("old")

    def never(fd):
        raise AssertionError("fsync called")

    monkeypatch.setattr(os, "fsync", never)
    write_atomic(target, "new", sync=False)
    assert target.read_text() == "new" and [p.name for p in tmp_path.iterdir()] == ["entry.json"]
    with pytest.raises(AssertionError, match="fsync called"):
        write_atomic(target, "newer")  # the default waits for the disk
    assert target.read_text() == "new" and [p.name for p in tmp_path.iterdir()] == ["entry.json"]


def test_the_folder_is_made_and_the_file_has_the_usual_permissions(tmp_path):
    target = tmp_path / "a" / "b" / "entry.json"
    umask = os.umask(0o022)
    try:
        write_atomic(target, "text")
    finally:
        os.umask(umask)
    assert target.read_text() == "text" and stat.S_IMODE(target.stat().st_mode) == 0o644


def test_concurrent_writers_of_one_file_leave_one_whole_text(tmp_path):
    target = tmp_path / "entry.json"
    texts = [str(n) * 100_000 for n in range(8)]
    threads = [threading.Thread(target=write_atomic, args=(target, t)) for t in texts]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert target.read_text() in texts and [p.name for p in tmp_path.iterdir()] == ["entry.json"]


def test_only_the_temporary_files_of_writers_no_longer_running_are_removed(tmp_path):
    import subprocess
    import sys

    ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                           check=True)
    dead = tmp_path / f".records.jsonl.{int(ended.stdout)}-0123abcd.tmp"
    live = tmp_path / f".records.jsonl.{os.getpid()}-89abcdef.tmp"
    other = tmp_path / ".notes.tmp"  # not a name write_atomic gives
    for path in (dead, live, other):
        path.write_text("x")
    assert remove_stale_temporaries(tmp_path) == [dead]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([live.name, other.name])
