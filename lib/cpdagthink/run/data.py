"""Corr2Cause instances: one typed record per row, from a local CSV or the dataset hub at a pinned revision.

The local path comes from a parameter, ``CORR2CAUSE_CSV``, or the workspace copy beside the checkout
(:data:`WORKSPACE_CSV`, the Makefile's rule too); otherwise the file is downloaded once into :data:`HUB_CACHE` (``data/hub/`` in a checkout) at
:data:`HUB_REVISION`. The in-distribution test split is checked against its published
fingerprint, so a silently different file never feeds an experiment.
"""

from __future__ import annotations

import collections
import contextlib
import csv
import os
import random
from pathlib import Path
from typing import Iterator, Sequence

from pydantic import BaseModel

from ..causal.instance import Instance
from ..causal.premise import PremiseError, declared_variables, split_input
from ..errors import CpdagthinkError
from ..paths import IN_CHECKOUT, PROJECT_ROOT, USER_CACHE

HUB_REPO = "causalnlp/corr2cause"
HUB_REVISION = "42ba12c769e11ff6427c9f52d7db58e3f9bf3e53"
HUB_FILES = {
    "test": "test.csv",
    "perturbation_by_paraphrasing": "perturbation_by_paraphrasing_test.csv",
    "perturbation_by_refactorization": "perturbation_by_refactorization_test.csv",
}
ENV_CSV = "CORR2CAUSE_CSV"
# The workspace copy of the test split, relative to the project root (the Makefile's SHARED_CSV).
WORKSPACE_CSV = PROJECT_ROOT.parent / "shared" / "corr2cause" / "test.csv"
HUB_CACHE = (PROJECT_ROOT / "data" if IN_CHECKOUT else USER_CACHE) / "hub"


class Fingerprint(BaseModel):
    """What a split must look like: row count, positives, and rows per template (None: not published, so
    not checked; the paraphrase split's size is the paper's, §4.1; its positives and template counts are
    read from the file itself on its first download and stored beside it, see :func:`expected_fingerprint`)."""

    rows: int
    positives: int | None = None
    templates: dict[str, int] | None = None

    def differs(self, got: "Fingerprint") -> bool:
        return any(v is not None and getattr(got, k) != v for k, v in self.model_dump().items())


FINGERPRINTS = {
    "test": Fingerprint(
        rows=1162,
        positives=180,
        templates={
            "parent": 194,
            "child": 194,
            "non-parent ancestor": 195,
            "non-child descendant": 193,
            "has_collider": 193,
            "has_confounder": 193,
        },
    ),
    "perturbation_by_paraphrasing": Fingerprint(rows=2246),
}


class DataError(CpdagthinkError, RuntimeError):
    """The data could not be loaded as asked (missing file, wrong fingerprint, hub unreachable)."""


_COLUMNS = ("input", "label", "num_variables", "template")
# The longest cell a row the oracle labels can hold: a premise of the oracle's bound of variables stating every
# independence (10 variables with no edge: 517,041 characters) and its hypothesis, with room to spare; Python's
# csv module stops at 131,072 unless told otherwise.
FIELD_LIMIT = 1 << 20


