"""What a run is: a :class:`RunSpec`, the one answer to "is this the same run?".

A spec names one condition (and optional probe) computed by one backend and model with the options that change
what it computes, under one decoding (its seed included), on one sample. Every other question about a run is
derived from it alone: its identity (what resuming and completeness compare, and what ``metadata.json`` holds as
``run``), the digest of its rows, its folder name and its plan group. How the model is reached (base URLs,
timeouts, retries, concurrency, the key's variable) is transport: it is never part of a spec, so the same run
served from another address, or by several replicas in turn, is the same run.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any, Sequence

from pydantic import BaseModel, ConfigDict, NonNegativeInt, PositiveInt

from ..causal.instance import Instance
from ..method.decoding import Decoding

__all__ = ["RunSpec", "Sample", "TRANSPORT_OPTIONS", "bounded", "computed_options", "rows_sha256", "run_identity",
           "short_hash"]

# Options that say how to reach a model, not what it computes: they never separate two runs. (``fail_on_error``:
# when a run gives up on a failing service; batch mode: a batch line's body is the direct call's, answered by the
# same model; a budget and its prices: when a run stops, not what it computes.)
TRANSPORT_OPTIONS = frozenset({"base_url", "timeout", "retries", "max_concurrency", "api_key_env",
                               "fail_on_error", "batch", "batch_poll_s", "run_batch", "run_batch_args",
                               "max_cost", "price_input", "price_output",
                               "share_cores"})  # threads measured to compute alike (backends/local/core_share.py)


def computed_options(options: dict[str, Any]) -> dict[str, Any]:
    """The backend options that change what a model computes: ``options`` without the transport ones (where the
    model is reached, how long to wait, which variable holds the key)."""
    return {k: v for k, v in options.items() if k not in TRANSPORT_OPTIONS}


def short_hash(data: Any, length: int) -> str:
    """The first ``length`` hex digits of the sha256 of ``data``'s sorted-key JSON (a name's short digest)."""
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()[:length]


def bounded(part: str, limit: int = 64) -> str:
    """``part`` of a folder name, kept short enough that the whole name stays under the file system's 255 bytes
    (a long model path or file name would otherwise fail to create the folder): a prefix and a hash of the rest."""
    if len(part.encode()) <= limit:
        return part
    return f"{part[:limit - 9]}-{short_hash(part, 8)}"


def rows_sha256(instances: Sequence[Instance]) -> str:
    """The digest of a run's rows, their ids and contents in order (``metadata.json``'s ``instances_sha256``)."""
    return short_hash([(i.id, i.content_sha256) for i in instances], 64)


def run_identity(condition: dict[str, Any], probe: str | None, backend: str, model: str | None,
                 options: dict[str, Any], decoding: Decoding) -> dict[str, Any]:
    """A run's identity as JSON: the condition as described (its prompt files' hashes included), the probe, the
    backend and model, the computed backend options and the decoding. :meth:`RunSpec.identity` for a spec; a
    ``metadata.json`` written before runs had one is read into it (:mod:`.records`)."""
    return json.loads(json.dumps({"condition": condition, "probe": probe, "backend": backend, "model": model,
                                  "options": computed_options(options), "decoding": decoding.model_dump(mode="json")},
                                 sort_keys=True))


class Sample(BaseModel):
    """The rows a run reads: a split or CSV, and the seeded label-stratified sample drawn from it (stratified by
    variable count too when ``sample_variables`` names several).

    Its fields are spelled as every front door spells them (``--sample-seed``, a notebook's ``sample_seed``, a
    ``config.json``'s ``sample_seed``), so the sample's seed has one name, never to be read as the decoding's
    (:attr:`RunSpec.seed`); :attr:`cpdagthink.run.config.RunConfig.sample` takes these fields by name."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    split: str = "test"
    data: str | None = None  # a Corr2Cause-format CSV instead of a split
    limit: NonNegativeInt = 0  # sample size; 0: every row
    sample_seed: int = 0
    # draw from rows with these variable counts, an equal share each
    sample_variables: tuple[PositiveInt, ...] | None = None
    sample_min_positives: NonNegativeInt = 1

    @property
    def source(self) -> str:
        return self.data or f"split:{self.split}"

    def all_instances(self) -> list[Instance]:
        """Every row of the CSV or split. ``generated:paraphrase`` and ``generated:refactor`` are this project's
        offline stand-ins for the hub's OOD splits, made from the test split and named as such."""
        from .data import load_split, read_csv

        if self.data:
            return read_csv(self.data)
        if self.split.startswith("generated:"):
            from .generate import generated_split

            return read_csv(generated_split(self.split.partition(":")[2]), split=self.split)
        return load_split(self.split)

    def instances(self) -> list[Instance]:
        """The sample (seeded, label-stratified; with ``sample_variables``, drawn from rows with those counts, an
        equal share per count: :func:`~cpdagthink.run.data.sample_by_variables`). ``limit=0`` is the whole split,
        whatever ``sample_variables``."""
        from .data import sample, sample_by_variables

        rows = self.all_instances()
        if not rows:
            raise ValueError(f"{self.source} holds no rows (a header only?): there is nothing to run")
        least = self.sample_min_positives
        if self.limit > 0 and self.sample_variables:
            drawn = sample_by_variables(rows, self.limit, self.sample_variables, self.sample_seed, least)
            rows = [r for r in rows if r.num_variables in self.sample_variables]
        else:
            drawn = sample(rows, self.limit, self.sample_seed, least)
        if self.limit < len(rows) and len(drawn) < self.limit:
            # too few positives (or negatives) for the asked mix: a smaller sample would pass for the asked one
            positives = sum(r.label for r in rows)
            raise ValueError(
                f"a sample of {self.limit} rows with at least {least} gold positives cannot be "
                f"drawn: the {len(rows)} rows it is drawn from hold {positives} positives and "
                f"{len(rows) - positives} negatives; lower --sample-min-positives or --limit")
        return drawn


class RunSpec(BaseModel):
    """One run, declared: condition and probe, backend, model and computed options, decoding (with its seed) and
    sample. Frozen; built by :attr:`cpdagthink.run.config.RunConfig.spec`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    condition: str
    probe: str | None = None
    backend: str
    model: str | None = None
    options: dict[str, Any] = {}  # computed backend options only (:func:`computed_options`)
    decoding: Decoding
    sample: Sample

    @property
    def seed(self) -> int:
        return self.decoding.seed

    def identity(self) -> dict[str, Any]:
        """What makes two runs the same run, as JSON (the sample is not in it: each record names its row and
        content, so a folder resumed on a subset of its rows stays the same run)."""
        from ..method.conditions import describe, get_condition

        return run_identity(describe(get_condition(self.condition)), self.probe, self.backend, self.model,
                            self.options, self.decoding)

    def folder_name(self, instances: Sequence[Instance]) -> str:
        """The run folder's name: what the run is, with short hashes of its rows (ids and content) and of its
        decoding and computed options, so samples, data and budgets never share a folder."""
        settings = self.decoding.model_dump(exclude={"seed", "tool_choice"})
        decoding = short_hash({**settings, **({"backend_options": self.options} if self.options else {})}, 6)
        model = bounded((self.model or "default").replace("/", "_"))
        data = self.sample.data
        source = bounded(Path(data).stem if data else self.sample.split.replace(":", "_"))
        parts = [self.condition, self.backend, model, source, f"n{len(instances)}-{rows_sha256(instances)[:8]}",
                 f"seed{self.seed}", f"dec{decoding}"]
        if self.decoding.tool_choice != "auto":
            parts.append(f"tool-{self.decoding.tool_choice}")
        if self.probe:
            parts.append(f"probe-{self.probe}")
        return "-".join(parts)

    @property
    def group(self) -> str:
        """The job that computes this run: one backend and model (with its computed options) at one seed, so one
        job loads a model once; a short, file-name-safe key such as ``local-default-seed0``."""
        model = bounded(re.sub(r"[^A-Za-z0-9._-]+", "_", self.model or "default"), 48)
        options = [short_hash(self.options, 6)] if self.options else []
        return "-".join([self.backend, model, f"seed{self.seed}", *options])
