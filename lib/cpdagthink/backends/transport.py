"""HTTP transport for API backends: each request's attempts over a set of endpoints, bounded in time and in
concurrency, retried or not as the backend's :data:`Classify` hook says.

* A failed attempt is classified once (``classify(exc, url)``) as a :class:`Failure`: ``retry`` (with capped
  exponential backoff and seeded jitter, ``Retry-After`` honoured up to the cap, each retry on the next
  endpoint; when every attempt failed, :class:`RetriesExhausted`, which a streaming runner records as its
  instance unanswered), ``rejected`` (the request itself is at fault: :class:`ServiceRejected`, which a runner
  records on its instance) or ``fatal`` (:class:`BackendError`). HTTP statuses map by :func:`status_failure`:
  408/409/425/429/5xx retry, 400/413/422 are rejections, any other is fatal.
* ``timeout`` bounds each attempt as a whole (connecting, sending and every read together,
  :func:`bounded_http_client`), so a server that trickles bytes cannot hold a request open.
* At most ``max_concurrency`` requests are in flight per transport, across concurrent batches too (so a runner
  may overlap batches to keep every slot busy); batches run on daemon threads (:func:`run_concurrently`) and
  Ctrl-C stops waiting at once.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import queue
import random
import sys
import threading
import time
from typing import Any, Callable, Iterator, Literal, Sequence, TypeVar

from .base import BackendError, RequestRejected

T = TypeVar("T")
Verdict = Literal["retry", "rejected", "fatal"]
# The request itself is at fault (e.g. longer than the context): record it on its instance, go on.
REJECTED_STATUS = {400, 413, 422}
RETRYABLE_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}
# Characters of a failure kept in an error message.
MESSAGE_CHARS = 300
# Seconds of backoff from which the wait is said on stderr (a shorter one passes unnoticed).
WAIT_NOTICE_S = 5.0


class ServiceRejected(RequestRejected):
    """The service refused this request as invalid (HTTP 400/413/422). ``server_message`` is the service's
    own error text (redacted), ``status_code`` its HTTP status."""

    def __init__(self, url: str, status_code: int | None, server_message: str):
        self.url, self.status_code, self.server_message = url, status_code, server_message
        super().__init__(f"{url} rejected the request (HTTP {status_code}): {server_message}")


class RetriesExhausted(BackendError):
    """Every attempt of one request failed in a way worth retrying (a timeout, 429, 5xx, a reset or cut-off
    answer): its instance goes unanswered and a runner that serves instances one by one goes on."""


@dataclasses.dataclass(frozen=True)
class Failure:
    """What one failed attempt means. ``message``: for ``retry`` the line the final error quotes if every
    attempt fails, for ``rejected`` the service's own message, for ``fatal`` the error raised."""

    verdict: Verdict
    message: str
    status_code: int | None = None  # of a rejection
    retry_after: float | None = None  # seconds the server asked a retry to wait


# The backend's hook: a failed attempt's exception and endpoint to a Failure; None for an exception it does
# not know, which is raised as it is.
Classify = Callable[[Exception, str], "Failure | None"]


def status_failure(url: str, status_code: int, server_message: str, retry_after: float | None = None) -> Failure:
    """The :class:`Failure` an HTTP error status means (module docstring)."""
    if status_code in REJECTED_STATUS:
        return Failure("rejected", server_message, status_code=status_code)
    line = f"{url}: HTTP {status_code}: {server_message}"[:MESSAGE_CHARS]
    if status_code not in RETRYABLE_STATUS:
        return Failure("fatal", f"request to {url} failed (not retryable): {line}")
    return Failure("retry", line, retry_after=retry_after)


class _Deadline(threading.local):
    """When the request running on this thread must be done (None: no request is bounded here)."""

    at: float | None = None


_DEADLINE = _Deadline()


@contextlib.contextmanager
def bounded(seconds: float) -> Iterator[None]:
    """Bound every network operation of the requests made inside the block, on this thread, to end within
    ``seconds`` in total (see :func:`bounded_http_client`)."""
    _DEADLINE.at = time.monotonic() + seconds
    try:
        yield
    finally:
        _DEADLINE.at = None


