"""Benchmark: cold and warm times of the main job (`cpdagthink book` with its defaults).

Cold: run records, the call cache and compiled regex indexes are moved aside first (the verified model
file is kept: that is set-up, not the job). Warm: the same command again, every model call served from the cache.
Targets: cold at most 20 minutes, warm at most 2 minutes on this 2-core machine.

    make bench-book
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MOVABLE = [ROOT / "outputs" / "runs", ROOT / "outputs" / "cache", ROOT / "outputs" / "generated",
           ROOT / "outputs" / "models" / "regex-indexes"]


def timed(label: str) -> float:
    start = time.perf_counter()
    subprocess.run([str(Path(sys.executable).with_name("cpdagthink")), "book"], check=True, cwd=ROOT)
    seconds = time.perf_counter() - start
    print(f"{label}: {seconds:.0f} s ({seconds / 60:.1f} min)", flush=True)
    return seconds


def main() -> None:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    for folder in MOVABLE:
        if folder.exists():
            shutil.move(str(folder), str(folder.with_name(f"{folder.name}.before-bench-{stamp}")))
    cold = timed("cold main job")
    warm = timed("warm main job")
    print(f"targets: cold <= 20 min {'met' if cold <= 1200 else 'MISSED'}; warm <= 2 min {'met' if warm <= 120 else 'MISSED'}")


if __name__ == "__main__":
    main()
