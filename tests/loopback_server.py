"""What every loopback test server shares: an HTTP server on 127.0.0.1 at a free port, served by a daemon thread,
its ``url`` ending in ``/v1``, stopped by :meth:`LoopbackServer.close` or at the end of a ``with`` block.

A helper of tests/, not a test module (``tests/test_layers.py``: a test module imports helpers, never another
test module); the stand-ins built on it (:mod:`loopback_api`, :mod:`reasoning_api_server`,
:mod:`batch_api_server`, :mod:`planted_server`, and the stubs of ``test_backends_openai.py``) add their answers.
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, TypeVar

Self = TypeVar("Self", bound="LoopbackServer")


class LoopbackServer:
    """A server of ``handler`` (a :class:`BaseHTTPRequestHandler` class) on 127.0.0.1, started by :meth:`start`;
    ``server_class``: the :class:`ThreadingHTTPServer` to run (one that stays quiet about a client gone, say).
    A subclass that must release something before the server stops does so in its :meth:`close`, then calls
    this one."""

    server_class: type[ThreadingHTTPServer] = ThreadingHTTPServer

    def start(self, handler: type[BaseHTTPRequestHandler]) -> None:
        """Start answering with ``handler`` at :attr:`url`; each connection on a daemon thread of its own, counted
        in :attr:`connections`."""
        owner, lock = self, threading.Lock()
        self.connections = 0

        class Counted(self.server_class):  # type: ignore[name-defined, misc]
            def process_request(self, request: Any, client_address: Any) -> None:
                with lock:
                    owner.connections += 1
                super().process_request(request, client_address)

        self._http = Counted(("127.0.0.1", 0), handler)
        self._http.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._http.server_address[1]}/v1"
        self._thread = threading.Thread(target=self._http.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Stop serving and free the port."""
        self._http.shutdown()
        self._http.server_close()

    def __enter__(self: Self) -> Self:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
