"""Benchmark: cold and warm times of the main job (`cpdagthink book` with its defaults).

Cold: run records, the call cache, compiled regex indexes and kept prefix states are moved aside first (the
verified model file is kept: that is set-up, not the job). Warm: the same command again, every model call
served from the cache. Targets: cold at most 10 minutes (issue 30), warm at most 2 minutes on this 2-core machine.

After the cold run, where its time went: each chapter's execution (from the executed notebooks) and each kind
of model call (a run's condition and probe, and its turn): calls made, their seconds, prompt tokens (and those
evaluated rather than restored: the ones prefill computed), completion tokens, read from the run records.

    make bench-book
    .venv/bin/python benchmarks/book.py --breakdown [CHECKOUT]   # only the breakdown of a book already built
"""

from __future__ import annotations

import argparse
import collections
import shutil
import subprocess
import sys
import time
from pathlib import Path

import nbformat

from cpdagthink.book.chapter_state import executed_chapters
from cpdagthink.book.build_record import execution, wall_seconds
from cpdagthink.run.runfolder import read_metadata, read_records

ROOT = Path(__file__).resolve().parents[1]
MOVABLE = [ROOT / "outputs" / "runs", ROOT / "outputs" / "cache", ROOT / "outputs" / "generated",
           ROOT / "outputs" / "models" / "regex-indexes", ROOT / "outputs" / "models" / "kept-states"]


def timed(label: str) -> float:
    start = time.perf_counter()
    subprocess.run([str(Path(sys.executable).with_name("cpdagthink")), "book"], check=True, cwd=ROOT)
    seconds = time.perf_counter() - start
    print(f"{label}: {seconds:.0f} s ({seconds / 60:.1f} min)", flush=True)
    return seconds


def chapter_seconds(root: Path) -> dict[str, float]:
    """Each executed chapter's wall time, as its notebook records its execution (chapters without one left out)."""
    walls = {}
    for notebook in executed_chapters(root / "book"):
        seconds = wall_seconds(execution(nbformat.read(notebook, as_version=4)))
        if seconds is not None:
            walls[notebook.stem] = seconds
    return walls


def model_calls(root: Path) -> dict[tuple[str, int], list[float]]:
    """Per kind of model call, ``(run, turn)``: [calls, seconds, prompt tokens, of them evaluated (not restored
    from the context or a kept state), completion tokens] of the calls
    the model made in every run folder under ``root/outputs/runs`` (cache hits and the reference agent's runs
    left out; after a cold run that is this book's alone). ``run`` is the condition, with its probe after a
    slash."""
    kinds: dict[tuple[str, int], list[float]] = collections.defaultdict(lambda: [0, 0.0, 0, 0, 0])
    for folder in sorted((root / "outputs" / "runs").iterdir()):
        metadata = read_metadata(folder)
        if metadata is None or metadata.run.get("backend") == "reference":
            continue
        condition = metadata.run.get("condition", {}).get("name")
        run = "/".join(filter(None, (condition, metadata.run.get("probe"))))
        for record in read_records(folder):
            for turn, call in enumerate(record.turns, start=1):
                if not call.cache_hit:
                    kind = kinds[(run, turn)]
                    evaluated = max(0, call.prompt_tokens - call.meta.get("prompt_tokens_reused", 0))
                    for k, value in enumerate((1, call.latency_s, call.prompt_tokens, evaluated, call.completion_tokens)):
                        kind[k] += value
    return dict(kinds)


def print_breakdown(root: Path) -> None:
    walls = chapter_seconds(root)
    print("chapters (s):", ", ".join(f"{name} {seconds:.0f}" for name, seconds in walls.items()))
    calls = model_calls(root)
    row = "{:<44} {:>4}  {:5d}  {:7.1f}  {:10d}  {:9d}  {:14d}"
    print(f"{'model calls: run':<44} turn  calls  seconds  prompt tok  evaluated  completion tok")
    for (run, turn), counts in sorted(calls.items()):
        print(row.format(run, turn, *counts))
    for turn in sorted({turn for _, turn in calls}):
        totals = [sum(v[k] for (_, t), v in calls.items() if t == turn) for k in range(5)]
        print(row.format(f"all turn {turn} calls", turn, *totals))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--breakdown", nargs="?", const=ROOT, type=Path, metavar="CHECKOUT",
                        help="only print where a built book's time went: its chapters, and the calls of every run "
                             "folder under outputs/runs (default: this checkout)")
    args = parser.parse_args()
    if args.breakdown is not None:
        print_breakdown(args.breakdown.resolve())
        return
    stamp = time.strftime("%Y%m%d-%H%M%S")
    for folder in MOVABLE:
        if folder.exists():
            shutil.move(str(folder), str(folder.with_name(f"{folder.name}.before-bench-{stamp}")))
    cold = timed("cold main job")
    print_breakdown(ROOT)
    warm = timed("warm main job")
    print(f"targets: cold <= 10 min {'met' if cold <= 600 else 'MISSED'}; "
          f"warm <= 2 min {'met' if warm <= 120 else 'MISSED'}")


if __name__ == "__main__":
    main()
