"""The call cache: round trips, unreadable entries set aside and recomputed, rejected calls never stored."""

from __future__ import annotations

import errno
import os

import pytest

from cpdagthink.backends.base import Backend, RequestRejected
from cpdagthink.method.chat import Completion, Request
from cpdagthink.run.cache import CacheError, CallCache, CorruptCacheEntryWarning
from cpdagthink.run.data import read_csv
from cpdagthink.run.runner import CachedBackend, run_config
from conftest import configured

KEY = "ab" * 32


def test_round_trip_and_miss(tmp_path):
    cache = CallCache(tmp_path)
    completion = Completion(text="Answer: YES", prompt_tokens=3, completion_tokens=2, latency_s=0.5, meta={"x": 1})
    cache.put(KEY, completion)
    assert cache.get(KEY) == completion and cache.get("cd" * 32) is None
    assert not list(tmp_path.rglob("*.tmp"))


def test_a_requests_keys_under_several_identities_are_each_its_cache_key():
    """The keys of one request under its backend's identity and the former ones are made from one serialization
    of the request, byte for byte the digest of the whole payload's sorted-key JSON."""
    import hashlib
    import json

    request = Request(messages=({"role": "user", "content": "Is \"A\" → B?"},), tools=({"type": "function",
                      "function": {"name": "f", "parameters": {"z": 1, "a": [{"y": None, "b": 2.5}]}}},), seed=3)
    identities = [{"backend": "openai", "model": "m", "profile": {"z": True, "a": "é"}},
                  {"backend": "openai", "model": "m", "base_urls": ["http://h/v1"]}, {}]
    plain = [hashlib.sha256(json.dumps({"backend": i, "request": request.to_json()}, sort_keys=True).encode())
             .hexdigest() for i in identities]
    assert request.cache_keys(identities) == plain and request.cache_key(identities[0]) == plain[0]
    assert len(set(plain)) == 3


