"""The call cache: completions stored by content key, one JSON file each, written atomically.

An entry is keyed by the backend's identity (what computes: model, revision, build, decoder, profile; never
where a service is reached) and the request (:meth:`~cpdagthink.method.chat.Request.cache_key`). An entry
keyed by the format that named an API's endpoints is read and re-stored under the current key
(:func:`former_identities`), never asked again.

A cache entry that cannot be read back as a completion (empty, truncated, not JSON, wrong shape, wrong
types, nested past the parser's depth limit, binary) is never fatal: it is reported with its path, moved
aside next to where it was (``<key>.json.bad-<time>``) so it can be inspected, and treated as a miss, so the
call is made again and the entry rewritten. A folder that cannot be written (a read-only copy) is replayed:
every call it holds is read from it, and a call it does not hold stops the run before that call is paid for
(:meth:`CallCache.require_writable`); a write that fails (a full disk) leaves no temporary file and stops
with the entry's path.
"""

from __future__ import annotations

import json
import os
import time
import warnings
from pathlib import Path
from typing import Any, Sequence

from pydantic import TypeAdapter, ValidationError

from ..errors import CpdagthinkError
from ..files import write_atomic
from ..method.chat import Completion
from ..paths import OUTPUTS_ROOT

DEFAULT_CACHE = OUTPUTS_ROOT / "cache"

# One check for every way a file can fail to be a completion: pydantic's JSON parser reports bad bytes,
# bad JSON and nesting past its depth limit as validation errors, as it does wrong fields and (strict) types.
_ENTRY = TypeAdapter(Completion)


def former_identities(identity: dict[str, Any], base_urls: Sequence[str | None] | None) -> list[dict[str, Any]]:
    """The backend identities that key the same calls in the cache format that named an API backend's endpoints
    in its identity: ``identity`` with the endpoints (``base_urls``) it is configured with. Entries of that format
    are read under them and kept under the current key (:meth:`CallCache.get`)."""
    return [{**identity, "base_urls": list(base_urls)}] if base_urls else []


class CacheError(CpdagthinkError, OSError):
    """The cache folder cannot be used (not a folder, not writable) or an entry cannot be written."""


class CorruptCacheEntryWarning(UserWarning):
    """A cache entry could not be read; it was moved aside and will be recomputed."""


def _folder(directory: Path) -> Path:
    """``directory``, created when missing, or :class:`CacheError` naming it (a file in its place, or a folder
    that cannot be made): a run then fails before its first model call rather than after it."""
    if directory.exists() and not directory.is_dir():
        raise CacheError(f"the cache folder {directory} is a file, not a folder: choose another cache folder")
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise CacheError(f"cannot create the cache folder {directory}: {error.strerror or error}") from None
    return directory


def _first_problem(error: ValidationError) -> str:
    """The first thing wrong with an entry, on one line: where, and what."""
    first = error.errors(include_url=False)[0]
    where = ".".join(map(str, first["loc"])) or "entry"
    return f"{where}: {first['msg']}"[:160]


class CallCache:
    """A content-addressed store of completions: ``<dir>/<key[:2]>/<key>.json``.

    Opening it creates the folder (:class:`CacheError` when it cannot); a folder it cannot write is read only
    (``writable`` False): its entries are replayed, and :meth:`require_writable` refuses to pay for a call it
    could not keep."""

    def __init__(self, directory: str | Path = DEFAULT_CACHE):
        self.directory = _folder(Path(directory))
        self.writable = os.access(self.directory, os.W_OK | os.X_OK)

    def require_writable(self, missing: int) -> None:
        """Before ``missing`` calls are made: :class:`CacheError` when the folder is read only (the answers
        would be paid for and lost)."""
        if missing and not self.writable:
            raise CacheError(f"the cache folder {self.directory} is not writable and does not hold every call of "
                             f"this run ({missing} of the batch at hand missing): make it writable or choose another "
                             "cache folder (every call it holds is replayed from it)")

    def path(self, key: str) -> Path:
        """Where the entry for ``key`` lives."""
        return self.directory / key[:2] / f"{key}.json"

    def get(self, key: str, former: Sequence[str] = ()) -> Completion | None:
        """The stored completion, or None when absent or unreadable (an unreadable entry is set aside). Where
        ``key`` holds none, the first of its ``former`` keys (:func:`former_identities`) that does is read and
        stored under ``key`` too (when the folder is writable), so an entry is never paid for twice."""
        found = self._read(key)
        if found is None:
            for old in former:
                found = self._read(old)
                if found is not None:
                    if self.writable:
                        self.put(key, found)
                    break
        return found

    def _read(self, key: str) -> Completion | None:
        path = self.path(key)
        if not path.is_file():
            return None
        try:
            return _ENTRY.validate_json(path.read_bytes(), strict=True)
        except ValidationError as error:
            if self.writable:
                self._set_aside(path, error)
            return None

    def put(self, key: str, completion: Completion) -> None:
        """Store ``completion`` under ``key`` through a temporary file and a rename (never half-written; a
        failed write, such as a full disk, leaves no temporary file and raises :class:`CacheError`).

        The entry is handed to the operating system, not waited for on the disk (``sync=False``): a killed run
        loses no answer that arrived, which is what a resume needs, and an entry a power cut left torn is read as
        a miss and set aside (:meth:`get`), costing one call again. A disk flush per answer would cost about a
        fifth of a millisecond of CPU a call, at a hundred calls a second."""
        path = self.path(key)
        try:
            write_atomic(path, json.dumps(completion.to_json()), sync=False)
        except OSError as error:
            raise CacheError(f"cannot write the cache entry {path}: {error.strerror or error}") from None

    @staticmethod
    def _set_aside(path: Path, error: ValidationError) -> Path:
        aside = path.with_name(f"{path.name}.bad-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}")
        try:
            path.replace(aside)
        except FileNotFoundError:  # another run set it aside first
            pass
        warnings.warn(
            f"unreadable cache entry {path} ({_first_problem(error)}); moved to {aside.name} "
            "and recomputed",
            CorruptCacheEntryWarning,
            stacklevel=3,
        )
        return aside