def bounded_http_client(timeout: float, connections: int) -> Any:
    """An ``httpx.Client`` whose connections honour :func:`bounded`: each connect, read and write gets only the
    time left of its request, none once it is spent (the client's own timeouts bound each operation alone, so a
    server sending a byte a second would hold a request for ever); ``connections`` kept open between requests."""
    import httpcore
    import httpx

    def left(timeout: float | None, error: type[Exception]) -> float | None:
        if _DEADLINE.at is None:
            return timeout
        remaining = _DEADLINE.at - time.monotonic()
        if remaining <= 0:
            raise error("the request's whole time is spent")
        return remaining if timeout is None else min(timeout, remaining)

    class Stream(httpcore.NetworkStream):
        def __init__(self, inner: httpcore.NetworkStream):
            self._inner = inner

        def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
            return self._inner.read(max_bytes, left(timeout, httpcore.ReadTimeout))

        def write(self, buffer: bytes, timeout: float | None = None) -> None:
            self._inner.write(buffer, left(timeout, httpcore.WriteTimeout))

        def close(self) -> None:
            self._inner.close()

        def start_tls(self, ssl_context: Any, server_hostname: str | None = None,
                      timeout: float | None = None) -> httpcore.NetworkStream:
            return Stream(self._inner.start_tls(ssl_context, server_hostname, left(timeout, httpcore.ConnectTimeout)))

        def get_extra_info(self, info: str) -> Any:
            return self._inner.get_extra_info(info)

    class Network(httpcore.NetworkBackend):
        def __init__(self, inner: httpcore.NetworkBackend):
            self._inner = inner

        def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                        socket_options: Any = None) -> httpcore.NetworkStream:
            return Stream(self._inner.connect_tcp(host, port, left(timeout, httpcore.ConnectTimeout), local_address,
                                                  socket_options))

        def connect_unix_socket(self, path: str, timeout: float | None = None,
                                socket_options: Any = None) -> httpcore.NetworkStream:
            return Stream(self._inner.connect_unix_socket(path, left(timeout, httpcore.ConnectTimeout), socket_options))

        def sleep(self, seconds: float) -> None:
            self._inner.sleep(seconds)

    kept = httpx.Limits(max_connections=None, max_keepalive_connections=connections)  # httpx keeps 20 open
    client = httpx.Client(timeout=timeout, follow_redirects=True, limits=kept)
    # httpx builds its connection pools (direct, and through the environment's proxies) without a way to pass
    # a network backend: wrap the ones it made.
    for transport in (client._transport, *client._mounts.values()):
        pool = getattr(transport, "_pool", None)
        if pool is not None:
            pool._network_backend = Network(pool._network_backend)
    return client


def run_concurrently(fn: Callable[[Any], Any], items: Sequence[Any], workers: int, stop: threading.Event) -> list[Any]:
    """``fn`` over ``items`` on at most ``workers`` daemon threads: for each item, in order, its result or the
    exception it raised, or None for an item never started (the first exception stops further items from
    starting; the running ones finish, so nothing already paid for is dropped).

    The caller's thread waits in short steps, so Ctrl-C interrupts it at once; it then sets ``stop`` (workers
    check it between attempts) and, the threads being daemons, never waits for a request in flight. The
    interruption (Ctrl-C, or SIGTERM at a job's time limit) is raised with the outcomes so far as its
    ``outcomes``, so the caller keeps what was already paid for.
    """
    todo: queue.SimpleQueue[int] = queue.SimpleQueue()
    for i in range(len(items)):
        todo.put(i)
    outcomes: list[Any] = [None] * len(items)
    failed = threading.Event()
    finished = threading.Semaphore(0)

    def work() -> None:
        while not stop.is_set() and not failed.is_set():
            try:
                i = todo.get_nowait()
            except queue.Empty:
                break
            try:
                outcomes[i] = fn(items[i])
            except BaseException as error:  # noqa: BLE001 - handed to the caller's thread
                outcomes[i] = error
                failed.set()
        finished.release()

    threads = [threading.Thread(target=work, daemon=True, name=f"api-worker-{n}")
               for n in range(min(workers, len(items)))]
    for thread in threads:
        thread.start()
    try:
        for _ in threads:
            while not finished.acquire(timeout=0.1):
                pass
    except BaseException as stopped:
        stop.set()
        stopped.outcomes = list(outcomes)
        raise
    return outcomes