def read_csv(path: str | Path, split: str | None = None, source: str | None = None) -> list[Instance]:
    """Read any Corr2Cause-format CSV (columns ``input,label,num_variables,template``, optional ``source``).

    UTF-8 with or without a byte-order mark. Raises :class:`DataError` naming the file and the row for
    anything that is not such a CSV: other encodings, binary content, oversized fields, rows with too few or
    too many fields, a label other than 0/1, or a ``num_variables`` the premise contradicts.
    """
    path = Path(path)
    if path.is_dir():
        raise DataError(f"{path} is a directory, not a CSV file")
    if not path.is_file():
        raise DataError(f"no such file: {path}")
    split = split or path.stem
    instances = []
    if csv.field_size_limit() < FIELD_LIMIT:
        csv.field_size_limit(FIELD_LIMIT)
    with path.open(newline="", encoding="utf-8-sig") as handle:
        reader = csv.DictReader(handle)
        done = 0  # rows read so far; the one being read is row done + 1
        try:
            missing = set(_COLUMNS) - set(reader.fieldnames or ())
            if missing:
                raise DataError(f"{path} lacks the Corr2Cause column(s) {sorted(missing)}")
            for row in reader:
                instances.append(_instance(row, f"{split}-{done:05d}", split, row.get("source") or source or str(path)))
                done += 1
        except UnicodeDecodeError as error:
            raise DataError(f"{path} is not UTF-8 text (row {done + 1}, near line {reader.line_num + 1}); "
                            "save it as UTF-8") from error
        except csv.Error as error:  # oversized field, NUL byte, bad quoting
            raise DataError(f"{path}, row {done + 1} (line {reader.line_num}): not a readable CSV row ({error})") from error
        except ValueError as error:
            raise DataError(f"{path}, row {done + 1} (line {reader.line_num}): {error}") from error
    return instances


def _instance(row: dict, instance_id: str, split: str, source: str) -> Instance:
    """One row as an :class:`Instance`, or ValueError saying what is wrong with it."""
    if None in row or any(row.get(c) is None for c in _COLUMNS):  # DictReader's marks for extra/missing fields
        raise ValueError(f"the row has {'more' if None in row else 'fewer'} fields than the header "
                         "(a comma outside quotes, or a cut line?)")
    label = row["label"].strip()
    if label not in ("0", "1"):
        raise ValueError(f"label must be 0 or 1, got {row['label']!r}")
    count = row["num_variables"].strip()
    if not count.isdigit():
        raise ValueError(f"num_variables must be a whole number, got {row['num_variables']!r}")
    premise, hypothesis = split_input(row["input"])
    try:
        declared = len(declared_variables(premise))
    except PremiseError:
        declared = None  # an unreadable premise is the run's to report on its instance, not the loader's
    if declared is not None and declared != int(count):
        raise ValueError(f"num_variables is {count} but the premise names {declared} variables")
    return Instance(id=instance_id, premise=premise, hypothesis=hypothesis, num_variables=int(count),
                    template=row["template"], label=int(label), split=split, source=source)


def fingerprint(instances: list[Instance]) -> Fingerprint:
    return Fingerprint(
        rows=len(instances),
        positives=sum(i.label for i in instances),
        templates=dict(collections.Counter(i.template for i in instances)),
    )


def stored_fingerprint_path(split: str, cache: Path | None = None) -> Path:
    """Where the fingerprint read from a split's first download is kept (beside the download, per revision)."""
    return (cache or HUB_CACHE) / f"{split}-{HUB_REVISION[:8]}.fingerprint.json"


def expected_fingerprint(split: str, cache: Path | None = None) -> Fingerprint | None:
    """The published fingerprint, its unpublished figures filled in from the one stored at the first
    download (so a later copy must also keep its positives and template counts); None: nothing to check."""
    published = FINGERPRINTS.get(split)
    stored = stored_fingerprint_path(split, cache)
    if published is None or not stored.is_file():
        return published
    recorded = Fingerprint.model_validate_json(stored.read_text(encoding="utf-8"))
    return Fingerprint(**{k: v if v is not None else getattr(recorded, k) for k, v in published.model_dump().items()})


def verify_fingerprint(instances: list[Instance], split: str, cache: Path | None = None) -> None:
    """Raise :class:`DataError` when a split with a published (or stored) fingerprint does not match it."""
    expected = expected_fingerprint(split, cache)
    if expected is None:
        return
    got = fingerprint(instances)
    if expected.differs(got):
        raise DataError(
            f"the '{split}' split does not match its fingerprint at revision {HUB_REVISION[:8]}: "
            f"expected {expected.model_dump()}, got {got.model_dump()}"
        )


