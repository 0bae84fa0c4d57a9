"""The whole book built from hostile names and texts: in Chromium, on the site and on the printed single page,
nothing runs and every name reads literally.

A CSV's file name (its rows' ids are ``<stem>-NNNNN``), a model name (the openai backend takes any), an OOD
split's file name, a CSV column (``template``), a premise and a hypothesis of the sampled rows (posed to the model,
counted on the pages as rows the oracle cannot read) and the model's output carry live markup; each payload sets
``window.pwned`` when it runs. Every chapter is built (a served model of four rows, a few seconds a chapter).
"""

from __future__ import annotations

import csv
import shutil

import pytest

from failure_cases import hostile_server

# A file name must be legal on Linux: no "/" (so no closing tag), which an event handler does without.
NAME = '<img src=x onerror="window.pwned=\'{}\'">'
MODEL = "o4-mini" + NAME.format("model")  # an always-reasoning family: chapter 03 names it where it refuses no_thinking
COLUMN = '<script>window.pwned="column"</script>'
PREMISE = ' <img src=x onerror="window.pwned=\'premise\'">.'  # appended: the row is unparsable, and still posed
HYPOTHESIS = ' <svg onload="window.pwned=\'hypothesis\'">'
OUTPUT = '<script>window.pwned = "script"</script>'  # failure_cases.HOSTILE, appended to each text the model writes
PWNED = "new Promise(r => setTimeout(() => r(window.pwned === undefined ? null : String(window.pwned)), 300))"
LIVE = "document.querySelectorAll('img[src=\"x\"], iframe, [onerror]').length"


def hostile_csv(source, path, premise_row: int = -1, hypothesis_row: int = -1) -> None:
    """The rows of ``source`` with :data:`COLUMN` before each template, :data:`PREMISE` after the premise of
    row ``premise_row`` and :data:`HYPOTHESIS` after the hypothesis of ``hypothesis_row``, written to ``path``."""
    with open(source, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    rows[premise_row]["input"] = rows[premise_row]["input"].replace("\nHypothesis:", PREMISE + "\nHypothesis:")
    rows[hypothesis_row]["input"] += HYPOTHESIS
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows({**row, "template": COLUMN + row["template"]} for row in rows)


def sampled_rows(csv_path, limit: int) -> list[int]:
    """The row numbers of the sample the book draws from ``csv_path`` at ``limit`` (its notebooks' defaults):
    the sample depends on labels and variable counts only, so a row's text can be changed and stay drawn."""
    from cpdagthink.book.chapters import notebook_defaults
    from cpdagthink.paths import PROJECT_ROOT
    from cpdagthink.run.config import RunConfig

    defaults = notebook_defaults(PROJECT_ROOT / "notebooks" / "06_failure_gallery.ipynb")
    drawn = RunConfig(data=str(csv_path), limit=limit, sample_variables=tuple(defaults["sample_variables"]),
                      sample_min_positives=defaults["sample_min_positives"]).instances()
    return [int(i.id.rpartition("-")[2]) for i in drawn]


@pytest.mark.slow
def test_every_chapter_built_from_hostile_names_and_texts_runs_nothing(test_csv, browser, tmp_path, monkeypatch):
    from cpdagthink.book.build import build
    from cpdagthink.paths import PROJECT_ROOT

    data, ood = tmp_path / "data" / (NAME.format("file") + ".csv"), tmp_path / "data" / (NAME.format("split") + ".csv")
    data.parent.mkdir()
    drawn = sampled_rows(test_csv, 4)
    hostile_csv(test_csv, data, premise_row=drawn[0], hypothesis_row=drawn[1])
    hostile_csv(test_csv, ood)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    for name in ("_config.yml", "_toc.yml", "_static", "data/paper_reported.csv", "book/intro.md",
                 "book/paper_figures.md", "book/using", "benchmarks/README.md", "benchmarks/notes"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (shutil.copytree if (PROJECT_ROOT / name).is_dir() else shutil.copy)(PROJECT_ROOT / name, tmp_path / name)
    with hostile_server() as server:
        build({"backend": "openai", "model": MODEL, "backend_options": {"base_url": [server.url], "reasoning_effort": "medium"},
               "max_tokens_turn1": 8192, "max_tokens_answer": 4096, "limit": 4, "data": str(data),
               "ood_split": str(ood), "out_root": str(tmp_path / "runs"), "cache_dir": str(tmp_path / "cache")},
              root=tmp_path)
    file, model, split = NAME.format("file"), NAME.format("model"), NAME.format("split")
    pages = tmp_path / "_build" / "html" / "book"
    expected = {  # what each page must show as text: the names every banner states, and each chapter's own
        "intro": [model, file],
        "01_main_results": [model, file],
        "02_complexity": [model, file, f"On {ood}"],  # the OOD split, named as code
        "03_ablations": [model, f"{MODEL} (o-series) reasons on every request"],  # the thinking note
        "04_probes": [model, f"{file}-"],  # the probe example's row id
        "05_audit": [model, f"of the {data} split"],
        # the rows of the hostile premise and hypothesis cannot be read, so the pages count them as left out
        "06_failure_gallery": [model, file, OUTPUT, COLUMN, "Left out: 2 rows of this sample have no oracle label"],
    }
    shown = {(pages / f"{name}.html", ""): texts for name, texts in expected.items()}
    shown[(tmp_path / "_build" / "singlehtml" / "index.html", "print")] = sorted({t for ts in expected.values() for t in ts})
    for (page, media), texts in shown.items():
        browser.open(page)
        browser.send("Emulation.setEmulatedMedia", {"media": media})
        try:
            assert browser.evaluate(PWNED) is None, page
            assert browser.evaluate(LIVE) == 0, page
            text = browser.evaluate("document.body.innerText")
            missing = [t for t in texts if t not in text]
            assert not missing, (page, missing)
        finally:
            browser.send("Emulation.setEmulatedMedia", {"media": ""})
    pdf = (tmp_path / "_build" / "book.pdf").read_bytes()
    assert pdf[:5] == b"%PDF-" and pdf.count(b"/Subtype /Image") >= 4  # printed with its figures
