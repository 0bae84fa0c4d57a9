"""Benchmark: the book's grid through the streaming runner against a loopback server with a heavy tail and faults.

The server (``tests/loopback_api.py``, in its own process) answers OpenAI chat completions with the reference
agent's answers, a share ``--wrong`` of them turned around (YES for NO: the failure cases the book shows), after a
lognormal latency (``--median``, ``--sigma``), and fails a share ``--fail`` of the distinct calls once each: 429
with ``Retry-After: 1``, 500, 503, a 200 cut off short, a reset, and a hang past the client's ``--timeout``. The grid is the book's plan for the API backend (``cpdagthink plan --backend openai
... --seeds 0 1 2 --execute``, the reference agent's rows left out: they make no call), computed by the command
line in a process of its own, as a workflow's job computes it.

Phases, each on a fresh server (``throughput`` and ``kill`` on a fresh ``outputs/``):

* ``throughput`` at each ``--in-flight``: the command's wall time, and the serving span (first request in to
  last answer out, the command's start-up and planning left out) against the bound ``calls x mean latency /
  in flight`` (the latencies the server drew for the calls it answered), and against the busy bound: the time
  every attempt held a slot (failed ones too: a hang holds one for the whole timeout) / in flight; the CPU time the
  command took (on two shared cores a client making a hundred calls a second is bound by its CPU); the calls made against the minimum
  (one per distinct request: the cache's entries); the attempts (retries of the failed calls); the command's
  peak memory (its largest resident set); the size of ``outputs/``; every run complete.
* ``kill``: the same grid, killed with SIGKILL once the server has answered half of the minimum, then run
  again: the answers the server gave before the kill that the cache lost (what the rerun pays twice), against
  the calls in flight.
* ``book``, on the grid the last ``throughput`` computed (or computed first, untimed, at ``--kill-in-flight``):
  the reference agent's runs that the grid left out (``cpdagthink plan ... --execute``: they make no call), then
  the book rendered from the complete grid (``cpdagthink book ... --render-only``, every chapter executed and
  the HTML built, in a copy of the checkout so this checkout's ``book/`` and ``_build/`` are left as they are):
  each command's wall time, CPU and peak memory, the chapters' times, and the failure explorer (chapter 06's
  page): its size, its cases, and its load in headless Chromium (to the load event, then to its cards drawn, and
  the page's JavaScript heap). The calls these commands made are counted too: none is expected.

Each result line says the CPU the command took per call the server answered (start-up and planning included:
on a small grid they weigh), and the load average when it ended.

``--limit`` rows per run (0: the whole splits, the paper's 57 runs and 66,234 instances: the 39 API runs' 45,318
instances make 46,946 distinct calls, a probe's turn 1 being its unprobed run's, and the reference agent's 18
runs none; the default is a scaled-down grid). The paper's whole grid at one level of requests in flight, rendered and opened:

    PYTHONPATH=lib .venv/bin/python benchmarks/paper_scale.py --limit 0 --in-flight 64 --phases throughput book

    PYTHONPATH=lib .venv/bin/python benchmarks/paper_scale.py [--limit 24] [--in-flight 5 16 64] [--median 0.3]
        [--sigma 1] [--fail 0.05] [--phases throughput kill book]
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from loopback_api import KINDS, Faults, Latency, Served, reference_answer, serve_in_process  # noqa: E402

from cpdagthink.method.chat import Completion  # noqa: E402

MODEL = "gpt-4.1-mini"
FINAL = re.compile(r"Answer: (YES|NO)\s*$")  # the last line of a reference answer


@dataclass(frozen=True)
class Grid:
    """What the command computes: the book's API runs at ``limit`` rows and ``seeds``, against a server."""

    limit: int
    seeds: tuple[int, ...]
    timeout: float

    def command(self, url: str, in_flight: int, *, reference: bool = False) -> list[str]:
        """The plan executed: its API runs (``reference``: with the reference agent's runs too, as the book has)."""
        return [*self._flags("plan", url, in_flight), "-p", f"include_reference={str(reference).lower()}", "--execute"]

    def book(self, url: str, in_flight: int) -> list[str]:
        """The book of the same grid, every page made from its complete run folders."""
        return [*self._flags("book", url, in_flight), "--render-only"]

    def _flags(self, command: str, url: str, in_flight: int) -> list[str]:
        options = {"base_url": url, "max_concurrency": in_flight, "timeout": self.timeout}
        flags = [f for k, v in options.items() for f in ("-o", f"{k}={v}")]
        return [sys.executable, "-m", "cpdagthink", command, "--backend", "openai", "--model", MODEL, *flags,
                "--limit", str(self.limit), "--seeds", *map(str, self.seeds), "--temperature", "0.7"]


