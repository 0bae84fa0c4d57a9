"""The book's tables as a page shows them: readable names for the keys the frames of
:mod:`cpdagthink.analysis.tables` carry, HTML tables (:func:`show`) and Markdown tables (:func:`markdown_table`)
with every cell escaped as text, and the views made for reading rather than computing (the paper's figures named
in words, a run's details, the bins in two narrow tables).
"""

from __future__ import annotations

import html
import itertools
from collections.abc import Iterable, Mapping
from typing import Any

import pandas as pd

from ..analysis.markup import Markdown, Part, number, table
from ..analysis.tables import paper

# Readable names for the keys tables carry (conditions, columns), as a paper prints them.
LABELS = {
    "structured": "Structured Thinking", "baseline_enhanced": "BaselineEnhanced",
    "twoturn_prose_pc": "TwoTurn-Prose-PC", "singleturn_structured": "single-turn structured",
    "minimal_instruction": "minimal instruction", "no_thinking": "no thinking",
    "no_constrained_decoding": "no constrained decoding", "baseline_no_thinking": "BaselineEnhanced without thinking",
    "num_variables": "variables", "class_size": "DAGs in its class", "holds_in": "DAGs where it holds",
    "drop_gold_pp": "F1 drop, gold (pp)", "drop_oracle_pp": "F1 drop, corrected (pp)",
    "flipped_share": "answers flipped", "intervened_share": "turns changed", "flipped_share_pct": "answers flipped (%)",
    "intervened_share_pct": "turns changed (%)", "base_f1_gold": "F1 unprobed",
    "f1_gold": "F1 probed", "other": "compared with",
    # the turn-2 probes (chapter 04)
    "unprobed": "unprobed", "scramble_full": "full scramble", "scramble_skeleton": "skeleton scramble",
    "scramble_v_structures": "v-structure scramble", "scramble_directed": "directed-edge scramble",
    "drop_premise": "premise removed", "swap_valid_cpdag": "swap to another valid CPDAG",
    "swap_valid_cpdag_same_skeleton": "swap to a valid CPDAG, same skeleton",
    # the graph audit's measures (chapter 05)
    "records": "records", "parsed": "parsed objects", "parse_rate": "parse rate", "skeleton_f1": "skeleton F1",
    "skeleton_f1_micro": "skeleton F1 (micro)", "v_structures_f1": "v-structure F1",
    "v_structures_f1_micro": "v-structure F1 (micro)", "directed_f1": "directed-edge F1",
    "directed_f1_micro": "directed-edge F1 (micro)", "undirected_f1": "undirected-edge F1",
    "undirected_f1_micro": "undirected-edge F1 (micro)", "exact_match_rate": "exact CPDAG match rate",
    "violation_rate": "violation rate", "graph_quality": "graph quality", "valid_not_exact": "valid, not exact",
    "accuracy_corrected": "accuracy, corrected labels",
    # the later-causes-earlier shortcut (chapter 05)
    "n_later_causes_earlier": "later-causes-earlier hypotheses", "prediction_no_rate": "share answered NO",
    "no_rate_other_causal": "share answered NO, other causal hypotheses", "gold_all_zero": "gold labels all NO",
    "oracle_all_zero": "corrected labels all NO",
    # the certified validator's violation kinds (chapter 05)
    "unknown_variable": "unknown or repeated variable", "skeleton_mismatch": "skeleton not the edges' own",
    "directed_and_undirected": "edge both directed and undirected", "directed_cycle": "directed cycle",
    "v_structure_contradicts_edges": "v-structure contradicting the edges",
    "v_structure_contradicts_sepset": "v-structure contradicting a separating set",
    "not_meek_closed": "not closed under Meek's rules", "non_chordal_component": "non-chordal undirected component",
    "not_a_cpdag": "the CPDAG of no DAG", "facts_skeleton": "skeleton against the premise",
    "facts_sepset": "separating set against the premise", "facts_class": "not the premise's CPDAG",
    # cost (chapter 01, §7.3)
    "mean_prompt_tokens": "prompt tokens", "mean_completion_tokens": "completion tokens",
    "mean_reasoning_tokens": "of which reasoning", "mean_total_tokens": "tokens per instance",
    "token_ratio": "tokens vs baseline", "mean_latency_s": "model time per instance (s, load-sensitive)",
    "ms_per_completion_token": "ms per completion token (load-sensitive)",
    "latency_ratio": "time vs baseline (load-sensitive)",
    # the failure classifier's counts and kinds (chapter 06)
    "cut off": "cut off", "unparsed_answer": "unparsed answer", "rejected_request": "refused request",
    "turn1_cut_off": "turn 1 cut off", "cut_off_answer": "answer cut off",
    "no_graph": "no graph reached turn 2", "wrong_graph": "wrong graph state", "mec_ambiguity": "class ambiguity",
    "wrong_readout": "wrong readout", "one_turn_mec_ambiguity": "one-turn: class ambiguity",
    "one_turn_other": "one-turn: other",
}