def store_fingerprint(instances: list[Instance], split: str, cache: Path | None = None) -> None:
    """Keep a downloaded split's full fingerprint beside it, once it has matched what is published; later
    reads are checked against every figure of it (:func:`expected_fingerprint`)."""
    stored = stored_fingerprint_path(split, cache)
    if split in FINGERPRINTS and not stored.is_file():
        stored.parent.mkdir(parents=True, exist_ok=True)
        stored.write_text(fingerprint(instances).model_dump_json(indent=2), encoding="utf-8")


def local_split_csv(split: str) -> Path:
    """Where a local copy of a hub split is read from: ``$CORR2CAUSE_CSV`` (or the workspace copy) for the test
    split, and for another, its hub file name (``perturbation_by_paraphrasing_test.csv``) in the same folder."""
    test = Path(local_test_csv() or WORKSPACE_CSV)
    return test if split == "test" else test.with_name(HUB_FILES[split])


@contextlib.contextmanager
def _quiet_hub() -> Iterator[None]:
    """The hub client's retry warnings (a line per retry, offline) kept off the console: its failure is said once."""
    import logging

    hub = logging.getLogger("huggingface_hub")
    level = hub.level
    hub.setLevel(logging.ERROR)
    try:
        yield
    finally:
        hub.setLevel(level)


def download_split(split: str, cache: Path | None = None) -> Path:
    """Fetch one split's CSV from the hub at the pinned revision (cached in ``cache``, else :data:`HUB_CACHE`,
    ``data/hub``); when it cannot be fetched, the error says which file to place where instead
    (:func:`local_split_csv`)."""
    if split not in HUB_FILES:
        raise DataError(f"unknown split {split!r}; choose one of {sorted(HUB_FILES)}")
    from huggingface_hub import hf_hub_download

    try:
        with _quiet_hub():
            return Path(hf_hub_download(HUB_REPO, HUB_FILES[split], repo_type="dataset", revision=HUB_REVISION,
                                        cache_dir=str(cache or HUB_CACHE)))
    except Exception as error:  # the hub client raises many types; all mean the same to the user
        place = (f"set {ENV_CSV} to its {HUB_FILES[split]}" if split == "test" else
                 f"place its {HUB_FILES[split]} at {local_split_csv(split)}")
        raise DataError(
            f"could not fetch split {split!r} of {HUB_REPO}@{HUB_REVISION[:8]} ({type(error).__name__}): connect "
            f"to the hub, or {place} (the file of that name at https://huggingface.co/datasets/{HUB_REPO}/tree/"
            f"{HUB_REVISION[:8]})"
        ) from error


def local_test_csv() -> str | None:
    """The local copy of the test split, resolved as the Makefile does: ``$CORR2CAUSE_CSV`` when set, else
    the workspace copy (:data:`WORKSPACE_CSV`) when it exists, else None (the hub). So a command printed on
    a page runs as printed from a fresh shell, offline, as ``make book`` does."""
    if ENV_CSV in os.environ:
        return os.environ[ENV_CSV] or None
    return str(WORKSPACE_CSV) if WORKSPACE_CSV.is_file() else None


def load_split(split: str = "test", csv_path: str | Path | None = None) -> list[Instance]:
    """Load a Corr2Cause split.

    ``csv_path`` (or :func:`local_split_csv` where that file is) names a local copy; otherwise the split is
    downloaded at the pinned revision. The test split's fingerprint is always verified; another split's
    published row count is, and from its first download on, its stored positives and template counts too.
    """
    if csv_path is None and split == "test":
        csv_path = local_test_csv()
    elif csv_path is None and split in HUB_FILES and local_split_csv(split).is_file():
        csv_path = local_split_csv(split)
    if csv_path is not None:
        if not Path(csv_path).is_file():
            raise DataError(f"{csv_path} does not exist: set {ENV_CSV} to the Corr2Cause test CSV or unset it")
        path = Path(csv_path)
    else:
        path = download_split(split)
    hub_source = f"{HUB_REPO}@{HUB_REVISION[:8]}:{HUB_FILES.get(split, path.name)}"
    instances = read_csv(path, split=split, source=None if csv_path is not None else hub_source)
    verify_fingerprint(instances, split)
    if csv_path is None:
        store_fingerprint(instances, split)
    return instances


