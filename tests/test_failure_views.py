"""Views of the errors: the gallery table, the paired drawings, the filterable HTML table."""

from __future__ import annotations

import html
import json

import matplotlib

matplotlib.use("Agg")

import pandas as pd  # noqa: E402
from matplotlib.colors import to_rgba  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.patches import FancyArrowPatch  # noqa: E402

from cpdagthink.book.failure_views import (GALLERY_COLUMNS, case_html, draw_pair, drawn_edges, gallery_rows,  # noqa: E402
                                      graph_flags, show_case, widget_browser)
from cpdagthink.method.conditions import get_condition  # noqa: E402
from cpdagthink.method.decoding import Decoding  # noqa: E402
from cpdagthink.method.schema import CausalAnalysis  # noqa: E402
from cpdagthink.run.inspection import inspect_request  # noqa: E402
from failure_cases import (CHAIN, COLLIDER, HOSTILE, INSTANCES, TAIL, Hostile, hostile_runs, mixed_runs,  # noqa: E402
                           record, reference, reversed_graph)


def test_gallery_rows_list_every_error_with_its_objects():
    rows = gallery_rows(mixed_runs(), INSTANCES)
    assert list(rows.columns) == GALLERY_COLUMNS and len(rows) == 4
    assert rows["flow"].tolist() == ["tool", "tool", "one_turn", "one_turn"]
    first = rows.iloc[0]
    assert (first["id"], first["kind"], first["oracle"], first["answer"]) == ("collider", "wrong_graph", 1, "NO")
    assert json.loads(first["emitted_analysis"])["directed_edges"] == [["C", "A"], ["C", "B"]]
    assert json.loads(first["reference_analysis"]) == reference(COLLIDER)
    assert first["reasoning"] == "turn-2 thinking" and first["answer_text"].endswith("Answer: NO")
    assert pd.isna(rows.iloc[-1]["emitted_analysis"]) and rows.iloc[-1]["condition"] == "baseline_enhanced"


def test_gallery_rows_show_the_probed_object_next_to_the_emitted_one():
    probed = record(COLLIDER, "NO", parsed=reference(COLLIDER), shown=reversed_graph(COLLIDER))
    row = gallery_rows([probed], INSTANCES).iloc[0]
    assert (row["kind"], row["graph_verdict"], row["intervention_note"]) == ("wrong_graph", 0, "probe")
    assert json.loads(row["emitted_analysis"]) == reference(COLLIDER)
    assert json.loads(row["shown_analysis"]) == reversed_graph(COLLIDER)


def arrows(ax) -> list[FancyArrowPatch]:
    return [p for p in ax.patches if isinstance(p, FancyArrowPatch)]


def test_draw_pair_draws_every_edge_and_highlights_the_differences():
    ref = CausalAnalysis.model_validate(reference(TAIL))  # A -> B, C -> B, A - D
    emitted = ref.model_copy(update={"directed_edges": [("A", "B"), ("B", "C")], "undirected_edges": [("A", "D"), ("C", "D")]})
    figure = Figure()
    left, right = figure.subplots(1, 2)
    assert draw_pair(emitted, ref, left, right) is figure
    red = to_rgba("tab:red")
    assert len(arrows(left)) == 4 and len(arrows(right)) == 3
    assert sum(p.get_edgecolor() == red for p in arrows(left)) == 2  # B -> C, C - D
    assert sum(p.get_edgecolor() == red for p in arrows(right)) == 1  # C -> B
    assert left.get_title() == "emitted" and right.get_title() == "reference"
    # Same layout: every node label sits at the same place on both axes.
    where = [{t.get_text(): t.get_position() for t in ax.texts} for ax in (left, right)]
    assert where[0] == where[1] and set(where[0]) == {"A", "B", "C", "D"}


def test_draw_pair_without_an_emitted_graph():
    ref = CausalAnalysis.model_validate(reference(CHAIN))
    figure = Figure()
    left, right = figure.subplots(1, 2)
    draw_pair(None, ref, left, right)
    assert len(arrows(left)) == 0 and len(arrows(right)) == 2 and left.get_title() == "emitted: none"
    assert all(p.get_edgecolor() == to_rgba("tab:red") for p in arrows(right))


