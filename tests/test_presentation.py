"""The book's tables as a page shows them: readable labels, escaped HTML and Markdown tables, the paper's
figures in words, a run's details."""

from __future__ import annotations

import math
import re
import subprocess

import pandas as pd

from cpdagthink.analysis import tables
from cpdagthink.book import experiments as ex
from cpdagthink.book import presentation
from cpdagthink.paths import PROJECT_ROOT
from scored_runs import two_seed_grid


def test_paper_figures_are_named_in_words_as_the_paper_prints_them():
    view = presentation.paper_view(["main_mcnemar_p"]).iloc[0]
    assert view["value"] == "2.4e-06" and "Structured Thinking vs BaselineEnhanced" in view["paper figure"]


def test_bin_tables_are_narrow():
    sizes, accuracy = presentation.bin_tables(tables.bins_frame(two_seed_grid()))
    assert list(sizes.columns) == ["n", "positives"] and sizes.loc[5, "positives"] == 1
    assert list(accuracy.columns) == ["accuracy BaselineEnhanced", "accuracy Structured Thinking"]


def test_markdown_table_renders_missing_values_as_dashes():
    frame = pd.DataFrame({"a": [1.234, math.nan]}, index=pd.Index(["x", "y"], name="row"))
    assert presentation.markdown_table(frame).source().splitlines() == [
        "| row | a |", "|---|---|", r"| x | 1\.23 |", "| y | — |"]


def test_tables_print_readable_labels_without_index_columns():
    frame = pd.DataFrame({"F1": [1.234, math.nan]}, index=pd.Index(["structured", "baseline_enhanced"], name="condition"))
    html = presentation.show(frame).to_html()
    assert "Structured Thinking" in html and "BaselineEnhanced" in html and "—" in html and "1.23" in html
    assert "structured<" not in html and 'class="row_heading' not in html
    assert presentation.label("structured vs no_constrained_decoding") == "Structured Thinking vs no constrained decoding"
    long = "x" * 80
    assert long in presentation.show(pd.DataFrame({"hypothesis": [long]})).to_html()  # never cut short with "…"


def test_a_shown_table_escapes_text_from_a_csv_or_a_model():
    hostile = '<img src=x onerror="window.pwned=1">'
    html = presentation.show(pd.DataFrame({"hypothesis": [hostile], hostile: [1.5]})).to_html()
    assert "<img" not in html and "&lt;img src=x onerror=" in html


def test_a_markdown_table_shows_its_text_literally():
    table = presentation.markdown_table(pd.DataFrame({"<b>model</b>": ["<script>alert(1)</script> a|b"]})).source()
    assert "<" not in table.replace("\\<", "") and r"\<script\>" in table and r"a\|b" in table


def test_run_details_show_app_j_fields_of_a_real_run(test_csv, tmp_path):
    from cpdagthink.run.config import RunParameters

    setup = RunParameters(backend="reference", data=str(test_csv), limit=2, out_root=str(tmp_path / "runs"),
                          cache_dir=str(tmp_path / "cache")).to_config()
    instances = setup.instances()
    assert ex.run_metadata(setup, "structured", 0, instances) == {}  # not run yet
    ex.run(setup.for_run("structured", 0), instances, progress=False)
    details = presentation.run_details(ex.run_metadata(setup, "structured", 0, instances)).set_index("field")["value"]
    assert details["python"] and "networkx" in details["packages"] and "pydantic" in details["packages"]
    assert details["hardware"].startswith("CPU: ") or details["hardware"]
    assert details["model revision"] == "—"  # the symbolic agent has no weights
    assert details["code (git commit)"].split()[0] in (subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=PROJECT_ROOT, capture_output=True, text=True).stdout.strip(), "—")


def test_run_details_say_when_the_code_had_uncommitted_changes():
    details = presentation.run_details({"git": {"commit": "abc123", "dirty": True}}).set_index("field")["value"]
    assert details["code (git commit)"] == "abc123 with uncommitted changes"
    clean = presentation.run_details({"git": {"commit": "abc123", "dirty": False}}).set_index("field")["value"]
    assert clean["code (git commit)"] == "abc123"


def test_tables_print_counts_and_seeds_as_whole_numbers_and_name_every_key():
    measures = pd.DataFrame({"structured": [4.0, 3.0, 0.75], "baseline_enhanced": [4.0, 2.0, 0.5]},
                            index=pd.Index(["records", "parsed", "parse_rate"]))
    html = presentation.show(measures, 3).to_html()
    assert ">4</td>" in html and ">3</td>" in html and "4.000" not in html and ">0.750</td>" in html
    assert "Structured Thinking" in html and "baseline_enhanced" not in html
    seeds = pd.DataFrame({"seed": [0.0, math.nan], "n": [4.0, 4.0], "F1": [50.0, 66.666]},
                         index=pd.Index(["structured", "always YES"], name="condition"))
    assert presentation.markdown_table(seeds).source().splitlines()[2:] == [
        r"| Structured Thinking | 0 | 4 | 50\.00 |", r"| always YES | — | 4 | 66\.67 |"]
    shown = presentation.show(seeds).to_html()  # the HTML table too: chapter 01's per-seed F1 printed 0.000000
    assert re.search(r">0</td>", shown) and "0.000000" not in shown and ">66.67</td>" in shown
    kinds = presentation.show(pd.DataFrame({"outputs": [2]}, index=pd.Index(["directed_and_undirected"], name="kind")))
    assert "edge both directed and undirected" in kinds.to_html()


def test_p_values_print_below_a_thousandth_as_less_than_never_as_zero():
    paired = pd.DataFrame({"comparison": ["structured vs baseline_enhanced"] * 2, "seed": [0, 1],
                           "gain (pp)": [29.6, 3.0], "McNemar p": [3e-23, 0.0412]})
    html = presentation.show(paired).to_html()
    assert "&lt; 0.001" in html and ">0.041</td>" in html and "0.00<" not in html and "e-23" not in html
    rows = presentation.markdown_table(paired).source().splitlines()[2:]
    assert rows[0].endswith(r"| \< 0\.001 |") and rows[1].endswith(r"| 0\.041 |")
    assert presentation.p_text(math.nan) == "n/a" and presentation.p_text(0.5) == "0.5"


def test_the_paper_appendix_is_a_table_to_read_at_the_papers_precision():
    appendix = presentation.paper_appendix()
    assert list(appendix.columns) == ["figure", "value", "model", "split", "condition", "section", "page", "note"]
    assert len(appendix) == len(tables.paper())
    delta = appendix[appendix["figure"] == "F1 gain pp"].iloc[0]
    assert (delta["value"], delta["condition"]) == ("13.35", "Structured Thinking vs BaselineEnhanced")
    assert "2.4e-06" in set(appendix["value"])  # as the file writes it, not 0.00 or 2.40e-06
    text = presentation.markdown_table(appendix).source()
    assert "main_delta" not in text and "baseline_enhanced" not in text
