"""The root of the package's errors.

Every error the package raises on purpose derives from :class:`CpdagthinkError`, so a front door (the CLI)
reports all of them with one ``except``. Each class also derives from the built-in that says what kind of
error it is (``ValueError``, ``KeyError``, ``RuntimeError``), so callers that catch those catch it too.
"""

from __future__ import annotations


class CpdagthinkError(Exception):
    """An error the package raises deliberately, with a message meant for the person running it."""
