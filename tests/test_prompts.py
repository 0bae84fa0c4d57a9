"""Prompt files: every condition's prompts exist, render without missing fields, and hash stably."""

from __future__ import annotations

import pytest

from cpdagthink.conditions import CONDITIONS
from cpdagthink.prompts import PromptError, file_hash, raw, render, used_files


@pytest.mark.parametrize("name", sorted(CONDITIONS))
def test_condition_prompts_render(name):
    condition = CONDITIONS[name]
    fields = {"premise": "Premise: P.", "hypothesis": "A directly causes B.", "status": "as recorded",
              "dot": "digraph {}", "analysis_json": "{}"}
    for prompt in (condition.system, condition.user, condition.follow_up):
        if prompt:
            text = render(prompt, **fields)
            assert "$" not in text


def test_shared_scaffold_is_included_once_and_hashed():
    assert "Meek" in render("baseline_enhanced_system") and "Meek" in render("structured_turn1_system")
    assert "Meek" not in render("minimal_turn1_system")
    hashes = used_files(("structured_turn1_system",))
    assert set(hashes) == {"structured_turn1_system", "pc_scaffold"}
    assert hashes["pc_scaffold"] == file_hash("pc_scaffold") and len(hashes["pc_scaffold"]) == 64


def test_missing_field_and_missing_file_are_errors():
    with pytest.raises(PromptError, match="premise"):
        render("question_user", hypothesis="x")
    with pytest.raises(PromptError):
        raw("does_not_exist")
