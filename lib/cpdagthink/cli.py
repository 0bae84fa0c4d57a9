"""The ``cpdagthink`` command line: one subcommand per job, each a thin call into the package."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import defaultdict
from pathlib import Path
from typing import Callable

from .backends.base import BackendError
from .cache import DEFAULT_CACHE
from .data import ENV_CSV, ENV_OUTPUTS, OUTPUTS_ROOT, DataError, Instance, load_split, read_csv


def _instances(args: argparse.Namespace) -> list[Instance]:
    """Rows from ``--data PATH`` (any Corr2Cause-format CSV) or ``--split NAME`` (hub, pinned)."""
    if getattr(args, "data", None):
        return read_csv(args.data)
    return load_split(args.split)


def _refuse_overwriting_input(args: argparse.Namespace) -> None:
    """``--out`` must not be the CSV being read: writing it would destroy the input."""
    inputs = [getattr(args, "data", None) or (os.environ.get(ENV_CSV) if args.split == "test" else None)]
    if any(i and Path(i).resolve() == Path(args.out).resolve() for i in inputs):
        raise ValueError(f"--out {args.out} is the input CSV; writing it would destroy the data: choose another path")


def _write_jsonl(records: list[dict], out: str) -> None:
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as handle:
        for record in records:
            handle.write(json.dumps(record) + "\n")


def cmd_oracle(args: argparse.Namespace) -> int:
    from .metrics import binary_scores
    from .oracle import label_text

    _refuse_overwriting_input(args)
    instances = _instances(args)
    records = []
    for index, instance in enumerate(instances):
        verdict = label_text(instance.text)
        record = {"index": index, "id": instance.id, "gold_label": instance.label, "oracle_label": verdict.label}
        if verdict.problem:
            record["problem"] = verdict.problem
        records.append(record)
    _write_jsonl(records, args.out)

    labelled = [r for r in records if r["oracle_label"] is not None]
    agree = sum(r["oracle_label"] == r["gold_label"] for r in labelled)
    print(f"labelled {len(labelled)}/{len(records)} rows ({len(records) - len(labelled)} unfaithful premises)")
    print(f"agreement with gold: {agree}/{len(labelled)} = {agree / max(len(labelled), 1):.4f}")
    for name, key in (("template", lambda i: i.template), ("num_variables", lambda i: i.num_variables)):
        groups: dict = defaultdict(lambda: [0, 0])
        for record, instance in zip(records, instances):
            if record["oracle_label"] is not None:
                groups[key(instance)][0] += record["oracle_label"] == record["gold_label"]
                groups[key(instance)][1] += 1
        print(f"agreement by {name}: " + ", ".join(f"{k}: {a}/{n}" for k, (a, n) in sorted(groups.items())))
    scores = binary_scores([r["oracle_label"] for r in labelled], [r["gold_label"] for r in labelled])
    print(
        f"oracle YES vs gold: precision {scores.precision:.3f}, recall {scores.recall:.3f}, F1 {scores.f1:.3f} "
        f"(tp {scores.tp}, fp {scores.fp}, fn {scores.fn}, tn {scores.tn})"
    )
    disagreements = [r for r in labelled if r["oracle_label"] != r["gold_label"]]
    print(f"disagreeing rows ({len(disagreements)}):")
    for record in disagreements:
        instance = instances[record["index"]]
        print(f"  index {record['index']}: gold {record['gold_label']} oracle {record['oracle_label']} "
              f"[{instance.template}, n={instance.num_variables}] {instance.hypothesis}")
    print(f"wrote {args.out}")
    return 0


def cmd_reference(args: argparse.Namespace) -> int:
    from .oracle import UnfaithfulFactsError, analyse_premise
    from .schema import CausalAnalysis

    _refuse_overwriting_input(args)
    records = []
    for index, instance in enumerate(_instances(args)):
        try:
            cpdag = analyse_premise(instance.premise).cpdag
        except UnfaithfulFactsError as error:
            records.append({"index": index, "id": instance.id, "problem": str(error)})
            continue
        records.append(
            {
                "index": index,
                "id": instance.id,
                **cpdag.to_json(),
                "causal_analysis": CausalAnalysis.from_cpdag(cpdag).model_dump(mode="json"),
            }
        )
    _write_jsonl(records, args.out)
    print(f"wrote {len(records)} reference CPDAGs to {args.out}")
    return 0


def cmd_generate(args: argparse.Namespace) -> int:
    from .generate import generate, write_rows

    rows = generate(args.family, seed=args.seed, graphs=args.graphs, per_graph=args.per_graph, data=args.data)
    write_rows(rows, args.out)
    positives = sum(r.label for r in rows)
    print(f"wrote {len(rows)} rows ({positives} positive) of family {args.family} (seed {args.seed}) to {args.out}")
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    from .backends import make_backend
    from .conditions import Decoding, get_condition
    from .data import sample
    from .runner import run_condition

    condition = get_condition(args.condition)
    instances = sample(_instances(args), args.limit, args.seed)
    options = {k: v for k, v in (("model", args.model), ("base_url", args.base_url), ("regex_mode", args.regex_mode)) if v}
    backend = make_backend(args.backend, **options)
    decoding = Decoding(
        tool_choice=args.tool_choice,
        seed=args.seed,
        thinking=not args.no_thinking,
        max_tokens_turn1=args.max_tokens_turn1,
        max_tokens_answer=args.max_tokens_answer,
    )
    out = args.out or OUTPUTS_ROOT / "runs" / f"{args.condition}-{args.backend}-seed{args.seed}"
    try:
        result = run_condition(condition, backend, instances, out, decoding=decoding, cache_dir=args.cache,
                               chunk_size=args.chunk_size)
    finally:
        backend.close()
    answered = [r for r in result.records if not r["unparsed"]]
    print(f"{len(result.records)} records in {result.out_dir} ({result.model_calls} model calls, "
          f"{len(result.records) - len(answered)} unparsed answers)")
    return 0


def _variable_count(text: str) -> int | str:
    if text == "all":
        return text
    if text.isdigit() and int(text) >= 2:
        return int(text)
    raise argparse.ArgumentTypeError(f"expected a number of variables (2 or more) or 'all', got {text!r}")


def cmd_book(args: argparse.Namespace) -> int:
    from .book import build

    overrides = {k: v for k, v in (("backend", args.backend), ("model", args.model), ("base_url", args.base_url),
                                   ("limit", args.limit), ("seeds", args.seeds), ("split", args.split),
                                   ("data", args.data), ("max_tokens_turn1", args.max_tokens_turn1),
                                   ("max_tokens_answer", args.max_tokens_answer)) if v not in (None, [], "")}
    if args.sample_variables:
        overrides["sample_variables"] = None if "all" in args.sample_variables else args.sample_variables
    index = build(overrides, only=args.only)
    print(f"book: {index}")
    return 0


def cmd_schema(args: argparse.Namespace) -> int:
    from .schema import CausalAnalysis, analysis_regex

    variables = [v.strip() for v in args.variables.split(",") if v.strip()]
    if args.regex:
        print(analysis_regex(variables))
    else:
        print(json.dumps(CausalAnalysis.json_schema_for(variables), indent=2))
    return 0


def _data_options(parser: argparse.ArgumentParser) -> None:
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--data", help="a Corr2Cause-format CSV")
    source.add_argument("--split", default="test", help="a hub split at the pinned revision (default: test; "
                        "uses $CORR2CAUSE_CSV when set)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="cpdagthink", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    commands: dict[str, tuple[Callable[[argparse.Namespace], int], str]] = {
        "oracle": (cmd_oracle, "label every row with the exact PC/equivalence-class oracle"),
        "reference": (cmd_reference, "write each row's reference CPDAG"),
        "generate": (cmd_generate, "write a generated Corr2Cause-format CSV"),
        "run": (cmd_run, "run a condition over instances with a backend (resumable, cached)"),
        "book": (cmd_book, "execute every notebook with papermill and build the Jupyter Book"),
        "schema": (cmd_schema, "print the CausalAnalysis JSON schema or its decoding regex"),
    }
    parsers = {}
    for name, (handler, help_text) in commands.items():
        parsers[name] = sub.add_parser(name, help=help_text)
        parsers[name].set_defaults(handler=handler)
    for name in ("oracle", "reference"):
        _data_options(parsers[name])
        parsers[name].add_argument("--out", required=True, help="output JSONL")
    gen = parsers["generate"]
    gen.add_argument("--family", required=True, choices=["random7", "alarm7", "asia8", "refactor", "paraphrase"])
    gen.add_argument("--data", help="source CSV for refactor/paraphrase")
    gen.add_argument("--seed", type=int, default=0)
    gen.add_argument("--graphs", type=int, default=10, help="graphs to draw (random7, alarm7)")
    gen.add_argument("--per-graph", type=int, default=20, help="hypotheses per graph, half positive when possible")
    gen.add_argument("--out", required=True)
    run = parsers["run"]
    _data_options(run)
    run.add_argument("--condition", required=True, help="structured, baseline_enhanced, twoturn_prose_pc, ...")
    run.add_argument("--backend", default="local", help="local (default), openai, vllm, reference")
    run.add_argument("--model", help="local: qwen2.5-0.5b (default), smollm2-135m or a .gguf path; "
                     "openai/vllm: the model name")
    run.add_argument("--base-url", nargs="+", help="OpenAI-compatible endpoint(s), served round-robin")
    run.add_argument("--regex-mode", choices=["none", "vllm"], help="openai backend: send the schema regex to a "
                     "vLLM server as structured_outputs")
    run.add_argument("--limit", type=int, default=0, help="seeded label-stratified sample size (0: all rows)")
    run.add_argument("--seed", type=int, default=0)
    run.add_argument("--tool-choice", choices=["auto", "forced"], default="auto")
    run.add_argument("--no-thinking", action="store_true", help="switch the model's thinking off")
    run.add_argument("--max-tokens-turn1", type=int, default=1024)
    run.add_argument("--max-tokens-answer", type=int, default=512)
    run.add_argument("--chunk-size", type=int, default=8, help="instances per batched backend call")
    run.add_argument("--cache", default=str(DEFAULT_CACHE),
                     help=f"content-addressed cache of model calls (default: %(default)s; ${ENV_OUTPUTS} moves it)")
    run.add_argument("--out", help=f"run folder (default: {OUTPUTS_ROOT / 'runs'}/CONDITION-BACKEND-seedS; "
                     f"${ENV_OUTPUTS} moves it)")
    book = parsers["book"]
    book.add_argument("--backend", help="override every notebook's backend (local, openai, vllm, reference)")
    book.add_argument("--model")
    book.add_argument("--base-url", nargs="+")
    book.add_argument("--limit", type=int, help="sample size (0: the whole split)")
    book.add_argument("--seeds", type=int, nargs="+")
    book.add_argument("--split")
    book.add_argument("--data")
    book.add_argument("--max-tokens-turn1", type=int,
                      help="turn-1 budget (notebook default 512, sized for the CPU model; raise it for thinking models)")
    book.add_argument("--max-tokens-answer", type=int, help="answer-turn budget (notebook default 128)")
    book.add_argument("--sample-variables", nargs="+", metavar="N", type=_variable_count,
                      help="draw the sample from rows with these variable counts (notebook default: 5), or 'all'")
    book.add_argument("--only", nargs="+", help="notebook name prefixes, e.g. 01 04")
    schema = parsers["schema"]
    schema.add_argument("--variables", required=True, help="comma-separated names, e.g. A,B,C")
    schema.add_argument("--regex", action="store_true", help="print the constrained-decoding regex instead")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.handler(args)
    except (DataError, ValueError, BackendError) as error:
        print(f"cpdagthink {args.command}: error: {error}", file=sys.stderr)
        return 2