WHOLE = {"seed", "n", "seeds", "positives", "variables", "tp", "fp", "fn", "tn", "unparsed", "cut", "rejected", "FN",
         "FP", "errors", "outputs", "records", "parsed"}  # first words of columns (or measure rows) that count


def _counts(names: Iterable[Any], values: pd.DataFrame) -> list[Any]:
    """Of ``names`` (columns, or rows of a frame of measures), those that count (first word in :data:`WHOLE`)
    and whose ``values`` (a column or row each) are whole numbers, however stored."""
    def whole(column: pd.Series) -> bool:
        numbers = pd.to_numeric(column.dropna(), errors="coerce")
        return bool(numbers.notna().all() and numbers.map(lambda x: float(x).is_integer()).all())

    return [name for name in names if isinstance(name, str) and name.split()[:1] and name.split()[0] in WHOLE
            and whole(values[name])]


def p_text(p: float | None) -> str:
    """A p-value as a page prints it: ``< 0.001`` below a thousandth (never ``0.000`` or ``1e-22``), else two
    significant digits; ``n/a`` when missing."""
    if p is None or pd.isna(p):
        return "n/a"
    return "< 0.001" if p < 0.001 else f"{p:.2g}"


P_COLUMNS = {"McNemar p"}  # columns that hold p-values, printed by :func:`p_text`


def label(key: Any) -> Any:
    """The readable name of a condition or column key, or of each side of ``a vs b`` (other values as they
    are)."""
    if not isinstance(key, str):
        return key
    return " vs ".join(LABELS.get(part, part) for part in key.split(" vs "))


