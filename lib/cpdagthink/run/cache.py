"""The call cache: completions stored by content key, one JSON file each, written atomically.

A cache entry that cannot be read back as a completion (empty, truncated, not JSON, wrong shape, wrong
types, nested past the parser's depth limit, binary) is never fatal: it is reported with its path, moved
aside next to where it was (``<key>.json.bad-<time>``) so it can be inspected, and treated as a miss, so the
call is made again and the entry rewritten. The folder is checked writable when the cache is opened, before
any model call is paid for; a write that fails (a full disk) leaves no temporary file and stops with the
entry's path.
"""

from __future__ import annotations

import json
import os
import time
import warnings
from pathlib import Path

from pydantic import TypeAdapter, ValidationError

from ..errors import CpdagthinkError
from ..files import write_atomic
from ..method.chat import Completion
from ..paths import OUTPUTS_ROOT

DEFAULT_CACHE = OUTPUTS_ROOT / "cache"

# One check for every way a file can fail to be a completion: pydantic's JSON parser reports bad bytes,
# bad JSON and nesting past its depth limit as validation errors, as it does wrong fields and (strict) types.
_ENTRY = TypeAdapter(Completion)


class CacheError(CpdagthinkError, OSError):
    """The cache folder cannot be used (not a folder, not writable) or an entry cannot be written."""


class CorruptCacheEntryWarning(UserWarning):
    """A cache entry could not be read; it was moved aside and will be recomputed."""


def _writable_folder(directory: Path) -> Path:
    """``directory``, created when missing and checked writable, or :class:`CacheError` naming it: a run then
    fails before its first model call rather than after it, with the call paid for and lost."""
    if directory.exists() and not directory.is_dir():
        raise CacheError(f"the cache folder {directory} is a file, not a folder: choose another cache folder")
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise CacheError(f"cannot create the cache folder {directory}: {error.strerror or error}") from None
    if not os.access(directory, os.W_OK | os.X_OK):
        raise CacheError(f"the cache folder {directory} is not writable")
    return directory


def _first_problem(error: ValidationError) -> str:
    """The first thing wrong with an entry, on one line: where, and what."""
    first = error.errors(include_url=False)[0]
    where = ".".join(map(str, first["loc"])) or "entry"
    return f"{where}: {first['msg']}"[:160]


class CallCache:
    """A content-addressed store of completions: ``<dir>/<key[:2]>/<key>.json``.

    Opening it creates the folder and checks it is writable (:class:`CacheError` otherwise)."""

    def __init__(self, directory: str | Path = DEFAULT_CACHE):
        self.directory = _writable_folder(Path(directory))

    def path(self, key: str) -> Path:
        """Where the entry for ``key`` lives."""
        return self.directory / key[:2] / f"{key}.json"

    def get(self, key: str) -> Completion | None:
        """The stored completion, or None when absent or unreadable (an unreadable entry is set aside)."""
        path = self.path(key)
        if not path.is_file():
            return None
        try:
            return _ENTRY.validate_json(path.read_bytes(), strict=True)
        except ValidationError as error:
            self._set_aside(path, error)
            return None

    def put(self, key: str, completion: Completion) -> None:
        """Store ``completion`` under ``key`` through a temporary file and a rename (never half-written; a
        failed write, such as a full disk, leaves no temporary file and raises :class:`CacheError`)."""
        path = self.path(key)
        try:
            write_atomic(path, json.dumps(completion.to_json()))
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
