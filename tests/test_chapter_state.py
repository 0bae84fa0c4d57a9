"""Where a chapter stands: complete only when every code cell ran, executed under its lock, and named as it is."""

from __future__ import annotations

import nbformat
import pytest

from cpdagthink.book.chapter_state import (ChapterBusyError, executing, executing_process, read_chapter,
                                           unfinished_reason)


def _notebook(*cells):
    """A notebook of code cells given as ``(source, execution_count, papermill status)``."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(source, execution_count=count, metadata={"papermill": {"status": status}})
                for source, count, status in cells]
    return nb


def test_cells_papermill_marked_completed_without_running_leave_the_chapter_unfinished():
    """papermill's process interrupted: every cell it never reached reads "completed", with no execution count."""
    stopped = _notebook(("x = 1", 1, "completed"), ("y = 2", None, "completed"), ("show(y)", None, "completed"))
    assert unfinished_reason(stopped) == "2 of 3 code cells never ran"
    assert unfinished_reason(_notebook(("x = 1", 1, "completed"), ("", None, "completed"))) is None  # empty: not run
    assert unfinished_reason(_notebook(("x = 1", 1, "running"))) == "a cell was left running"


def test_a_second_execution_of_a_chapter_under_way_is_refused_and_its_state_read(tmp_path):
    (tmp_path / ".01_x.partial.ipynb").write_text("{}")  # a stopped execution's notebook
    with executing(tmp_path, "01_x") as partial:
        assert not partial.exists()  # removed: this execution writes it afresh
        nbformat.write(_notebook(("x = 1", None, "running")), partial)
        assert executing_process(tmp_path, "01_x") == str(__import__("os").getpid())
        assert read_chapter(tmp_path, "01_x").unfinished.describe().startswith("its execution is still under way")
        with pytest.raises(ChapterBusyError, match="01_x is being executed into .* by another process"):
            with executing(tmp_path, "01_x"):
                pass
    assert executing_process(tmp_path, "01_x") is None
    assert read_chapter(tmp_path, "01_x").unfinished.describe() == "its execution did not finish, a cell was left running"


def test_an_execution_stopped_before_its_rename_or_mid_write_is_named_as_such(tmp_path):
    nbformat.write(_notebook(("x = 1", 1, "completed")), tmp_path / ".01_x.partial.ipynb")
    assert read_chapter(tmp_path, "01_x").unfinished.describe() == (
        "its execution did not finish, it ended before it replaced the chapter")
    (tmp_path / ".01_x.partial.ipynb").write_text('{"cells": [')  # torn as papermill saved it
    assert read_chapter(tmp_path, "01_x").unfinished.reason == "its notebook was left unreadable"
