"""The call cache: round trips, unreadable entries set aside and recomputed, rejected calls never stored."""

from __future__ import annotations

import pytest

from cpdagthink.backends.base import Backend, Completion, Request, RequestRejected
from cpdagthink.cache import CallCache, CorruptCacheEntryWarning
from cpdagthink.runner import CachedBackend

KEY = "ab" * 32


def test_round_trip_and_miss(tmp_path):
    cache = CallCache(tmp_path)
    completion = Completion(text="Answer: YES", prompt_tokens=3, completion_tokens=2, latency_s=0.5, meta={"x": 1})
    cache.put(KEY, completion)
    assert cache.get(KEY) == completion and cache.get("cd" * 32) is None
    assert not list(tmp_path.rglob("*.tmp"))


@pytest.mark.parametrize(
    "content",
    [b"", b'{"text": "Answer: Y', b"[1, 2, 3]", b'"a string"', b'{"answer": "YES"}', b'{"text": 5}',
     b'{"text": "x", "tool_calls": [{"bad": 1}]}', b"\x00\xff\xfe binary \x89PNG"],
    ids=["empty", "truncated", "list", "string", "wrong-fields", "wrong-type", "bad-tool-call", "binary"],
)
def test_an_unreadable_entry_is_reported_moved_aside_and_a_miss(tmp_path, content):
    cache = CallCache(tmp_path)
    path = cache.path(KEY)
    path.parent.mkdir(parents=True)
    path.write_bytes(content)
    with pytest.warns(CorruptCacheEntryWarning, match=str(path)):
        assert cache.get(KEY) is None
    [aside] = path.parent.glob(f"{KEY}.json.bad-*")
    assert aside.read_bytes() == content and not path.exists()
    cache.put(KEY, Completion(text="fresh"))
    assert cache.get(KEY) == Completion(text="fresh")


class RejectsUntilFixed(Backend):
    """Rejects every request (HTTP 400 from a misconfigured server) until ``fixed`` is set."""

    def __init__(self):
        self.calls, self.fixed = 0, False

    def identity(self):
        return {"backend": "rejects-until-fixed"}

    def complete(self, request: Request) -> Completion:
        self.calls += 1
        if not self.fixed:
            raise RequestRejected("400: context length exceeded")
        return Completion(text="Answer: YES")


def test_rejected_calls_are_not_cached_and_a_bad_entry_is_recomputed(tmp_path):
    backend = RejectsUntilFixed()
    request = Request(messages=({"role": "user", "content": "Is A a cause of B?"},))
    cached = CachedBackend(backend, CallCache(tmp_path))
    [(first, hit)] = cached.complete_batch([request])
    assert "rejected" in first.meta and not hit and not list(tmp_path.rglob("*.json"))
    backend.fixed, calls = True, backend.calls
    [(second, hit)] = cached.complete_batch([request])
    assert second.text == "Answer: YES" and not hit and backend.calls == calls + 1
    [(third, hit)] = cached.complete_batch([request])
    assert third == second and hit and backend.calls == calls + 1
    [entry] = tmp_path.rglob("*.json")
    entry.write_bytes(b"")
    with pytest.warns(CorruptCacheEntryWarning, match=str(entry)):
        [(fourth, hit)] = CachedBackend(backend, CallCache(tmp_path)).complete_batch([request])
    assert fourth.text == "Answer: YES" and not hit and backend.calls == calls + 2
