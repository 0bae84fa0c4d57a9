"""Compiled regex constraints of one model, kept so that each regex is compiled once: the most recently used
in memory (each as an :class:`~.jump_forward.IndexWalker`), every one on disk (compiling a 6-variable regex
takes ~15 s), keyed by the model file's sha256 and the regex.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import time
from collections import OrderedDict
from pathlib import Path
from typing import Any, Callable

from .jump_forward import IndexWalker


class RegexIndexes:
    """Indexes of the model whose file hashes to ``model_sha256``, at most ``capacity`` in memory, kept in
    ``directory``; ``compile`` makes one for a regex seen nowhere yet."""

    def __init__(self, directory: Path, model_sha256: str, eos_id: int, *, capacity: int,
                 compile: Callable[[str], Any]):
        self.directory, self.model_sha256, self.eos_id = directory, model_sha256, eos_id
        self.capacity, self.compile = capacity, compile
        self._walkers: OrderedDict[str, IndexWalker] = OrderedDict()

    def walker(self, regex: str) -> tuple[IndexWalker, float]:
        """The compiled index for ``regex`` (memory, then disk, else compiled now) and the compile seconds."""
        walker = self._walkers.get(regex)
        if walker is not None:
            self._walkers.move_to_end(regex)
            return walker, 0.0
        compile_s = 0.0
        index = self._load(regex)
        if index is None:
            start = time.perf_counter()
            index = self.compile(regex)
            compile_s = time.perf_counter() - start
            self._save(regex, index)
        walker = IndexWalker(index, self.eos_id)
        self._walkers[regex] = walker
        while len(self._walkers) > self.capacity:
            self._walkers.popitem(last=False)
        return walker, compile_s

    def _path(self, regex: str) -> Path:
        key = hashlib.sha256(f"{self.model_sha256}\n{regex}".encode()).hexdigest()
        return self.directory / f"{key}.pkl"

    def _load(self, regex: str) -> Any | None:
        """An index saved by an earlier process, or None."""
        path = self._path(regex)
        if not path.is_file():
            return None
        try:
            return pickle.loads(path.read_bytes())
        except Exception:  # noqa: BLE001 - a damaged file is recompiled and overwritten
            return None

    def _save(self, regex: str, index: Any) -> None:
        path = self._path(regex)
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_suffix(f".{os.getpid()}.tmp")
        temporary.write_bytes(pickle.dumps(index))
        temporary.replace(path)
