"""The intro's account of a build, from the chapters' first-screen records (:func:`build.chapter_records`): the
box that answers the paper's question from chapter 01's gain and interval, whether the book is one
configuration or mixed, each chapter's key figure beside the paper's, and the commands that re-execute them.
"""

from __future__ import annotations

from typing import Any, Sequence

from ..analysis.markup import Markdown, bullets, code, emphasis, paragraphs, quote, strong
from ..backends import answers_without_model
from .chapter_state import Chapter, chapter_notes


def _interval_text(h: dict[str, Any]) -> str:
    return f"{h['value']:+.1f} pp (95% CI [{h['ci_low']:+.1f}, {h['ci_high']:+.1f}])"


def _main_answer(record: dict[str, Any] | None) -> Markdown | str:
    """The box's answer to the paper's question, from chapter 01's first-screen record: the gain with its
    interval, read by :func:`readings.claim_status` (an interval that excludes zero answers the direction)."""
    from .readings.glue import AGAINST, AGREES, NO_EFFECT, claim_status, paper_figure

    if record is None:
        return Markdown("This book has no chapter 01 to answer it: build it with ",
                        code("cpdagthink book --only 01"), ".")
    h = record["headline"]
    if (h.get("answered_by") or record["configuration"]["backend"]) == "reference":
        return ("No claim about LLMs: chapter 01 ran the symbolic reference agent, an upper bound that reads the "
                "exact CPDAG, not a model.")
    if h["value"] is None or h["ci_low"] is None or h["degenerate"]:
        return "Not on this build's evidence. " + h["verdict"]
    status = claim_status(h["value"], h["ci_low"], h["ci_high"], h["paper"])
    figure = f"in chapter 01, {h['figure']} is {_interval_text(h)}"
    width, paper = h["ci_high"] - h["ci_low"], f"{paper_figure(h['paper'])} pp"
    size = ("" if width <= abs(h["paper"]) else f" At {width:.1f} pp wide, the interval cannot tell the paper's size "
            f"of effect ({paper}) from another.")
    if status == AGREES:
        return f"Yes, on this build's evidence: {figure}, an interval wholly above zero.{size}"
    if status == AGAINST:
        return f"No: {figure}, an interval wholly below zero: the baseline does better on this model.{size}"
    if status == NO_EFFECT:
        return f"Not by the paper's margin: {figure}, an interval that contains zero and excludes the paper's {paper}."
    return (f"This build cannot tell: {figure}, an interval that contains zero and is {width:.1f} pp wide, wider "
            f"than the paper's effect ({paper}).")


def _other_chapters(records: dict[str, dict[str, Any]]) -> str:
    """What each chapter after 01 could answer, for its own question (its verdict's first clause and figure)."""
    parts = []
    for name, record in records.items():
        if name.startswith("01"):
            continue
        h = record["headline"]
        value = "" if h["value"] is None or h["ci_low"] is None else f", {_interval_text(h)}"
        status = h["verdict"].split(":")[0]
        parts.append(f"chapter {name.split('_')[0]} ({h['figure']}{value}): {status[:1].lower()}{status[1:]}")
    return ("Each other chapter, for its own question: " + "; ".join(parts) + ".") if parts else ""


def method_box(records: dict[str, dict[str, Any]]) -> Markdown:
    """The intro's "does Structured Thinking beat the baseline on this model?" box: the answer from chapter 01's
    gain and interval (:func:`_main_answer`), then what each other chapter could test for its own question, and
    the causes the chapters' records name (constant answers, cut-offs, malformed graphs), each with the chapters
    that found it."""
    chapters: dict[str, list[str]] = {}
    for name, record in records.items():
        for cause in record["headline"]["causes"]:
            chapters.setdefault(cause, []).append(name.split("_")[0])
    why = ("Their records show: " + "; ".join(f"{cause} (chapter {', '.join(found)})" for cause, found in chapters.items())
           + "." if chapters else "Their records show no constant answers, cut-offs or malformed graphs behind the key figures.")
    question = "Does Structured Thinking beat BaselineEnhanced on this model?"
    return quote(Markdown(strong(question), " ", _main_answer(records.get("01_main_results")), " ",
                          _other_chapters(records), " ", why))


def chapter_title(name: str) -> str:
    """A chapter's file stem as a reader names it: ``01_main_results`` is ``01 main results``."""
    number, _, words = name.partition("_")
    return f"{number} {words.replace('_', ' ')}".strip()


