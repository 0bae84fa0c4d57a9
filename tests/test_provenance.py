"""What a run records of where it ran: the code's git revision."""

from __future__ import annotations

from cpdagthink.run.provenance import git_revision
from cpdagthink.run.records import GitRevision
from conftest import committed_checkout


def test_the_git_revision_names_the_commit_and_whether_tracked_files_changed(tmp_path):
    assert git_revision(tmp_path) is None  # not a checkout
    head = committed_checkout(tmp_path, "code.py")
    (tmp_path / "notes.txt").write_text("untracked")  # untracked files do not make the code dirty
    assert git_revision(tmp_path) == GitRevision(commit=head, dirty=False)
    (tmp_path / "code.py").write_text("x = 2\n")
    assert git_revision(tmp_path) == GitRevision(commit=head, dirty=True)
