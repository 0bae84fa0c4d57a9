"""The states kept on disk: found by their longest shared prefix, shared between processes, read back as they were
written, dropped least recently used first, and a damaged file is a miss (no model: states of plain arrays)."""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np
import pytest

from cpdagthink.backends.local.state_store import StateStore, shared_prefix


@dataclass
class State:
    """The fields of llama-cpp-python's ``LlamaState``."""

    input_ids: np.ndarray
    scores: np.ndarray
    n_tokens: int
    llama_state: bytes
    llama_state_size: int
    seed: int


def state(n_tokens: int, kv_bytes: int = 1000) -> State:
    rng = np.random.default_rng(n_tokens)
    kv = rng.integers(0, 256, kv_bytes, dtype=np.uint8).tobytes()
    return State(input_ids=np.arange(64, dtype=np.intc), scores=rng.random((1, 7), dtype=np.float32),
                 n_tokens=n_tokens, llama_state=kv, llama_state_size=len(kv), seed=2**32 - 1)


def test_shared_prefix_counts_leading_equal_tokens():
    a = np.array([1, 2, 3, 4])
    assert shared_prefix(a, np.array([1, 2, 9])) == 2
    assert shared_prefix(a, np.array([1, 2])) == 2
    assert shared_prefix(a, np.array([7])) == 0


def test_a_saved_state_reads_back_as_written_from_another_store_of_the_same_setting(tmp_path):
    saved = state(12)
    StateStore(tmp_path, ["model", 64], 2**20).save([5, 6, 7, 8], saved)
    other = StateStore(tmp_path, ["model", 64], 2**20)  # another process
    assert other.longest([5, 6, 7, 9, 9]) == (other.longest([5, 6, 7, 8])[0], 3)
    assert other.covered([5, 6]) and other.covered([5, 6, 7, 8]) and not other.covered([5, 6, 7, 8, 1])
    loaded = other.load(other.longest([5, 6])[0], State)
    assert loaded.llama_state == saved.llama_state and loaded.llama_state_size == saved.llama_state_size
    assert np.array_equal(loaded.input_ids, saved.input_ids) and loaded.input_ids.dtype == np.intc
    assert np.array_equal(loaded.scores, saved.scores) and (loaded.n_tokens, loaded.seed) == (12, 2**32 - 1)
    assert StateStore(tmp_path, ["model", 128], 2**20).longest([5, 6, 7, 8]) is None  # another setting
    assert other.longest([9, 9]) is None


def test_the_least_recently_used_states_go_first_once_over_capacity(tmp_path):
    store = StateStore(tmp_path, ["m"], 2**20)
    for first in (1, 2, 3):
        store.save([first, 0, 0], state(first, kv_bytes=300_000))
    files = sorted(store.folder.glob("*.npz"), key=lambda f: f.stat().st_mtime)
    for age, path in enumerate(reversed(files)):  # distinct times, oldest first: 1, 2, 3
        os.utime(path, (1000 - age, 1000 - age))
    store.load(store.longest([1, 0, 0])[0], State)  # used now: the newest
    store.save([4, 0, 0], state(4, kv_bytes=300_000))  # 4 x 300 kB > 1 MiB: one must go
    assert store.longest([2, 0, 0]) is None
    assert all(store.covered([k, 0, 0]) for k in (1, 3, 4))


@pytest.mark.parametrize("damage", [b"", b"not a zip file", b"PK\x03\x04 truncated"])
def test_a_damaged_or_vanished_state_is_a_miss(tmp_path, damage):
    store = StateStore(tmp_path, ["m"], 2**20)
    store.save([1, 2, 3], state(3))
    name, _ = store.longest([1, 2, 3])
    (store.folder / name).write_bytes(damage)
    assert store.load(name, State) is None
    (store.folder / "other.npz").write_bytes(damage)
    assert StateStore(tmp_path, ["m"], 2**20).longest([1, 2, 3]) is None  # unreadable keys are not offered
    store.save([1, 2, 3], state(3))
    name, _ = store.longest([1, 2, 3])
    (store.folder / name).unlink()  # another process evicted it
    assert store.load(name, State) is None and store.longest([1, 2, 3]) is None


def test_a_state_that_cannot_be_written_is_only_not_kept(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("a file where the folder would be")
    store = StateStore(blocker, ["m"], 2**20)
    store.save([1, 2], state(2))
    assert store.longest([1, 2]) is None