@pytest.mark.parametrize(
    "content",
    [b"", b'{"text": "Answer: Y', b"[1, 2, 3]", b'"a string"', b'{"answer": "YES"}', b'{"text": 5}',
     b'{"text": "x", "tool_calls": [{"bad": 1}]}', b"\x00\xff\xfe binary \x89PNG",
     b'{"text": "Answer: YES", "latency_s": "slow"}', b'{"text": "x", "prompt_tokens": "3"}',
     b'{"text": "x", "meta": {"deep": ' + b"[" * 100_000 + b"]" * 100_000 + b"}}"],
    ids=["empty", "truncated", "list", "string", "wrong-fields", "wrong-type", "bad-tool-call", "binary",
         "wrong-field-type", "number-as-string", "deeply-nested"],
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


def test_an_entry_of_wrong_types_is_recomputed_by_the_run_instead_of_blocking_it(tmp_path):
    backend = RejectsUntilFixed()
    backend.fixed = True
    request = Request(messages=({"role": "user", "content": "Is A a cause of B?"},))
    [(first, _)] = CachedBackend(backend, CallCache(tmp_path)).complete_batch([request])
    [entry] = tmp_path.rglob("*.json")
    entry.write_text('{"text": "Answer: YES", "latency_s": "slow"}', encoding="utf-8")
    with pytest.warns(CorruptCacheEntryWarning, match=f"{entry}.*latency_s"):
        [(again, hit)] = CachedBackend(backend, CallCache(tmp_path)).complete_batch([request])
    assert again.text == "Answer: YES" and isinstance(again.latency_s, float) and not hit and backend.calls == 2
    assert len(list(entry.parent.glob("*.bad-*"))) == 1


def test_a_cache_folder_that_cannot_be_written_fails_before_any_call_naming_it(tmp_path):
    occupied = tmp_path / "a-file"
    occupied.write_text("not a folder")
    for folder, reason in ((occupied, "is a file"), (occupied / "cache", "cannot create")):
        with pytest.raises(CacheError) as raised:
            CallCache(folder)
        assert str(folder) in str(raised.value) and reason in str(raised.value)


def _read_only(monkeypatch, folder):
    """``folder`` as a user without write permission sees it (this suite may run as root, who writes anyway)."""
    real = os.access
    monkeypatch.setattr(os, "access", lambda path, mode, **kw: (not (mode & os.W_OK) or not str(path).startswith(
        str(folder))) and real(path, mode, **kw))


def test_a_read_only_cache_is_replayed_and_refuses_only_a_call_it_lacks(test_csv, tmp_path, monkeypatch):
    from cpdagthink.backends.reference import ReferenceBackend
    from cpdagthink.run.data import sample

    instances = sample(read_csv(test_csv), 3, seed=0, min_positives=1)
    cache = tmp_path / "cache"
    made = run_config(configured("structured", cache_dir=cache),
                      ReferenceBackend(), instances, tmp_path / "one", progress=False)
    entries = sorted(cache.rglob("*.json"))
    _read_only(monkeypatch, cache)
    assert not CallCache(cache).writable
    again = run_config(configured("structured", cache_dir=cache),
                       ReferenceBackend(), instances, tmp_path / "two", progress=False)
    assert again.model_calls == 0 and [r.answer for r in again.records] == [r.answer for r in made.records]
    backend = RejectsUntilFixed()
    with pytest.raises(CacheError, match=f"{cache} is not writable and does not hold every call of this run"):
        run_config(configured("baseline_enhanced", cache_dir=cache),
                   backend, instances, tmp_path / "three", progress=False)
    assert backend.calls == 0 and sorted(cache.rglob("*.json")) == entries  # nothing paid for, nothing written


def test_a_run_with_an_unusable_cache_folder_stops_before_its_first_call(tmp_path):
    backend = RejectsUntilFixed()
    (tmp_path / "cache").write_text("a file named as --cache")
    (tmp_path / "one.csv").write_text(
        'input,label,num_variables,template\n"Premise: Suppose there is a closed system of 2 variables, A and B. '
        "All the statistical relations among these 2 variables are as follows: A correlates with B.\n"
        'Hypothesis: A directly causes B.",0,2,parent\n', encoding="utf-8")
    with pytest.raises(CacheError, match="is a file"):
        run_config(configured("baseline_enhanced", cache_dir=tmp_path / "cache"),
                   backend, read_csv(tmp_path / "one.csv"), tmp_path / "run", progress=False)
    assert backend.calls == 0


def test_a_full_disk_leaves_no_temporary_file_and_says_so_on_one_line(tmp_path, monkeypatch):
    cache = CallCache(tmp_path)

    def full_disk(*args):  # the bytes are written, then the disk reports that it is full
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "replace", full_disk)  # the entry's last step (it is not flushed to the disk: put)
    with pytest.raises(CacheError) as raised:
        cache.put(KEY, Completion(text="Answer: YES " * 100))
    monkeypatch.undo()
    message = str(raised.value)
    assert "\n" not in message and str(cache.path(KEY)) in message and "No space left on device" in message
    assert not [p for p in tmp_path.rglob("*") if p.is_file()]  # no temporary file, no torn entry
    assert cache.get(KEY) is None


class Served(Backend):
    """An API model served at ``base_urls``: where it is reached is not what it is."""

    name = "openai"
    thinking_supported = True

    def __init__(self, base_urls):
        self.base_urls, self.calls = base_urls, 0

    def identity(self):
        return {"backend": "openai", "model": "served-model"}

    def complete(self, request):
        self.calls += 1
        return Completion(text="Answer: YES")


def test_an_entry_keyed_when_the_identity_named_its_endpoints_is_replayed_and_kept_under_the_current_key(tmp_path):
    request = Request(messages=({"role": "user", "content": "Does A cause B?"},))
    backend = Served(["http://127.0.0.1:8000/v1"])
    cache = CallCache(tmp_path)
    former = request.cache_key({**backend.identity(), "base_urls": backend.base_urls})
    cache.put(former, Completion(text="Answer: NO"))
    [(completion, hit)] = CachedBackend(backend, cache).complete_batch([request])
    assert hit and completion.text == "Answer: NO" and backend.calls == 0
    assert cache.get(request.cache_key(backend.identity())).text == "Answer: NO"  # migrated, the old entry kept
    assert cache.get(former).text == "Answer: NO"
    elsewhere = Served(["http://localhost:8000/v1"])  # the current key serves every address from now on
    assert CachedBackend(elsewhere, cache).complete_batch([request])[0][1] and elsewhere.calls == 0