def _seeds_text(records: dict[str, dict[str, Any]]) -> str:
    """The book's seeds, with the chapters that read fewer of them by design (the failure gallery: the first)."""
    seeds = {name: list(r["configuration"]["seeds"]) for name, r in records.items()}
    most = max(seeds.values(), key=len)
    fewer = [f"chapter {name.split('_')[0]} reads {', '.join(map(str, s))}" for name, s in seeds.items() if s != most]
    return f"seeds {', '.join(map(str, most))}" + (f" ({'; '.join(fewer)})" if fewer else "")


def _key_figures(records: dict[str, dict[str, Any]]) -> "pd.DataFrame":
    """The intro's table of key figures: each chapter's, this build's value and 95% CI beside the paper's figure
    as the paper prints it, and its verdict's first clause."""
    import pandas as pd

    def number(value: float, unit: str) -> str:
        return f"{value:+.3g}" if unit == "pp" else f"{value:.3g}"  # gains and drops signed, scores not

    def figure(h: dict[str, Any]) -> str:
        if h["value"] is None:
            return "not computed"
        unit = h.get("unit", "pp")
        ci = "" if h["ci_low"] is None else f" [{number(h['ci_low'], unit)}, {number(h['ci_high'], unit)}]"
        return number(h["value"], unit) + ci

    headlines = pd.DataFrame([{"chapter": chapter_title(name), "key figure": r["headline"]["figure"],
                               "this build (95% CI)": figure(r["headline"]),
                               # the paper's figure as the paper prints it
                               "paper": f"{r['headline']['paper']:{'+' if r['headline'].get('unit', 'pp') == 'pp' else ''}g}",
                               "verdict": r["headline"]["verdict"].split(":")[0]}
                              for name, r in records.items()])
    return headlines


def build_summary(records: dict[str, dict[str, Any]], others: Sequence[Chapter] = (),
                  untried: Sequence[str] = ()) -> Markdown:
    """The intro's account of this build: whether every chapter ran with one configuration (or the book is
    mixed), each chapter's configuration, each chapter's key figure beside the paper's, and ``others``: the
    chapters without a complete execution, whose first screen this version cannot read, or whose newer execution
    did not replace them, each with why, and ``untried``, the chapters never executed
    (:func:`~cpdagthink.book.chapter_state.chapter_notes`)."""
    import pandas as pd

    from .presentation import markdown_table

    left = chapter_notes(others, untried, chapter_title)
    if not records:
        return paragraphs(*left) if left else Markdown(
            "No chapter of this book has been executed yet: run ", code("make book"), ".")
    # A chapter that reads a designed subset of the seeds (the failure gallery reads the primary one) does not
    # mix the book: only another model, backend, data, sample, budget or decoding does.
    shared = ("backend", "model", "data", "sample", "instances", "positives", "budgets", "decoding", "tool choice")
    configs = {name: {k: r["configuration"][k] for k in shared} for name, r in records.items()}
    mixed = len({repr(c) for c in configs.values()}) > 1
    first = next(iter(configs.values()))
    head = (Markdown(strong("This book is mixed:"), " its chapters ran with different models, data, samples, budgets "
                     "or decoding (table below); numbers of two chapters compare only where their rows agree. "
                     "Rebuild every chapter with one command to unmix it.")
            if mixed else
            Markdown(strong("One configuration for every chapter:"),
                     f" {first['model']} (backend {first['backend']}), {first['data']}, {first['sample']}, "
                     f"{_seeds_text(records)}, " + (
                         "no token budgets or decoding (the reference agent computes its answers)."
                         if answers_without_model(first["backend"]) else
                         f"token budgets {first['budgets']} (turn 1 + answer), {first['decoding']}.")))

    headlines = _key_figures(records)
    rows = [{"chapter": chapter_title(name), "model": c["model"], "data": c["data"],
             "sample": f"{r['configuration']['instances']} ({r['configuration']['positives']} positive, "
                       f"{r['configuration']['negatives']} negative)",
             "seeds": ", ".join(map(str, r["configuration"]["seeds"])), "budgets": c["budgets"],
             "decoding": c["decoding"], "backend": c["backend"]}
            for (name, c), r in zip(configs.items(), records.values())]
    commands = bullets(Markdown(chapter_title(name), ": ", code(r["command"])) for name, r in records.items())
    return paragraphs(
        *left, method_box(records), head,
        emphasis("Key figures, this build beside the paper's (pp; the paper's figures are from ",
                 code("data/paper_reported.csv"), ", measured on Qwen3.5-27B and the full splits)."),
        markdown_table(headlines),
        *([emphasis("Each chapter's configuration."), markdown_table(pd.DataFrame(rows))] if mixed else []),
        "Each chapter re-executes with:", commands)