def readable(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with its index as ordinary columns (a default 0..n index dropped) and its keys, in column
    names and in text cells, replaced by readable names."""
    # an unnamed index (e.g. measure names) gets a blank header rather than "index"
    flat = frame if isinstance(frame.index, pd.RangeIndex) else frame.reset_index(
        names=[n if n is not None else "" for n in frame.index.names])
    flat = flat.rename(columns=label)
    text = [c for c in flat.columns if flat[c].dtype == object or pd.api.types.is_string_dtype(flat[c])]
    return flat.assign(**{c: flat[c].map(label) for c in text})


_TABLE_IDS = itertools.count(1)  # a page's tables in the order it shows them: the same records, the same page


def _float_columns(flat: pd.DataFrame) -> tuple[list[Any], list[Any], list[Any]]:
    """A shown table's float columns by how they print: to ``digits`` places, as whole numbers (a seed or a count
    stored as a float beside a missing value), and as p-values (:data:`P_COLUMNS`)."""
    floats = [c for c in flat.columns if pd.api.types.is_float_dtype(flat[c])]
    whole = _counts(floats, flat)
    ps = [c for c in floats if c in P_COLUMNS]
    return [c for c in floats if c not in whole and c not in ps], whole, ps


def show(frame: pd.DataFrame, digits: int = 2):
    """A table as the book prints it: readable labels, no index column, numbers to ``digits`` places,
    missing values as a dash, text never cut short. Its HTML ids count the tables shown in this process
    (pandas would draw a random one), so a page made again from the same records is the same page."""
    flat = readable(frame)
    floats, whole, ps = _float_columns(flat)
    names = flat.iloc[:, 0] if len(flat.columns) and not pd.api.types.is_numeric_dtype(flat.iloc[:, 0]) else pd.Series()
    rows = [i for i, name in names.items() if _counts([name], pd.DataFrame({name: flat.loc[i, floats]}))]
    # class "dataframe": the book's own table style, as pandas' plain HTML gets it. A Styler does not escape
    # by default, and cells and headers may hold CSV or model text: every one is escaped.
    styler = (flat.style.set_uuid(f"t{next(_TABLE_IDS)}").hide(axis="index").set_table_attributes('class="dataframe"')
              .format("{:.%df}" % digits, subset=floats, na_rep="—")
              .format("{:.0f}", subset=whole, na_rep="—")
              .format("{:.0f}", subset=pd.IndexSlice[rows, floats], na_rep="—")
              .format(lambda p: html.escape(p_text(p)), subset=ps)  # a formatter's output is not escaped
              .format_index(escape="html", axis=1))
    # the text and integer columns; a whole-number float column keeps its "{:.0f}" (the default would print
    # a seed as 0.000000)
    others = [c for c in flat.columns if c not in floats and c not in whole and c not in ps]
    return styler.format(na_rep="—", subset=others, escape="html") if others else styler


def markdown_table(frame: pd.DataFrame, digits: int = 2) -> Markdown:
    """A frame as a MyST/commonmark pipe table (index first, missing values as a dash), for pasting into a
    page's prose where it takes the book's own table style; every header and cell is text
    (:func:`markup.table`)."""
    flat = readable(frame)
    whole = set(_counts(flat.columns, flat))

    def cell(value: Any, column: Any) -> Part:
        if isinstance(value, float) and column in P_COLUMNS:
            return "—" if pd.isna(value) else p_text(value)
        if isinstance(value, float):
            return "—" if pd.isna(value) else number(value, ".0f" if column in whole else f".{digits}f")
        return "—" if value is None or value is pd.NA else str(value)

    return table([str(c) for c in flat.columns],
                 [[cell(v, c) for v, c in zip(row, flat.columns)] for row in flat.itertuples(index=False)])


def bin_tables(bins: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """:func:`bins_frame` in two narrow tables: each bin's instances and positives (the same for every
    condition and seed), and accuracy with one column per condition (mean over seeds)."""
    sizes = bins.groupby("num_variables")[["n", "positives"]].first()
    accuracy = bins.pivot_table(index="num_variables", columns="condition", values="accuracy", sort=False)
    return sizes, accuracy.rename(columns=lambda c: f"accuracy {label(c)}")


def paper_view(keys: Iterable[str]) -> pd.DataFrame:
    """Paper figures for display, each named in words (what was measured, on which condition and split),
    with its value as the paper prints it, its model and its section."""
    table = paper(keys)
    return pd.DataFrame({"paper figure": table["metric"] + ", " + table["condition"].map(label) + ", "
                         + table["split"], "value": table["value"].map(lambda v: f"{v:g}"),
                         "model": table["model"], "section": table["section"]})


def paper_appendix() -> pd.DataFrame:
    """Every figure of ``data/paper_reported.csv`` as the appendix shows it: what was measured, its value as the
    file writes it (the paper's own precision: no digit added or rounded away), the model, split and condition
    (by its display name) it was measured on, the section and page, and the paper's qualification; the file's
    internal keys left out."""
    import csv

    from ..paths import PAPER_REPORTED

    with open(PAPER_REPORTED, newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    return pd.DataFrame({"figure": [r["metric"] for r in rows], "value": [r["value"] for r in rows],
                         "model": [r["model"] for r in rows], "split": [r["split"] for r in rows],
                         "condition": [label(r["condition"]) for r in rows], "section": [r["section"] for r in rows],
                         "page": [r["page"] for r in rows], "note": [r["note"] for r in rows]})


def _hardware_text(hardware: Mapping[str, Any]) -> str:
    """A run's hardware as :func:`run_details` shows it: its GPUs, else its CPU and cores."""
    return (", ".join(hardware.get("gpus") or []) or
            f"CPU: {hardware.get('cpu') or 'unknown'} ({hardware.get('cpu_cores') or '?'} cores)")


def run_details(metadata: Mapping[str, Any]) -> pd.DataFrame:
    """App. J's run details from one run folder's ``metadata.json``: the model and tokenizer revisions, the API
    and the snapshots it served, the decoding, the package versions, the hardware and the code's commit."""
    packages = metadata.get("packages") or {}
    decoding = metadata.get("decoding") or {}
    rows = {
        "model": (metadata.get("backend") or {}).get("model"),
        "model revision": metadata.get("model_revision"),
        "tokenizer revision": metadata.get("tokenizer_revision"),
        "model package": metadata.get("model_package"),
        "API": metadata.get("api"),
        "served snapshots": ", ".join(metadata.get("served_models") or []) or None,
        "decoding": ", ".join(f"{k} {v}" for k, v in decoding.items() if v is not None),
        "packages": ", ".join(f"{k} {v}" for k, v in sorted(packages.items())),
        "python": metadata.get("python"),
        "hardware": _hardware_text(metadata.get("hardware") or {}),
        "code (git commit)": _revision_text(metadata.get("git")),
        "started": metadata.get("started_at"),
    }
    return pd.DataFrame({"field": list(rows), "value": ["—" if v in (None, "") else str(v) for v in rows.values()]})


def _revision_text(revision: Mapping[str, Any] | None) -> str | None:
    """A run's ``git`` revision as the page prints it: the commit, and whether the code had uncommitted changes."""
    if not revision:
        return None
    return revision["commit"] + (" with uncommitted changes" if revision["dirty"] else "")