class Transport:
    """Attempts of requests over ``clients`` (one per endpoint, recorded as ``urls``), round-robin, at most
    ``max_concurrency`` in flight, each attempt within ``timeout`` seconds and retried up to ``retries``
    times as ``classify`` says (module docstring)."""

    def __init__(self, clients: Sequence[Any], urls: Sequence[str], classify: Classify, *, timeout: float,
                 retries: int, backoff_base: float, backoff_max: float, jitter_seed: int, max_concurrency: int):
        self.clients, self.urls, self.classify = list(clients), list(urls), classify
        self.timeout, self.retries = timeout, retries
        self.backoff_base, self.backoff_max = backoff_base, backoff_max
        self.max_concurrency = max_concurrency
        self._slots = threading.BoundedSemaphore(max_concurrency)  # requests in flight, all batches
        self._rr = itertools.cycle(range(len(self.clients)))
        self._lock = threading.Lock()
        self._rng = random.Random(jitter_seed)
        self.stop = threading.Event()
        self.attempts = 0  # total HTTP attempts made (for tests and cost accounting)

    def _next_client(self) -> tuple[Any, str]:
        with self._lock:
            i = next(self._rr)
            self.attempts += 1
        return self.clients[i], self.urls[i]

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        with self._lock:
            jitter = self._rng.random()
        delay = min(self.backoff_max, self.backoff_base * (2**attempt)) * (0.5 + 0.5 * jitter)
        if retry_after is not None:
            delay = max(delay, min(retry_after, self.backoff_max))
        return delay

    def _wait(self, delay: float, attempt: int, failure: str) -> bool:
        """Wait ``delay`` seconds before the next attempt, saying so on stderr in one line when the wait is long
        enough to look like a hang; True when :attr:`stop` was set meanwhile."""
        if delay >= WAIT_NOTICE_S:
            print(f"cpdagthink: waiting {delay:.0f} s before attempt {attempt + 2} of {self.retries + 1} "
                  f"({failure})"[:MESSAGE_CHARS], file=sys.stderr, flush=True)
        return self.stop.wait(delay)

    def request(self, send: Callable[[Any], Any], read: Callable[[Any, float, dict[str, Any]], T]) -> T:
        """``read(send(client), latency_s, attempt)`` for the first attempt that succeeds. ``attempt`` holds
        ``attempts`` (made so far), ``base_url`` (where this one went) and, after a retry, ``wall_s`` (seconds
        since the first attempt). Raises :class:`ServiceRejected` on a rejection, :class:`BackendError` on a
        fatal failure or when :attr:`stop` is set while waiting to retry, and :class:`RetriesExhausted` when every
        attempt failed."""
        errors: list[str] = []
        urls_tried: list[str] = []
        first = time.perf_counter()
        for attempt in range(self.retries + 1):
            client, url = self._next_client()
            urls_tried.append(url)
            try:
                with self._slots, bounded(self.timeout):
                    start = time.perf_counter()
                    response = send(client)
                latency = time.perf_counter() - start
                made = {"attempts": attempt + 1, "base_url": url}
                if attempt:
                    made["wall_s"] = round(time.perf_counter() - first, 3)
                return read(response, latency, made)
            except Exception as exc:  # noqa: BLE001 - what classify does not know is raised as it is
                failure = self.classify(exc, url)
                if failure is None:
                    raise
                _raise_unless_retry(failure, url, exc)
                errors.append(failure.message)
            if attempt < self.retries and self._wait(self._delay(attempt, failure.retry_after), attempt, errors[-1]):
                raise BackendError("stopped (interrupted)")
        raise RetriesExhausted(
            f"endpoint {', '.join(sorted(set(urls_tried)))} unreachable or failing after "
            f"{self.retries + 1} attempts; last error: {errors[-1]}"
        )

    def map(self, fn: Callable[[Any], Any], items: Sequence[Any]) -> list[Any]:
        """:func:`run_concurrently` on ``max_concurrency`` workers, stopped by :meth:`close` or Ctrl-C."""
        self.stop.clear()
        return run_concurrently(fn, list(items), self.max_concurrency, self.stop)

    def close(self) -> None:
        self.stop.set()
        for client in self.clients:
            try:
                client.close()
            except Exception:  # noqa: BLE001
                pass


def _raise_unless_retry(failure: Failure, url: str, cause: Exception) -> None:
    """Raise what a rejected or fatal failure means; return for one to retry."""
    if failure.verdict == "rejected":
        raise ServiceRejected(url, failure.status_code, failure.message) from cause
    if failure.verdict == "fatal":
        raise BackendError(failure.message) from cause
