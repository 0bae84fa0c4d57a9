"""Check: a built book's local-model calls, each computed again in a fresh context, give its records' outputs.

The book's runs compute each call after whatever the calls before it left in the KV cache and the kept states;
``backends/local/kept_states.py`` makes that history irrelevant. This computes the first turn of each row of the
runs named (of the default book's local model) again, rows in reverse order, each from an empty context, and
compares the output with the record's, after checking that the request is the record's own (its hash).

    .venv/bin/python benchmarks/fresh_calls.py [--conditions structured baseline_enhanced ...] [--runs outputs/runs]
"""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path

from cpdagthink.backends.local import LocalBackend
from cpdagthink.method.conditions import CONDITIONS, first_request
from cpdagthink.method.decoding import Decoding
from cpdagthink.run.data import load_split
from cpdagthink.run.records import json_sha256

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=Path, default=ROOT / "outputs" / "runs")
    parser.add_argument("--conditions", nargs="+",
                        default=["structured", "singleturn_structured", "minimal_instruction", "baseline_enhanced"])
    args = parser.parse_args()
    rows = {i.id: i for i in load_split("test")}
    backend = LocalBackend()
    same = total = 0
    for condition in args.conditions:
        folders = [f for f in sorted(args.runs.glob(f"{condition}-local-*")) if "-probe-" not in f.name]
        if not folders:
            raise SystemExit(f"no run of {condition} on the local model under {args.runs}")
        for folder in folders:
            decoding = Decoding(**json.loads((folder / "metadata.json").read_text())["run"]["decoding"])
            records = [json.loads(line) for line in (folder / "records.jsonl").read_text().splitlines()]
            for record in reversed(records):
                request = first_request(CONDITIONS[condition], rows[record["id"]], decoding)
                if json_sha256(request.to_json()) != record["turns"][0]["request_sha256"]:
                    raise SystemExit(f"{folder.name} {record['id']}: not the request its record answers")
                backend.reset_context()
                # the runner asks a model without a thinking mode with thinking off (one request, one cache entry)
                output = backend.complete(replace(request, thinking=backend.thinking_supported and request.thinking))
                equal = output.raw == record["turns"][0]["raw"]
                same, total = same + equal, total + 1
                print(f"{folder.name} {record['id']}: {'same' if equal else 'DIFFERENT'} "
                      f"({output.completion_tokens} tokens)", flush=True)
    print(f"{same} of {total} first turns computed in a fresh context equal the book's records")


if __name__ == "__main__":
    main()
