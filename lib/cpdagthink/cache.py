"""The call cache: completions stored by content key, one JSON file each, written atomically.

A cache entry that cannot be read back as a completion (empty, truncated, not JSON, wrong shape, binary) is
never fatal: it is reported with its path, moved aside next to where it was (``<key>.json.bad-<time>``) so it
can be inspected, and treated as a miss, so the call is made again and the entry rewritten.
"""

from __future__ import annotations

import json
import os
import time
import warnings
from pathlib import Path

from .backends.base import Completion
from .data import OUTPUTS_ROOT

DEFAULT_CACHE = OUTPUTS_ROOT / "cache"


class CorruptCacheEntryWarning(UserWarning):
    """A cache entry could not be read; it was moved aside and will be recomputed."""


class CallCache:
    """A content-addressed store of completions: ``<dir>/<key[:2]>/<key>.json``."""

    def __init__(self, directory: str | Path = DEFAULT_CACHE):
        self.directory = Path(directory)

    def path(self, key: str) -> Path:
        """Where the entry for ``key`` lives."""
        return self.directory / key[:2] / f"{key}.json"

    def get(self, key: str) -> Completion | None:
        """The stored completion, or None when absent or unreadable (an unreadable entry is set aside)."""
        path = self.path(key)
        if not path.is_file():
            return None
        try:
            completion = Completion.from_json(json.loads(path.read_text(encoding="utf-8")))
            if not isinstance(completion.text, str) or not isinstance(completion.meta, dict):
                raise TypeError("text is not a string or meta not an object")
            return completion
        # Every way a file can fail to be a completion: bad bytes, bad JSON, not an object, wrong fields.
        except (UnicodeDecodeError, json.JSONDecodeError, TypeError, AttributeError, ValueError) as error:
            self._set_aside(path, error)
            return None

    def put(self, key: str, completion: Completion) -> None:
        """Store ``completion`` under ``key`` through a temporary file and a rename (never half-written)."""
        path = self.path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_suffix(f".{os.getpid()}.tmp")
        temporary.write_text(json.dumps(completion.to_json()), encoding="utf-8")
        temporary.replace(path)

    @staticmethod
    def _set_aside(path: Path, error: Exception) -> Path:
        aside = path.with_name(f"{path.name}.bad-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}")
        try:
            path.replace(aside)
        except FileNotFoundError:  # another run set it aside first
            pass
        warnings.warn(
            f"unreadable cache entry {path} ({type(error).__name__}: {str(error)[:120]}); moved to {aside.name} "
            "and recomputed",
            CorruptCacheEntryWarning,
            stacklevel=3,
        )
        return aside
