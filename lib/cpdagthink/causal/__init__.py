"""The causal core: a Corr2Cause row (``instance``), its premise and hypothesis (``premise``), DAGs and their
independence facts (``dag``), and the exact oracle that labels a row over its whole Markov equivalence class
(``oracle``).

Its modules import from nothing of the package but its top-level ``errors``, ``paths`` and ``files``, never from
a layer above (``tests/test_layers.py``). Each is imported by its own name (``from cpdagthink.causal import
dag``): importing the folder imports none of them.
"""

__all__ = [
    "dag",
    "instance",
    "oracle",
    "premise",
]