def test_correct_cases_come_for_contrast():
    rows = gallery_rows(mixed_runs(), INSTANCES, include_correct=True)
    assert len(rows) == 6 and rows["kind"].tolist().count("correct") == 2
    assert rows.loc[rows["kind"] == "correct", "id"].tolist() == ["chain", "tail"]
    # Only on rows some run got wrong: a row every run answered correctly is left out.
    runs = {"a": [record(COLLIDER, "YES"), record(TAIL, "NO")], "b": [record(COLLIDER, "YES"), record(TAIL, "YES")]}
    rows = gallery_rows(runs, INSTANCES, include_correct=True)
    assert list(zip(rows["condition"], rows["id"], rows["kind"])) == [("a", "tail", "one_turn_mec_ambiguity"),
                                                                       ("b", "tail", "correct")]


def test_rows_carry_both_turns_as_sent_rebuilt_like_cpdagthink_prompt(tmp_path):
    decoding = Decoding(max_tokens_turn1=64, max_tokens_answer=32)
    runs = hostile_runs(tmp_path, INSTANCES, decoding)
    rows = gallery_rows(runs, INSTANCES, decodings=dict.fromkeys(runs, decoding)).set_index(["condition", "id"])
    assert rows["as_recorded"].all() and len(rows) == 9  # every answer flipped: every row an error
    for condition in runs:
        for inst in INSTANCES:
            row = rows.loc[(condition, inst.id)]
            for turn, column in ((1, "turn1_messages"), (2, "turn2_messages")):
                if condition == "baseline_enhanced" and turn == 2:
                    assert pd.isna(row[column])
                    continue
                printed = inspect_request(get_condition(condition), Hostile(), inst, turn, decoding=decoding)
                assert row[column] == json.dumps(printed.to_json()["messages"], indent=2, ensure_ascii=False)
    structured = rows.loc[("structured", "collider")]
    assert json.loads(structured["turn1_arguments"]) == reference(COLLIDER) and structured["turn1_text"] == ""
    prose = rows.loc[("twoturn_prose_pc", "collider")]
    assert prose["flow"] == "prose" and prose["turn1_text"].endswith(HOSTILE) and pd.isna(prose["turn1_arguments"])
    # Settings other than the run's rebuild other requests, and the rows say so.
    other = gallery_rows(runs, INSTANCES, decodings=dict.fromkeys(runs, Decoding()))
    assert not other["as_recorded"].any()


def test_flags_and_drawing_of_what_no_cpdag_holds():
    odd = CausalAnalysis.model_validate({
        "variables": ["A", "B", "C"], "skeleton": [["A", "B"], ["B", "C"], ["C", "C"]], "separating_sets": [],
        "v_structures": [], "directed_edges": [["A", "B"], ["B", "C"], ["C", "B"], ["A", "A"]],
        "undirected_edges": [["B", "A"]]})
    assert graph_flags(odd) == ["self-loop C - C in skeleton", "self-loop A -> A in directed_edges",
                                "A, B listed as A -> B and as A - B", "B, C listed as B -> C and as C -> B"]
    assert drawn_edges(odd) == {("conflict", "A", "B"), ("conflict", "B", "C")}  # once each, no self-loop
    assert graph_flags(CausalAnalysis.model_validate(reference(TAIL))) == []
    figure = Figure()
    left, right = figure.subplots(1, 2)
    draw_pair(odd, None, left, right)
    assert len(arrows(left)) == 2 and all(p.get_linestyle() == "dashed" for p in arrows(left))


def test_a_case_shows_hostile_text_as_text(tmp_path):
    runs = hostile_runs(tmp_path, INSTANCES, Decoding())
    row = gallery_rows(runs, INSTANCES).iloc[0]
    shown = case_html(row)
    assert "<script>" not in shown and "<iframe" not in shown and "<img" not in shown
    assert html.escape(HOSTILE) in shown and "```" in shown


def test_a_case_is_shown_and_the_widget_browser_filters(capsys):
    rows = gallery_rows(mixed_runs(), INSTANCES)
    show_case(rows.iloc[0])  # draws with the Agg backend, prints the case as Markdown
    browser = widget_browser(rows)
    dropdowns, slider, _ = browser.children[0].children, browser.children[1], browser.children[2]
    condition = dropdowns[0]
    assert set(condition.options) == {"(all)", *rows["condition"].astype(str)}
    condition.value = "baseline_enhanced"
    assert slider.max == (rows["condition"] == "baseline_enhanced").sum() - 1
