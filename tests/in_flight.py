"""A counter of how many threads are inside a block at once, for tests of concurrency bounds."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator


class InFlight:
    """Counts the threads inside :meth:`inside` at once; ``peak`` is the most seen."""

    def __init__(self) -> None:
        self.now = 0
        self.peak = 0
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def inside(self, hold_s: float) -> Iterator[None]:
        """Enter, stay ``hold_s`` seconds (so that other threads can overlap), leave."""
        with self._lock:
            self.now += 1
            self.peak = max(self.peak, self.now)
        try:
            time.sleep(hold_s)
            yield
        finally:
            with self._lock:
                self.now -= 1