@dataclass
class Ran:
    """One command's run: its wall time, exit status, peak resident memory (MB) and CPU time (user + system)."""

    wall_s: float
    returncode: int
    peak_mb: float
    cpu_s: float


def environment(outputs: Path, root: Path = ROOT) -> dict[str, str]:
    """The commands' environment: this checkout's copy of the test split named (a copy of the checkout elsewhere
    has no workspace beside it), no key, no progress lines."""
    from cpdagthink.run.data import ENV_CSV, local_test_csv

    env = {**os.environ, "CPDAGTHINK_OUTPUTS": str(outputs), "TQDM_DISABLE": "1",
           "PYTHONPATH": os.pathsep.join([str(root / "lib"), os.environ.get("PYTHONPATH", "")])}
    env[ENV_CSV] = local_test_csv() or ""
    env.pop("OPENAI_API_KEY", None)
    return env


def run_command(command: list[str], outputs: Path, kill_when: "callable | None" = None, root: Path = ROOT,
                stdout: Path | None = None) -> Ran:
    """Run ``command`` in the checkout ``root`` to its end (or SIGKILL it once ``kill_when()`` holds); its wall
    time, peak memory and CPU (its children's that it waited for included). ``stdout``: where its output goes."""
    start = time.perf_counter()
    with open(stdout or os.devnull, "wb") as sink, tempfile.TemporaryFile() as errors:
        process = subprocess.Popen(command, env=environment(outputs, root), cwd=root, stdout=sink, stderr=errors)
        if kill_when is not None:
            while process.poll() is None and not kill_when():
                time.sleep(0.2)
            os.kill(process.pid, signal.SIGKILL)
        _, status, usage = os.wait4(process.pid, 0)
        process.returncode = os.waitstatus_to_exitcode(status)
        if process.returncode not in (0, -signal.SIGKILL):
            errors.seek(0)
            sys.stderr.write(errors.read().decode(errors="replace")[-3000:])
    return Ran(time.perf_counter() - start, process.returncode, usage.ru_maxrss / 1024, usage.ru_utime + usage.ru_stime)


def cache_entries(outputs: Path) -> int:
    return sum(1 for _ in (outputs / "cache").rglob("*.json"))


def folder_mb(path: Path) -> float:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 1e6


def runs_finished(outputs: Path) -> tuple[int, int, int]:
    """(runs, runs whose last session finished, records) under ``outputs/runs``."""
    summaries = [json.loads(p.read_text()) for p in (outputs / "runs").rglob("summary.json")]
    return len(summaries), sum(s["status"] == "finished" for s in summaries), sum(s["records"] for s in summaries)


def served(log: list[Served], timeout: float) -> dict[str, float]:
    """What the server saw: answered calls, attempts, faults, the latencies drawn for the answered, the span.
    ``late``: calls answered after the client's timeout (a lognormal tail past it): paid, and asked again."""
    answered = [s for s in log if s.fault is None and s.left]
    return {"calls": len(answered), "attempts": len(log), "faults": sum(s.fault is not None for s in log),
            "late": sum(s.latency_s > timeout for s in answered), "latency_sum": sum(s.latency_s for s in answered),
            "slot_sum": sum(_held(s, timeout) for s in log),
            "span_s": max(s.left for s in log) - min(s.arrived for s in log) if log else 0.0}


def _held(attempt: Served, timeout: float) -> float:
    """How long an attempt held its client's slot: its latency, cut at the timeout (a hang: the timeout; a reset:
    nothing)."""
    if attempt.fault == "reset":
        return 0.0
    return timeout if attempt.fault == "hang" else min(attempt.latency_s, timeout)


def answering(wrong: float):
    """The reference agent's answers, with a seeded share ``wrong`` of the answers that end ``Answer: YES|NO``
    turned around (the conversation's digest decides which), so that the book's failure explorer has cases."""
    def answer(body: dict) -> Completion:
        completion = reference_answer(body)
        digest = hashlib.sha256(json.dumps(body["messages"], sort_keys=True).encode()).digest()
        if int.from_bytes(digest[:8], "big") / 2**64 >= wrong:
            return completion
        text = FINAL.sub(lambda m: "Answer: " + ("NO" if m.group(1) == "YES" else "YES"), completion.text)
        return dataclasses.replace(completion, text=text)

    return answer


