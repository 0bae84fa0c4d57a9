"""A backend that dies after some requests, as a process killed mid-run does, shared by the runner's tests and
the local pipeline's."""

from __future__ import annotations

from cpdagthink.backends.base import Backend
from cpdagthink.method.chat import Completion, Request


class Killed(RuntimeError):
    """What :class:`DiesAfter` raises unless told otherwise: a run stopped from outside."""


class DiesAfter(Backend):
    """Wraps a backend and dies after ``n`` served requests (raising ``error``), like a process killed mid-run."""

    def __init__(self, inner: Backend, n: int, error: BaseException | type[BaseException] = Killed):
        self.inner, self.left, self.error = inner, n, error

    def identity(self):
        return self.inner.identity()

    def complete(self, request: Request) -> Completion:
        if self.left == 0:
            raise self.error
        self.left -= 1
        return self.inner.complete(request)
