"""llama.cpp context states kept on disk, so that every process of one model and build reuses the prefixes
another evaluated: a book's chapters are one kernel each, and its probes' turn 2 begins with the very turn-1
prompt and tool call the main chapter evaluated.

A folder holds the states of one setting (model, build, threads, batch size, context size: what decides the
bytes a prefix leaves in the KV cache), one ``.npz`` file a state, named by the hash of the tokens it is kept
under. Files are written whole and renamed into place, read with ``allow_pickle=False`` (a state is arrays
only), and dropped least recently used first once the folder holds more than its capacity; a file another
process removed, or one that cannot be read, is a miss. Restoring a state gives back the bytes it was saved
with, so a prefix restored from disk computes what it computed when it was kept
(``tests/test_state_store.py``).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import zipfile
from pathlib import Path
from typing import Any, Sequence

import numpy as np

__all__ = ["StateStore", "shared_prefix"]

FORMAT = 1  # of the files: a new layout goes to a new folder
_UNREADABLE = (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile)


def shared_prefix(key: np.ndarray, prompt: np.ndarray) -> int:
    """How many leading tokens the token arrays ``key`` and ``prompt`` have in common."""
    n = min(len(key), len(prompt))
    differ = np.flatnonzero(key[:n] != prompt[:n])
    return int(differ[0]) if len(differ) else n


class StateStore:
    """The states kept on disk under ``root`` for one ``setting`` (a JSON-able list naming what the KV bytes
    depend on), at most ``capacity_bytes`` of them."""

    def __init__(self, root: str | Path, setting: Sequence[Any], capacity_bytes: int):
        key = hashlib.sha256(json.dumps([FORMAT, *setting]).encode()).hexdigest()[:24]
        self.folder = Path(root) / key
        self.capacity = capacity_bytes
        self._keys: dict[str, np.ndarray] = {}  # file name -> the tokens its state is kept under

    def _refresh(self) -> None:
        """Learn the states other processes kept, and forget those they dropped."""
        try:
            names = {e.name for e in os.scandir(self.folder) if e.name.endswith(".npz")}
        except OSError:  # no folder yet (or none can be made: nothing is kept)
            names = set()
        for name in self._keys.keys() - names:
            del self._keys[name]
        for name in names - self._keys.keys():
            try:
                with np.load(self.folder / name, allow_pickle=False) as data:
                    self._keys[name] = data["tokens"]
            except _UNREADABLE:
                pass  # being replaced, or not a state: a miss

    def longest(self, prompt: Sequence[int]) -> tuple[str, int] | None:
        """The state sharing the longest prefix with ``prompt``, and that prefix's length (None: no state)."""
        self._refresh()
        tokens = np.asarray(prompt, dtype=np.int32)
        best = max(((name, shared_prefix(key, tokens)) for name, key in self._keys.items()), key=lambda x: x[1],
                   default=None)
        return best if best is not None and best[1] > 0 else None

    def covered(self, tokens: Sequence[int]) -> bool:
        """A state is kept under ``tokens`` or under tokens they begin."""
        found = self.longest(tokens)
        return found is not None and found[1] == len(tokens)

    def load(self, name: str, state_type: type) -> Any | None:
        """The state in file ``name`` as a ``state_type`` (llama-cpp-python's ``LlamaState``), marked as just
        used; None when it is gone or unreadable."""
        path = self.folder / name
        try:
            with np.load(path, allow_pickle=False) as data:
                n_tokens, seed = (int(x) for x in data["numbers"])
                state = state_type(input_ids=data["input_ids"], scores=data["scores"], n_tokens=n_tokens,
                                   llama_state=data["state"].tobytes(), llama_state_size=int(data["state"].size),
                                   seed=seed)
            os.utime(path)
        except _UNREADABLE:
            self._keys.pop(name, None)
            return None
        return state

    def save(self, tokens: Sequence[int], state: Any) -> None:
        """Keep ``state`` (a ``LlamaState``) under ``tokens``, then drop the least recently used states over
        the capacity."""
        key = np.asarray(tokens, dtype=np.int32)
        name = hashlib.sha256(key.tobytes()).hexdigest()[:32] + ".npz"
        buffer = io.BytesIO()
        np.savez(buffer, tokens=key, input_ids=state.input_ids, scores=state.scores,
                 state=np.frombuffer(state.llama_state, dtype=np.uint8),
                 numbers=np.array([state.n_tokens, state.seed], dtype=np.int64))
        partial = self.folder / f".{name}.{os.getpid()}.partial"
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            partial.write_bytes(buffer.getbuffer())
            os.replace(partial, self.folder / name)
        except OSError:  # a full disk, a folder another process cleared: the state is only not kept
            with contextlib.suppress(OSError):
                partial.unlink()
            return
        self._keys[name] = key
        self._evict(keep=name)

    def _evict(self, keep: str) -> None:
        entries = []
        try:
            for entry in os.scandir(self.folder):
                try:
                    stat = entry.stat()
                except FileNotFoundError:
                    continue
                entries.append((stat.st_mtime, stat.st_size, entry.name))
        except OSError:
            return
        total = sum(size for _, size, _ in entries)
        for _, size, name in sorted(entries):
            if total <= self.capacity:
                break
            if name != keep:
                (self.folder / name).unlink(missing_ok=True)
                self._keys.pop(name, None)
                total -= size
