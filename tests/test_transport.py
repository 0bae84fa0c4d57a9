"""The API transport on stand-in endpoints (no network): one classify hook decides what a failed attempt
means, retries go round the endpoints, rejections and fatal failures stop at once, and at most
``max_concurrency`` requests are in flight."""

from __future__ import annotations

import threading
import time

import pytest
from in_flight import InFlight

from cpdagthink.backends.base import BackendError
from cpdagthink.backends.transport import Failure, RetriesExhausted, ServiceRejected, Transport, status_failure


class Refused(Exception):
    """What a stand-in endpoint raises; its ``failure`` is what the stand-in classify makes of it."""

    def __init__(self, failure: Failure | None):
        self.failure = failure
        super().__init__(failure.message if failure else "unknown")


def classify(exc: Exception, url: str) -> Failure | None:
    return exc.failure if isinstance(exc, Refused) else None


def transport(urls=("http://a", "http://b"), **options) -> Transport:
    settings = dict(timeout=5.0, retries=2, backoff_base=0.001, backoff_max=0.01, jitter_seed=0, max_concurrency=2)
    return Transport(list(urls), list(urls), classify, **{**settings, **options})


def read(response, latency_s, attempt):
    return response, attempt


def failing(plan: dict[str, list[Exception]]):
    """A send that raises each endpoint's planned exceptions in turn, then answers with the endpoint."""

    def send(client):
        if plan.get(client):
            raise plan[client].pop(0)
        return client

    return send


def test_a_retry_goes_to_the_next_endpoint_and_says_how_many_attempts_it_took():
    t = transport()
    answer, attempt = t.request(failing({"http://a": [Refused(Failure("retry", "a: busy"))]}), read)
    assert answer == "http://b" and attempt["attempts"] == 2 and attempt["base_url"] == "http://b"
    assert attempt["wall_s"] >= 0 and t.attempts == 2


def test_a_first_attempt_that_answers_carries_no_wall_time():
    answer, attempt = transport().request(failing({}), read)
    assert (answer, attempt) == ("http://a", {"attempts": 1, "base_url": "http://a"})


def test_a_rejection_is_raised_at_once_with_the_services_message():
    t = transport()
    with pytest.raises(ServiceRejected) as err:
        t.request(failing({"http://a": [Refused(Failure("rejected", "too long", status_code=400))]}), read)
    assert (err.value.url, err.value.status_code, err.value.server_message) == ("http://a", 400, "too long")
    assert t.attempts == 1


def test_a_fatal_failure_is_not_retried():
    t = transport()
    with pytest.raises(BackendError, match="^a: did not answer$"):
        t.request(failing({"http://a": [Refused(Failure("fatal", "a: did not answer"))]}), read)
    assert t.attempts == 1


def test_an_exception_classify_does_not_know_is_raised_as_it_is():
    with pytest.raises(Refused, match="unknown"):
        transport().request(failing({"http://a": [Refused(None)]}), read)


def test_retries_exhausted_name_every_endpoint_tried_and_the_last_error():
    plan = {url: [Refused(Failure("retry", f"{url}: busy {n}")) for n in range(2)] for url in ("http://a", "http://b")}
    with pytest.raises(RetriesExhausted, match=r"endpoint http://a, http://b unreachable or failing after 3 "
                                               r"attempts; last error: http://a: busy 1"):
        transport().request(failing(plan), read)


def test_a_fatal_failure_is_not_an_exhausted_retry():
    with pytest.raises(BackendError) as raised:
        transport().request(failing({"http://a": [Refused(Failure("fatal", "no key"))]}), read)
    assert not isinstance(raised.value, RetriesExhausted)  # a runner stops the run on it, not just the instance


def test_a_retry_waits_what_retry_after_asks_up_to_the_cap():
    t = transport(backoff_base=0.001, backoff_max=0.3)
    start = time.perf_counter()
    t.request(failing({"http://a": [Refused(Failure("retry", "slow down", retry_after=0.2))]}), read)
    waited = time.perf_counter() - start
    start = time.perf_counter()
    t.request(failing({"http://a": [Refused(Failure("retry", "slow down", retry_after=60))]}), read)
    assert 0.2 <= waited < 0.3 <= time.perf_counter() - start < 1.0  # a minute asked, the cap obeyed


def test_a_stopped_transport_does_not_wait_to_retry():
    t = transport(retries=1, backoff_base=60.0, backoff_max=60.0)
    t.stop.set()
    start = time.perf_counter()
    with pytest.raises(BackendError, match="stopped"):
        t.request(failing({"http://a": [Refused(Failure("retry", "busy"))]}), read)
    assert time.perf_counter() - start < 5


def test_http_statuses_map_to_what_they_mean():
    assert status_failure("u", 413, "too large") == Failure("rejected", "too large", status_code=413)
    assert status_failure("u", 429, "slow down", 3.0) == Failure("retry", "u: HTTP 429: slow down", retry_after=3.0)
    fatal = status_failure("u", 401, "no key")
    assert fatal.verdict == "fatal" and "not retryable" in fatal.message


def test_at_most_max_concurrency_requests_are_in_flight():
    t = transport(max_concurrency=2)
    flight = InFlight()

    def send(client):
        with flight.inside(0.05):
            return client

    # more workers than slots, so the bound is the transport's, not the thread pool's
    outcomes = [None] * 6
    threads = [threading.Thread(target=lambda i=i: outcomes.__setitem__(i, t.request(send, read)[0])) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert flight.peak == 2 and sorted(outcomes) == ["http://a"] * 3 + ["http://b"] * 3


def test_an_interruption_carries_what_finished_before_it(ctrl_c):
    """Ctrl-C (or SIGTERM at a job's time limit) while a batch waits: the interruption carries the outcomes so
    far, the finished ones among them, and the workers are told to stop."""
    from cpdagthink.backends.transport import run_concurrently

    def answer(i):
        if i:
            time.sleep(5)  # in flight when the interruption comes
        return f"answer {i}"

    stop = threading.Event()
    ctrl_c.start()
    with pytest.raises(KeyboardInterrupt) as stopped:
        run_concurrently(answer, [0, 1, 2], workers=3, stop=stop)
    assert stopped.value.outcomes == ["answer 0", None, None] and stop.is_set()


def test_a_long_backoff_is_said_in_one_line_and_a_short_one_is_not(monkeypatch, capsys):
    import cpdagthink.backends.transport as transport_module

    busy = {"http://a": [Refused(Failure("retry", "http://a: HTTP 503: busy"))]}
    transport().request(failing({k: list(v) for k, v in busy.items()}), read)
    assert capsys.readouterr().err == ""  # 1 ms of backoff passes unnoticed
    monkeypatch.setattr(transport_module, "WAIT_NOTICE_S", 0.0005)  # as if the wait were seconds long
    transport(backoff_base=0.001).request(failing({k: list(v) for k, v in busy.items()}), read)
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("cpdagthink: waiting 0 s before attempt 2 of 3 (http://a: HTTP 503: busy)")
