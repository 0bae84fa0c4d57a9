"""Analysis of run records: scores and paired tests (``metrics``), the audit of emitted graphs, failure classes,
probe scoring, the design's effects with paired intervals (``factorial``), the pages' tables and the Markdown they are written in, every text escaped (``markup``).

Its modules import from ``run`` and every layer below it, never from a layer above (``tests/test_layers.py``).
Each is imported by its own name (``from cpdagthink.analysis import audit``): importing the folder imports none
of them.
"""

__all__ = [
    "audit",
    "factorial",
    "failures",
    "markup",
    "metrics",
    "probes",
    "tables",
]