def server_options(args: argparse.Namespace) -> dict:
    return {"latency": Latency(args.median, args.sigma, seed=1), "answer": answering(args.wrong),
            "faults": Faults(rate=args.fail, kinds=KINDS, retry_after=1.0, hang_s=args.timeout + 2)}


def throughput(args: argparse.Namespace, grid: Grid, in_flight: int, tmp: Path) -> dict:
    outputs = tmp / f"outputs-{in_flight}"
    with serve_in_process(**server_options(args)) as server:
        ran = run_command(grid.command(server.url, in_flight), outputs)
        seen = served(server.log(), args.timeout)
    runs, finished, records = runs_finished(outputs)
    bound, busy = seen["latency_sum"] / in_flight, seen["slot_sum"] / in_flight
    return {"in_flight": in_flight, "exit": ran.returncode, "runs": runs, "finished": finished, "records": records,
            "wall_s": round(ran.wall_s, 1), "span_s": round(seen["span_s"], 1), "bound_s": round(bound, 1),
            "span_ratio": round(seen["span_s"] / bound, 3), "wall_ratio": round(ran.wall_s / bound, 3),
            "busy_bound_s": round(busy, 1), "span_to_busy": round(seen["span_s"] / busy, 3),
            "calls": seen["calls"], "late": seen["late"], "minimum": cache_entries(outputs), "attempts": seen["attempts"],
            "faults": seen["faults"], "cpu_s": round(ran.cpu_s, 1), "cpu_ms_per_call": round(1000 * ran.cpu_s / max(1, seen["calls"]), 2),
            "peak_mb": round(ran.peak_mb), "outputs_mb": round(folder_mb(outputs), 1), "load": round(os.getloadavg()[0], 1)}


