"""The ``cpdagthink`` command line: one subcommand per job, each a thin call into the package.

Its one job needs more than the usual length: eleven subcommands, each a handler and the function declaring its
options, so that a flag and the code reading it sit in one file a reader greps.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable, Iterator

from .causal.instance import Instance
from .errors import CpdagthinkError
from .method.budgets import BUDGET_SETS, DEFAULT_BUDGETS, budget_set
from .paths import CHECKOUT_COMMANDS, ENV_OUTPUTS, NEEDS_CHECKOUT, OUTPUTS_ROOT
from .run.config import RunParameters
from .run.budget import BudgetSpent
from .run.data import load_split, local_test_csv, read_csv
from .run.parameters import json_or_text, option_pair


def _instances(args: argparse.Namespace) -> list[Instance]:
    """Rows from ``--data PATH`` (any Corr2Cause-format CSV) or ``--split NAME`` (hub, pinned)."""
    if getattr(args, "data", None):
        return read_csv(args.data)
    return load_split(args.split)


def _refuse_overwriting_input(args: argparse.Namespace) -> None:
    """``--out`` must be a file that can be written (checked before any work), and not the CSV being read:
    writing it would destroy the input."""
    split = getattr(args, "split", None)  # `generate` reads only --data
    inputs = [getattr(args, "data", None) or (local_test_csv() if split == "test" else None)]
    if any(i and Path(i).resolve() == Path(args.out).resolve() for i in inputs):
        raise ValueError(f"--out {args.out} is the input CSV; writing it would destroy the data: choose another path")
    out = Path(args.out)
    if out.is_dir():
        raise ValueError(f"--out {out} is a folder: name the file to write, e.g. {out / 'out.csv'}")
    folder = next((p for p in (out.parent, *out.parent.parents) if p.exists()), Path("."))  # nearest existing
    if not folder.is_dir() or not os.access(folder, os.W_OK | os.X_OK) or (out.exists() and not os.access(out, os.W_OK)):
        why = f"not a folder: {folder}" if not folder.is_dir() else f"no permission in {folder}"
        raise ValueError(f"--out {out} cannot be written ({why}): choose another path")


@contextlib.contextmanager
def _writing(out: str | Path) -> Iterator[None]:
    """An ``OSError`` of writing ``out`` (a full disk, a folder made read-only meanwhile) as a one-line error."""
    try:
        yield
    except OSError as error:
        raise ValueError(f"--out {out} could not be written: {error.strerror or error}") from None


def _write_jsonl(records: list[dict], out: str) -> None:
    path = Path(out)
    with _writing(path):
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w", encoding="utf-8") as handle:
            for record in records:
                handle.write(json.dumps(record) + "\n")


def _agreement_by(key: Callable[[Instance], Any], records: list[dict[str, Any]], instances: list[Instance]) -> str:
    """The oracle's agreement with gold on the labelled ``records`` per value of ``key`` of their instances, as
    ``value: agreeing/labelled`` by value."""
    groups: dict = defaultdict(lambda: [0, 0])
    for record, instance in zip(records, instances):
        if record["oracle_label"] is not None:
            groups[key(instance)][0] += record["oracle_label"] == record["gold_label"]
            groups[key(instance)][1] += 1
    return ", ".join(f"{k}: {a}/{n}" for k, (a, n) in sorted(groups.items()))


def cmd_oracle(args: argparse.Namespace) -> int:
    from .analysis.metrics import binary_scores
    from .causal.oracle import label_text

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
    print(f"labelled {len(labelled)}/{len(records)} rows "
          f"({len(records) - len(labelled)} premises unfaithful or past the oracle's bound)")
    print(f"agreement with gold: {agree}/{len(labelled)} = {agree / max(len(labelled), 1):.4f}")
    for name, key in (("template", lambda i: i.template), ("num_variables", lambda i: i.num_variables)):
        print(f"agreement by {name}: {_agreement_by(key, records, instances)}")
    if labelled:  # no score of no rows: the file lists each row's problem
        scores = binary_scores([r["oracle_label"] for r in labelled], [r["gold_label"] for r in labelled])
        print(f"oracle YES vs gold: precision {scores.precision:.3f}, recall {scores.recall:.3f}, F1 {scores.f1:.3f} "
              f"(tp {scores.tp}, fp {scores.fp}, fn {scores.fn}, tn {scores.tn})")
    else:
        print("oracle YES vs gold: no score, no row was labelled (each row's problem is in the file)")
    disagreements = [r for r in labelled if r["oracle_label"] != r["gold_label"]]
    print(f"disagreeing rows ({len(disagreements)}):")
    for record in disagreements:
        instance = instances[record["index"]]
        print(f"  index {record['index']}: gold {record['gold_label']} oracle {record['oracle_label']} "
              f"[{instance.template}, n={instance.num_variables}] {instance.hypothesis}")
    print(f"wrote {args.out}")
    return 0


def cmd_reference(args: argparse.Namespace) -> int:
    from .causal.oracle import UnfaithfulFactsError, analyse_premise
    from .method.schema import CausalAnalysis

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
    from .run.generate import generate, write_instances

    _refuse_overwriting_input(args)
    rows = generate(args.family, seed=args.seed, graphs=args.graphs, per_graph=args.per_graph, data=args.data)
    with _writing(args.out):
        write_instances(rows, args.out)
    positives = sum(r.label for r in rows)
    print(f"wrote {len(rows)} rows ({positives} positive) of family {args.family} (seed {args.seed}) to {args.out}")
    return 0


def _parameters(args: argparse.Namespace, **fixed: Any) -> RunParameters:
    """The run parameters named on the command line (flags left unset keep the model's defaults)."""
    given = {k: v for k, v in vars(args).items() if k in RunParameters.model_fields and v not in (None, [], "")}
    return RunParameters(**{**_budgets(args), **given, "backend_options": _backend_options(args), **fixed})


def _budgets(args: argparse.Namespace) -> dict[str, int]:
    """``--budgets NAME``: that set's two budgets (``--max-tokens-turn1``/``--max-tokens-answer`` win)."""
    name = getattr(args, "budgets", None)
    return budget_set(name).as_parameters() if name else {}


def _backend_options(args: argparse.Namespace) -> dict[str, Any]:
    """The backend options of ``-o`` and its shorthand flags, in the order given (a later one wins)."""
    return dict(getattr(args, "backend_options", None) or [])


def cmd_run(args: argparse.Namespace) -> int:
    from .backends import make_backend
    from .run.together import Planned, run_configs

    config = _parameters(args).to_config()  # checks the backend's options too, before the data is read
    instances = config.instances()
    backend = make_backend(config.backend, **config.backend_arguments())
    runs = []
    for seed in config.seeds:
        run = config.for_run(seed=seed, probe=config.probe)
        out = Path(args.out) if args.out and len(config.seeds) == 1 else (
            Path(args.out) / f"seed{seed}" if args.out else run.folder(instances))
        runs.append(Planned(run, instances, out))
    try:
        # the seeds at once where the backend streams requests (one pool of its slots), else one after the other
        results = run_configs(runs, backend)
    finally:
        backend.close()
    return max(_report_run(result) for result in results)


def _report_run(result: Any) -> int:
    """Print what a run made; 1 when it left asked instances without a record or the service refused all."""
    s = result.summary
    print(f"{s.asked_records} of {s.asked} instances in {result.out_dir} ({result.model_calls} model calls, "
          f"{s.unparsed} unparsed, {s.rejected} rejected, {s.cut_off} cut off, {s.problems} not posed"
          + (f"; the folder holds {s.records} records" if s.records != s.asked_records else "") + ")")
    if s.not_answered:
        print(f"cpdagthink run: {result.out_dir}: {s.message}", file=sys.stderr)
    if s.asked_records < s.asked:
        return 1
    refused = [r for r in result.records if r.rejected]
    if refused and len(refused) == sum(r.problem is None for r in result.records):
        first = next(t.rejected for t in refused[0].turns if t.rejected)
        print(f"cpdagthink run: error: the service refused every request of this run ({len(refused)} "
              f"instances, none answered); its first message: {first}", file=sys.stderr)
        return 1
    return 0


def cmd_prompt(args: argparse.Namespace) -> int:
    from .backends import make_backend
    from .method.conditions import get_condition
    from .run.inspection import inspect_request

    if args.run:  # a recorded case: its run's own settings, and the request it sent
        from .run.inspection import recorded_request

        print(json.dumps(recorded_request(args.run, args.row, args.turn).to_json(), indent=2, ensure_ascii=False))
        return 0
    if not args.condition:
        raise ValueError("name the --condition, or the --run FOLDER whose recorded request to print")
    # The same parameters as `run`, so the printed request is the one a run with these flags sends.
    config = _parameters(args, seeds=[args.seed], backend=args.backend or "reference").to_config()
    instances = config.all_instances()
    if not 0 <= args.row < len(instances):
        raise ValueError(f"--row {args.row} is outside the data's rows 0..{len(instances) - 1}")
    backend = make_backend(config.backend, **config.backend_arguments())
    try:
        inspected = inspect_request(get_condition(config.condition), backend, instances[args.row], args.turn,
                                    decoding=config.decoding, probe=config.probe, cache_dir=config.cache_dir)
    finally:
        backend.close()
    print(json.dumps(inspected.to_json(), indent=2, ensure_ascii=False))
    return 0


def _variable_count(text: str) -> int | str:
    if text == "all":
        return text
    if text.isdigit() and int(text) >= 2:
        return int(text)
    raise argparse.ArgumentTypeError(f"expected a number of variables (2 or more) or 'all', got {text!r}")


def _notebook_parameter(text: str) -> tuple[str, Any]:
    """``name=value`` of ``book -p``: the value read as JSON when it is JSON (numbers, lists, null, true),
    else as the text itself (``-p backend=reference``)."""
    name, sep, value = text.partition("=")
    if not sep or not name.rpartition(":")[2].isidentifier():  # `01:seeds`: for the chapters named 01... only
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, e.g. probes='[\"scramble_full\"]', got {text!r}")
    return name, json_or_text(value)


def _book_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """The notebook overrides the flags of ``book`` (and ``plan``) name; ``-p`` parameters apart."""
    overrides = {k: v for k, v in vars(args).items()
                 if k not in ("command", "handler", "only", "sample_variables", "parameter", "group", "execute",
                              "no_build", "render_only", "allow_partial", "backend_options", "budgets",
                              "recipes", "list", "dry_run", "book", "commands", "cost", "price_input", "price_output",
                              "latency", "concurrency", "list_parameters")
                 and v not in (None, [], "")}
    overrides = {**_budgets(args), **overrides}
    options = _backend_options(args)
    if options:
        overrides["backend_options"] = options
    if args.sample_variables:
        overrides["sample_variables"] = None if "all" in args.sample_variables else args.sample_variables
    return overrides


def book_papermill_parameters(argv: list[str]) -> dict[str, dict[str, Any]]:
    """What ``cpdagthink book ARGV`` gives papermill, by chapter it executes (the workflow compares it with
    what an executed notebook was given)."""
    from .book.build import papermill_parameters, selected

    args = build_parser().parse_args(["book", *argv])
    notebooks, overrides = selected(_book_overrides(args), args.only, dict(args.parameter or []))
    return {n.stem: papermill_parameters(n, overrides) for n in notebooks}


def _list_parameters(args: argparse.Namespace) -> int:
    """``--list-parameters`` of ``book`` and ``plan``: each selected chapter's parameters, nothing run."""
    from .book.chapters import describe_parameters

    print(describe_parameters(args.only))
    return 0


def cmd_book(args: argparse.Namespace) -> int:
    from .backends import BACKENDS, backend_class
    from .book.build import build, check_parameters, selected
    from .book.plan import execute_streamed
    from .book.progress import chapter_progress

    if args.list_parameters:
        return _list_parameters(args)
    parameters = dict(args.parameter or [])
    if not args.render_only and args.backend in BACKENDS and backend_class(args.backend).streams_requests:
        check_parameters(*selected(_book_overrides(args), args.only, parameters))  # before anything is paid for
        # the API runs of every chapter at once, on one pool of the service's slots; the chapters then read them
        execute_streamed(_book_overrides(args), args.only, parameters)
    index = build(_book_overrides(args), only=args.only, parameters=parameters,  # every notebook's values are checked first
                  render_only=args.render_only, render_book=not args.no_build, allow_partial=args.allow_partial,
                  watch=chapter_progress)
    print(f"{'executed chapters' if args.no_build else 'book'}: {index}")
    return 0


def cmd_plan(args: argparse.Namespace) -> int:
    from .book.plan import execute, groups, plan_book
    from .scheduler import stop_with_scheduler

    def planned() -> list:
        runs = plan_book(_book_overrides(args), only=args.only, parameters=dict(args.parameter or []))
        if args.group is None:
            return runs
        found = groups(runs)
        if args.group not in found:
            raise ValueError(f"no group {args.group!r} in this plan; its groups are: {', '.join(found) or 'none'}")
        return found[args.group]

    if args.list_parameters:
        return _list_parameters(args)
    runs = planned()
    if args.cost:
        from .book.cost import cost_lines, plan_cost

        print("\n".join(cost_lines(plan_cost(runs, _pricing(args)))))
        return 0
    if not args.execute:
        print(json.dumps([r.model_dump(mode="json") for r in runs], indent=2))
        return 0
    stop_with_scheduler()  # a grid's group job: it ends with the Snakemake that started it
    execute(runs)
    left = [r.folder for r in planned() if not r.complete]
    if left:
        print(f"cpdagthink plan: {len(left)} run(s) still incomplete, first {left[0]}", file=sys.stderr)
    return 1 if left else 0


def cmd_batches(args: argparse.Namespace) -> int:
    """The batches a run in batch mode wrote down in its folder, as last seen (``--refresh``: as the service sees
    them now); ``--cancel`` asks the service to cancel those not ended (a rerun then sends again only what they
    did not answer)."""
    import time

    from .backends.openai_api.batch_state import STATE_FOLDER, BatchState
    from .backends.openai_api.batches import progress_line

    folder = Path(args.run)
    state = BatchState(folder / STATE_FOLDER)
    if not state.records():
        raise ValueError(f"{folder} holds no batches ({STATE_FOLDER}/ is empty or missing): was it run with -o batch=true?")
    cancelled = _ask_the_service(folder, args.refresh, args.cancel) if args.refresh or args.cancel else None
    now = time.time()
    for record in state.records():
        print(progress_line(record, now))
    if cancelled is not None:
        print(f"asked the service to cancel {len(cancelled)} batch(es){': ' + ', '.join(cancelled) if cancelled else ''}"
              "; what they answered is kept, and a rerun sends the rest again")
    return 0


def _ask_the_service(folder: Path, refresh: bool, cancel: bool) -> list[str] | None:
    """Through the backend the run folder's ``config.json`` names: each batch's state now (``refresh``), then
    cancel those not ended (``cancel``: their ids)."""
    from .backends import make_backend
    from .run.config import RunConfig
    from .run.runfolder import CONFIG

    config = RunConfig.model_validate_json((folder / CONFIG).read_text(encoding="utf-8"))
    backend = make_backend(config.backend, **config.backend_arguments())
    try:
        backend.attach_run(folder)
        if refresh:
            backend.batches.refresh()
        return backend.batches.cancel_all() if cancel else None
    finally:
        backend.close()


def cmd_reproduce(args: argparse.Namespace) -> int:
    from .book.recipes import recipe_listing
    from .book.reproduce import one_book_commands, reproduce

    if args.list:
        print(recipe_listing())
        return 0
    if args.commands:  # the one book of these recipes, as a `book` command and a `make grid` line
        print("\n".join(one_book_commands(args.recipes or ["PAPER"], _book_overrides(args), dict(args.parameter or []))))
        return 0
    if not args.recipes:
        raise ValueError("name the recipes to reproduce (e.g. TABLE1, or PAPER for all); --list shows them")
    return reproduce(args.recipes, _book_overrides(args), dict(args.parameter or []), args.only,
                     dry_run=args.dry_run, book=args.book, pricing=_pricing(args))


def _pricing(args: argparse.Namespace) -> Any:
    from .book.cost import Pricing

    return Pricing(args.price_input, args.price_output, args.latency, args.concurrency)


def cmd_render(args: argparse.Namespace) -> int:
    from .book.build import render

    print(f"book: {render(allow_partial=args.allow_partial)}")
    return 0


def cmd_schema(args: argparse.Namespace) -> int:
    from .method.schema import CausalAnalysis, analysis_regex

    variables = [v.strip() for v in args.variables.split(",") if v.strip()]
    if args.regex:
        print(analysis_regex(variables))
    else:
        print(json.dumps(CausalAnalysis.json_schema_for(variables), indent=2))
    return 0


class _BackendOption(argparse.Action):
    """One backend option into ``backend_options`` (``(key, value)`` pairs in the order given): ``-o
    KEY=VALUE``, or a shorthand flag of one key (its value, or ``const`` for a flag that takes none)."""

    def __init__(self, option_strings: list[str], dest: str, key: str | None = None, **kwargs: Any):
        self.key = key
        super().__init__(option_strings, "backend_options", **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        pair = values if self.key is None else (self.key, self.const if self.nargs == 0 else values)
        namespace.backend_options = [*(getattr(namespace, "backend_options", None) or []), pair]


def _option_pair(text: str) -> tuple[str, Any]:
    try:
        return option_pair(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


# Shorthands of `-o` for the options runs set most: (flag, option, argparse settings, help).
_SHORTHANDS: tuple[tuple[str, str, dict[str, Any], str], ...] = (
    ("--base-url", "base_url", {"nargs": "+"}, "openai backend: OpenAI-compatible endpoint(s), served round-robin"),
    ("--api-key-env", "api_key_env", {}, "openai backend: the environment variable whose key the endpoints get "
     "(default: OPENAI_API_KEY, sent to api.openai.com only; another host gets no key unless named)"),
    ("--api", "api", {}, "openai backend: chat or responses (default by profile: responses for GPT-5 and o-series)"),
    ("--reasoning-effort", "reasoning_effort", {}, "reasoning models: the effort to ask for (overrides the profile)"),
    ("--token-param", "token_param", {}, "API: max_tokens or max_completion_tokens (overrides the profile)"),
    ("--regex-mode", "regex_mode", {}, "openai backend: vllm sends the schema regex to a vLLM server"),
    ("--revision", "revision", {}, "vLLM: the model revision to load"),
    ("--timeout", "timeout", {}, "API: seconds one attempt may take in all (a timeout is retried like a 5xx)"),
    ("--retries", "retries", {}, "API: retries of a failed request"),
    ("--jump-forward", "jump_forward", {"nargs": 0, "const": True},
     "local: exact jump-forward decoding with drafts (fast on a build from `make llama-exact`)"),
)


# ``--backend`` of the commands that run a model by default (``prompt``'s default is the reference backend).
_BACKENDS_HELP = "local (default), openai, vllm, reference"


def _model_options(parser: argparse.ArgumentParser, backends: str = _BACKENDS_HELP) -> None:
    """The flags that choose a model and how it decodes, shared by ``run``, ``prompt``, ``book`` and ``plan``."""
    parser.add_argument("--backend", help=backends)
    parser.add_argument("--model", help="local: qwen2.5-0.5b (default), smollm2-135m or a .gguf path; "
                        "openai/vllm: the model name")
    parser.add_argument("-o", "--backend-option", action=_BackendOption, type=_option_pair, metavar="KEY=VALUE",
                        help="one of the backend's own options (its class's keyword arguments, e.g. max_model_len=32768, "
                             "tensor_parallel_size=4, n_threads=8, max_concurrency=16), the value read as JSON where it "
                             "is JSON; repeatable, a later one wins; an option the backend does not take is refused")
    for flag, key, extra, help_text in _SHORTHANDS:
        parser.add_argument(flag, action=_BackendOption, key=key, help=f"{help_text} (-o {key}=...)", **extra)
    parser.add_argument("--tool-choice", choices=["auto", "forced"], help="auto (+ prompt instruction) or forced")
    default = budget_set(DEFAULT_BUDGETS)
    parser.add_argument("--budgets", choices=list(BUDGET_SETS),
                        help=f"a named set of both budgets (default {DEFAULT_BUDGETS}: {default.turn1} and "
                             f"{default.answer}; paper: {BUDGET_SETS['paper'].turn1} and {BUDGET_SETS['paper'].answer})")
    parser.add_argument("--max-tokens-turn1", type=int, help="turn-1 budget (wins over --budgets)")
    parser.add_argument("--max-tokens-answer", type=int, help="answer-turn budget")
    parser.add_argument("--sampling", choices=["auto", "greedy", "recommended"],
                        help="auto (default): the model's recommended sampling for any number of seeds, so seed 0 is "
                             "the primary run (greedy where none is known and one seed is asked); greedy: only when asked")
    parser.add_argument("--temperature", type=float, help="sampling temperature (0: greedy)")
    parser.add_argument("--top-p", type=float)
    parser.add_argument("--top-k", type=int)
    parser.add_argument("--min-p", type=float)


def _data_options(parser: argparse.ArgumentParser) -> None:
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--data", help="a Corr2Cause-format CSV")
    source.add_argument("--split", default="test", help="a hub split at the pinned revision (default: test; "
                        "uses $CORR2CAUSE_CSV when set, else ../shared/corr2cause/test.csv beside the checkout when it exists)")


def _input_options(parser: argparse.ArgumentParser) -> None:
    """``oracle`` and ``reference``: the data and the output file."""
    _data_options(parser)
    parser.add_argument("--out", required=True, help="output JSONL")


def _generate_options(gen: argparse.ArgumentParser) -> None:
    """``generate``: the family, its source and size, the output file."""
    gen.add_argument("--family", required=True, choices=["random7", "alarm7", "asia8", "refactor", "paraphrase"])
    gen.add_argument("--data", help="source CSV for refactor/paraphrase")
    gen.add_argument("--seed", type=int, default=0)
    gen.add_argument("--graphs", type=int, help="graphs to draw (random7, alarm7; default 10)")
    gen.add_argument("--per-graph", type=int, help="hypotheses per graph, half positive when possible (default: the "
                                                   "paper's N where it states one, asia8 40; else 20)")
    gen.add_argument("--out", required=True)


def _run_options(run: argparse.ArgumentParser) -> None:
    """``run``: the data, the condition and probe, the model, the sample, the seeds and where it all goes."""
    _data_options(run)
    run.add_argument("--condition", required=True, help="structured, baseline_enhanced, twoturn_prose_pc, ...")
    run.add_argument("--probe", help="a turn-2 probe applied to a tool condition (scramble_full, drop_premise, ...)")
    _model_options(run)
    run.add_argument("--limit", type=int, help="seeded label-stratified sample size (default 0: all rows)")
    run.add_argument("--sample-seed", type=int, help="seed of the sample (default 0)")
    run.add_argument("--sample-min-positives", type=int,
                     help="at least this many gold positives in the sample (default: the split's share, at least 1)")
    run.add_argument("--seeds", "--seed", type=int, nargs="+", dest="seeds",
                     help="decoding seeds, one run folder each (default 0; several need sampling)")
    run.add_argument("--no-thinking", action="store_false", dest="thinking", default=None,
                     help="switch the model's thinking off")
    run.add_argument("--chunk-size", type=int, help="instances per batched backend call (default: the backend's)")
    run.add_argument("--cache", dest="cache_dir",
                     help=f"content-addressed cache of model calls (default: {OUTPUTS_ROOT / 'cache'}, "
                          f"or ${ENV_OUTPUTS}/cache)")
    run.add_argument("--out", help=f"run folder (default: {OUTPUTS_ROOT / 'runs'}/<a name made from the "
                                   f"configuration>, ${ENV_OUTPUTS} moves it; with several seeds, one subfolder each)")


def _chapter_options(book: argparse.ArgumentParser) -> None:
    """``book`` and ``plan``: the model, the sample, the seeds and the chapters, as the notebooks take them."""
    _model_options(book)
    book.add_argument("--limit", type=int, help="sample size (0: the whole split)")
    book.add_argument("--sample-min-positives", type=int,
                      help="at least this many gold positives in the sample (notebook default 2)")
    book.add_argument("--seeds", type=int, nargs="+", help="decoding seeds (several need sampling)")
    book.add_argument("--split")
    book.add_argument("--data")
    book.add_argument("--sample-variables", nargs="+", metavar="N", type=_variable_count,
                      help="draw the sample from rows with these variable counts, an equal share each (notebook default: "
                           "5 6), or 'all'")
    book.add_argument("--only", nargs="+", help="notebook name prefixes, e.g. 01 04")
    book.add_argument("-p", "--parameter", action="append", type=_notebook_parameter, metavar="NAME=VALUE",
                      help="any notebook parameter (papermill's names), e.g. -p probes='[\"scramble_full\"]'; "
                           "NN:NAME=VALUE gives it to chapter NN only (-p 01:seeds='[0,1,2]'); repeatable; wins over the flags (-p backend_options='{...}' over -o, key by key); "
                           "a name no selected chapter declares is refused")
    book.add_argument("--list-parameters", action="store_true",
                      help="print each selected chapter's parameters (the names -p takes) with their defaults and "
                           "the notebook's comments on them, and stop")


def _allow_partial(parser: argparse.ArgumentParser) -> None:
    """``book`` and ``render``: whether a chapter whose execution did not finish stops the build."""
    parser.add_argument("--allow-partial", action="store_true",
                        help="publish the book even when a chapter has no complete execution (its page "
                             "says so, with no results, and so does the intro); without it that stops the "
                             "build, exit 2")


def _book_options(book: argparse.ArgumentParser) -> None:
    """``book``: the chapters' options, and what it makes of them."""
    _chapter_options(book)
    book.add_argument("--render-only", action="store_true",
                      help="make the pages from complete run folders only: no backend, model or key; a run "
                           "not yet computed fails its chapter, naming the run folder (sets "
                           "CPDAGTHINK_RENDER_ONLY=1)")
    book.add_argument("--no-build", action="store_true", help="execute the chapters into book/ and "
                      "stop (the workflow's chapter jobs; `cpdagthink render` builds the book)")
    _allow_partial(book)


def _plan_options(plan: argparse.ArgumentParser) -> None:
    """``plan``: the chapters' options, the group and whether to compute it."""
    _chapter_options(plan)
    plan.add_argument("--group", help="only this group's runs (one backend and model at one seed)")
    plan.add_argument("--execute", action="store_true", help="compute the runs that are not complete (exit 0 "
                      "when all are complete)")
    plan.add_argument("--cost", action="store_true", help="print what each run and the plan still cost (calls, "
                      "tokens, price, time) instead of the JSON")
    _cost_options(plan)


def _reproduce_options(parser: argparse.ArgumentParser) -> None:
    """``reproduce``: the recipes, the chapters' options (which win over a recipe's), and what to do."""
    parser.add_argument("recipes", nargs="*", metavar="RECIPE", help="TABLE1, FIGURE2, ... or PAPER for all")
    parser.add_argument("--list", action="store_true", help="print the recipe of every reported result")
    parser.add_argument("--dry-run", action="store_true", help="plan and print the runs; compute nothing")
    parser.add_argument("--book", action="store_true", help="then build the one book of the paper's design")
    parser.add_argument("--commands", action="store_true", help="print that one book as a `cpdagthink book` "
                        "command and a `make grid` line (per-chapter seeds and parameters), and stop")
    _chapter_options(parser)
    _cost_options(parser)


def _cost_options(parser: argparse.ArgumentParser) -> None:
    """``plan --cost`` and ``reproduce --dry-run``: the prices and the latency the cost is computed with."""
    parser.add_argument("--price-input", type=float, metavar="USD", help="price of a million prompt tokens (with "
                        "--price-output; default: the model's list price where its profile records one)")
    parser.add_argument("--price-output", type=float, metavar="USD", help="price of a million completion tokens")
    parser.add_argument("--latency", type=float, metavar="S", help="seconds per call (default: earlier runs' mean)")
    parser.add_argument("--concurrency", type=int, metavar="N", help="calls in flight (default: max_concurrency, "
                        "5 for the openai backend, else 1)")


def _schema_options(schema: argparse.ArgumentParser) -> None:
    """``schema``: the variables and the form printed."""
    schema.add_argument("--variables", required=True, help="comma-separated names, e.g. A,B,C")
    schema.add_argument("--regex", action="store_true", help="print the constrained-decoding regex instead")


def _prompt_options(prompt: argparse.ArgumentParser) -> None:
    """``prompt``: the data row, the condition, the turn, the probe and seed, the model and the cache."""
    _data_options(prompt)
    prompt.add_argument("--condition", help="structured, baseline_enhanced, twoturn_prose_pc, ...")
    prompt.add_argument("--run", help="a run folder: print the request its record of --row (0-based, in the run's "
                        "sample order) sent, with that run's settings (the other flags are not read)")
    prompt.add_argument("--row", type=int, required=True, help="0-based row of the data")
    prompt.add_argument("--turn", type=int, choices=[1, 2], default=1,
                        help="2: turn 1 is answered first (from the call cache when a run made it)")
    prompt.add_argument("--probe", help="a turn-2 probe of a tool condition (scramble_full, drop_premise, ...)")
    prompt.add_argument("--seed", type=int, default=0, help="the run's decoding seed (it also seeds the probe)")
    _model_options(prompt, backends="reference (default here: the exact oracle, no model loaded), local, openai, "
                                     "vllm; --model needs the model's backend, e.g. --backend local --model smollm2-135m")
    prompt.add_argument("--no-thinking", action="store_false", dest="thinking", default=None)
    prompt.add_argument("--cache", dest="cache_dir", help="the call cache turn 1 is read from and written to "
                        f"(default: {OUTPUTS_ROOT / 'cache'}, or ${ENV_OUTPUTS}/cache)")


def _batches_options(batches: argparse.ArgumentParser) -> None:
    """``batches``: the run folder, and whether to cancel."""
    batches.add_argument("run", help="a run folder of a run made with -o batch=true")
    batches.add_argument("--refresh", action="store_true", help="ask the service how each batch not ended stands now")
    batches.add_argument("--cancel", action="store_true", help="ask the service to cancel every batch not ended")


DESCRIPTION = ("Run the experiments of 'Externalized CPDAG Summaries Improve LLM Causal Deduction' on "
               "Corr2Cause: label rows with the exact causal oracle, run a prompting condition with a model, "
               "print the request a condition sends, and build the book of results.")


def build_parser() -> argparse.ArgumentParser:
    """The command line: one subcommand per job, each with its handler and its own options; the commands that
    need a checkout say so in their help, and the whole command's help says which they are."""
    parser = argparse.ArgumentParser(prog="cpdagthink", description=DESCRIPTION, epilog=NEEDS_CHECKOUT + ".")
    sub = parser.add_subparsers(dest="command", required=True)
    commands: dict[str, tuple[Callable[[argparse.Namespace], int], Callable[[argparse.ArgumentParser], None], str]] = {
        "oracle": (cmd_oracle, _input_options, "label every row with the exact PC/equivalence-class oracle"),
        "reference": (cmd_reference, _input_options, "write each row's reference CPDAG"),
        "generate": (cmd_generate, _generate_options, "write a generated Corr2Cause-format CSV"),
        "run": (cmd_run, _run_options, "run a condition over instances with a backend (resumable, cached)"),
        "book": (cmd_book, _book_options, "execute every notebook with papermill and build the Jupyter Book"),
        "plan": (cmd_plan, _plan_options, "print every run the book reads (config, run folder, complete, group) as "
                                          "JSON; --group KEY --execute computes one group's runs"),
        "reproduce": (cmd_reproduce, _reproduce_options,
                      "plan and compute the runs of the paper's results (--list: the recipes; --dry-run)"),
        "render": (cmd_render, _allow_partial,
                   "build the Jupyter Book from the notebooks already executed in book/, running nothing"),
        "schema": (cmd_schema, _schema_options, "print the CausalAnalysis JSON schema or its decoding regex"),
        "prompt": (cmd_prompt, _prompt_options,
                   "print one turn's request (messages, tools, tool choice) as JSON, probed or not"),
        "batches": (cmd_batches, _batches_options, "list a batch-mode run's batches; --cancel cancels those running"),
    }
    for name, (handler, options, help_text) in commands.items():
        if name in CHECKOUT_COMMANDS:
            help_text += " (needs a checkout)"
        command = sub.add_parser(name, help=help_text, description=help_text,
                                 epilog=NEEDS_CHECKOUT + "." if name in CHECKOUT_COMMANDS else None)
        command.set_defaults(handler=handler)
        options(command)
    return parser


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where Ctrl-C's KeyboardInterrupt would be, so a terminated run ends the same way."""


def _terminate(signum: int, frame: Any) -> None:
    raise Terminated("terminated by SIGTERM")


def main(argv: list[str] | None = None) -> int:
    from pydantic import ValidationError

    args = build_parser().parse_args(argv)
    previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        return args.handler(args)
    except ValidationError as error:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'value'}: {e['msg']}" for e in error.errors())
        print(f"cpdagthink {args.command}: error: {problems}", file=sys.stderr)
        return 2
    except BudgetSpent as stop:  # not an error: the run stopped, resumably, where its max_cost would be passed
        print(f"cpdagthink {args.command}: {stop}", file=sys.stderr)
        return 3
    except (CpdagthinkError, ValueError) as error:
        print(f"cpdagthink {args.command}: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as stop:
        print(f"cpdagthink {args.command}: {str(stop) or 'interrupted'}; every finished record is kept, run again to "
              "resume", file=sys.stderr)
        return 143 if isinstance(stop, Terminated) else 130
    finally:
        signal.signal(signal.SIGTERM, previous)