def sample(instances: list[Instance], limit: int, seed: int = 0, min_positives: int = 1) -> list[Instance]:
    """A seeded sample of ``limit`` rows (0 or more than available: all), returned in the split's order.
    It keeps the split's share of gold positives, but at least ``min_positives`` of them (a small sample
    needs some positives for F1(YES) to mean anything; the pages say when that raised their share)."""
    if limit <= 0 or limit >= len(instances):
        return list(instances)
    if min_positives > limit:
        raise ValueError(f"a sample of {limit} rows cannot hold {min_positives} positives")
    rng = random.Random(seed)
    positives = [i for i, x in enumerate(instances) if x.label == 1]
    negatives = [i for i, x in enumerate(instances) if x.label != 1]
    take_pos = max(min_positives, round(limit * len(positives) / len(instances))) if positives else 0
    chosen = rng.sample(positives, min(take_pos, len(positives))) + rng.sample(negatives, min(limit - take_pos, len(negatives)))
    return [instances[i] for i in sorted(chosen)]


def shares(total: int, parts: int) -> list[int]:
    """``total`` split into ``parts`` whole shares as equal as can be, the first ones one larger where it does
    not divide (5 into 2: 3 and 2)."""
    return [total // parts + (k < total % parts) for k in range(parts)]


def by_variables(instances: list[Instance], counts: Sequence[int]) -> dict[int, list[Instance]]:
    """The rows of each of ``counts`` variables, smallest count first; ValueError naming the counts no row has."""
    strata = {n: [x for x in instances if x.num_variables == n] for n in sorted(set(counts))}
    empty = [n for n, rows in strata.items() if not rows]
    if empty:
        raise ValueError(f"no row has {empty} variables")
    return strata


def _check_shares(strata: list[list[Instance]], sizes: list[int], limit: int) -> None:
    """ValueError naming each count with fewer rows than its share: a smaller share would tilt the sample towards
    the other counts without saying so."""
    short = [f"{len(rows)} with {rows[0].num_variables} variables" for rows, size in zip(strata, sizes) if len(rows) < size]
    if short:
        raise ValueError(f"a sample of {limit} rows takes an equal share of each variable count, but the rows hold "
                         f"only {', '.join(short)}: lower --limit or drop that count")


def sample_by_variables(instances: list[Instance], limit: int, counts: Sequence[int], seed: int = 0,
                        min_positives: int = 1) -> list[Instance]:
    """A seeded sample of ``limit`` rows with the variable counts ``counts``, an equal share per count (the
    smaller counts take the one more row where ``limit`` does not divide), returned in the split's order.

    Each share is :func:`sample` of that count's rows with the same seed, and the sample's ``min_positives``
    are shared out the same way, so the whole sample holds at least ``min_positives`` positives as a sample of
    one count does (and each count has some to score). One count is :func:`sample` of its rows, unchanged.
    Raises ValueError naming the counts no row has."""
    strata = list(by_variables(instances, counts).values())
    if min_positives > limit > 0:  # said of the whole sample: a share's own count would puzzle
        raise ValueError(f"a sample of {limit} rows cannot hold {min_positives} positives")
    if len(strata) == 1:
        return sample(strata[0], limit, seed, min_positives)
    if limit <= 0 or limit >= sum(map(len, strata)):
        return [x for x in instances if x.num_variables in set(counts)]
    sizes = shares(limit, len(strata))
    _check_shares(strata, sizes, limit)
    drawn = [sample(rows, size, seed, least) if size else []
             for rows, size, least in zip(strata, sizes, shares(min_positives, len(strata)))]
    chosen = {id(x) for share in drawn for x in share}
    return [x for x in instances if id(x) in chosen]