def kill_half_way(args: argparse.Namespace, grid: Grid, in_flight: int, minimum: int, tmp: Path) -> dict:
    outputs = tmp / "outputs-kill"
    with serve_in_process(**server_options(args)) as server:
        killed = run_command(grid.command(server.url, in_flight), outputs,
                             kill_when=lambda: server.answered() >= minimum // 2)
        at_kill = time.monotonic()
        time.sleep(1.0)  # the server ends the requests the dead client left
        before = [s for s in server.log() if s.fault is None and s.left and s.left <= at_kill]
        kept, rerun_from = cache_entries(outputs), time.monotonic()
        rerun = run_command(grid.command(server.url, in_flight), outputs)
        after = [s for s in server.log() if s.fault is None and s.left and s.arrived >= rerun_from]
    runs, finished, records = runs_finished(outputs)
    return {"in_flight": in_flight, "killed_exit": killed.returncode, "answered_before_kill": len(before),
            "cached_at_kill": kept, "repaid": len(before) - kept, "rerun_calls": len(after),
            "rerun_exit": rerun.returncode, "runs": runs, "finished": finished, "records": records,
            "cache_after": cache_entries(outputs), "minimum": minimum}


# The checkout's parts a book is built from: its code is copied (the copy is the checkout the commands see:
# they write book/ and _build/ there), the rest linked; the pages beside the chapters are copied, as the
# build writes beside them.
LINKED = ("notebooks", "prompts", "data", "benchmarks", "_static", "_config.yml", "_toc.yml", "README.md", "pyproject.toml")
EXPLORER_PAGE = Path("_build") / "html" / "book" / "06_failure_gallery.html"
EXPLORER_STATE = """(() => {
  const root = document.querySelector('.cpx');
  return {count: root ? root.querySelector('.cpx-count').textContent : null,
          cards: document.querySelectorAll('.cpx-live .cpx-card').length,
          heap_mb: performance.memory ? performance.memory.usedJSHeapSize / 1e6 : null};
})()"""


def checkout_copy(root: Path) -> Path:
    """A checkout at ``root`` that builds the book from this one's code, notebooks and pages."""
    root.mkdir(parents=True)
    shutil.copytree(ROOT / "lib", root / "lib", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    for name in LINKED:
        (root / name).symlink_to(ROOT / name)
    (root / "book").mkdir()
    for page in (ROOT / "book").glob("*.md"):
        shutil.copyfile(page, root / "book" / page.name)
    shutil.copytree(ROOT / "book" / "using", root / "book" / "using")
    return root


def explorer_load(page: Path) -> dict:
    """The failure explorer's page: its size, and its load in headless Chromium (to the load event, then to
    its first cards drawn), its cases and its JavaScript heap."""
    from cpdagthink.book.browser import Browser

    if not page.is_file():
        return {"explorer": f"no page at {page}"}
    with Browser(width=1280, height=900, timeout=600) as browser:
        start = time.perf_counter()
        browser.open(page)
        loaded = time.perf_counter() - start
        state = browser.evaluate(EXPLORER_STATE)
        drawn = time.perf_counter() - start
    return {"explorer_mb": round(page.stat().st_size / 1e6, 2), "explorer_load_s": round(loaded, 2),
            "explorer_drawn_s": round(drawn, 2), "explorer_cases": state["count"], "explorer_cards": state["cards"],
            "explorer_heap_mb": None if state["heap_mb"] is None else round(state["heap_mb"], 1)}


def chapter_times(output: Path) -> dict:
    """The chapters' times the book command printed (``notebook times (s): {...}``)."""
    for line in output.read_text(errors="replace").splitlines():
        if line.startswith("notebook times (s): "):
            return json.loads(line.removeprefix("notebook times (s): "))
    return {}


def book(grid: Grid, in_flight: int, outputs: Path, tmp: Path) -> dict:
    """The reference agent's runs the grid left out, then the book rendered from the complete grid and its
    explorer opened (module docstring)."""
    checkout = checkout_copy(tmp / "checkout")
    with serve_in_process(latency=Latency()) as server:  # the API runs are complete: no call is expected
        reference = run_command(grid.command(server.url, in_flight, reference=True), outputs)
        printed = tmp / "book-output.txt"
        built = run_command(grid.book(server.url, in_flight), outputs, root=checkout, stdout=printed)
        calls = len(server.log())
    runs, finished, records = runs_finished(outputs)
    return {"in_flight": in_flight, "runs": runs, "finished": finished, "records": records, "calls": calls,
            "reference_exit": reference.returncode, "reference_wall_s": round(reference.wall_s, 1),
            "reference_cpu_s": round(reference.cpu_s, 1), "reference_peak_mb": round(reference.peak_mb),
            "book_exit": built.returncode, "book_wall_s": round(built.wall_s, 1), "book_cpu_s": round(built.cpu_s, 1),
            "book_peak_mb": round(built.peak_mb), "chapters_s": chapter_times(printed),
            "outputs_mb": round(folder_mb(outputs), 1), **explorer_load(checkout / EXPLORER_PAGE),
            "load": round(os.getloadavg()[0], 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=24, help="rows per run (0: the paper's whole grid)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--in-flight", type=int, nargs="+", default=[5, 16, 64])
    parser.add_argument("--median", type=float, default=0.3, help="median latency (s)")
    parser.add_argument("--sigma", type=float, default=1.0, help="lognormal sigma of the latency (0: constant)")
    parser.add_argument("--fail", type=float, default=0.05, help="share of distinct calls failing once")
    parser.add_argument("--wrong", type=float, default=0.25, help="share of answers turned around (failure cases)")
    parser.add_argument("--timeout", type=float, default=5.0, help="seconds one attempt may take (a hang: +2)")
    parser.add_argument("--phases", nargs="+", default=["throughput", "kill"], choices=["throughput", "kill", "book"])
    parser.add_argument("--kill-in-flight", type=int, default=16, help="requests in flight of the kill phase, and of "
                        "the book phase's grid when no throughput phase computed one")
    args = parser.parse_args()
    grid = Grid(args.limit, tuple(args.seeds), args.timeout)
    print(f"grid: the book's API runs, --limit {args.limit}, seeds {args.seeds}; latency lognormal median "
          f"{args.median} s sigma {args.sigma} (mean {Latency(args.median, args.sigma).mean:.3f} s); {args.fail:.0%} "
          f"of calls failing once ({', '.join(KINDS)}); {args.wrong:.0%} of answers wrong; timeout {args.timeout} s; load average "
          f"{os.getloadavg()[0]:.1f}", flush=True)
    with tempfile.TemporaryDirectory() as folder:
        tmp, minimum, computed = Path(folder), None, None
        if "throughput" in args.phases:
            for in_flight in args.in_flight:
                found = throughput(args, grid, in_flight, tmp)
                minimum, computed = found["minimum"], in_flight
                print(json.dumps(found), flush=True)
        if "kill" in args.phases:
            if minimum is None:
                minimum, computed = throughput(args, grid, args.kill_in_flight, tmp)["minimum"], args.kill_in_flight
            print(json.dumps(kill_half_way(args, grid, args.kill_in_flight, minimum, tmp)), flush=True)
        if "book" in args.phases:
            if computed is None:
                computed = throughput(args, grid, args.kill_in_flight, tmp)["in_flight"]
            print(json.dumps(book(grid, computed, tmp / f"outputs-{computed}", tmp)), flush=True)
    print(f"load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
