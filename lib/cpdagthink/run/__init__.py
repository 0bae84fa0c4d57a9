"""Running the method: run parameters and configurations (``parameters``, ``config``), what a run is (``spec``),
the data loader and generated sets (``data``, ``generate``), the run folder and its typed records (``runfolder``,
``records``), whether a folder's records are a run's to resume (``resumable``), the call cache, the repair round between a run's turns (``repair``), a run's spending limit
(``budget``), the runner, the rounds of runs made together on batch files (``gathering``), request inspection
and the estimate of what a run still asks of its model (``estimate``).

Its modules import from ``backends``, ``method``, ``causal`` and the top-level modules, never from a layer above
(``tests/test_layers.py``). Each is imported by its own name (``from cpdagthink.run import cache``): importing
the folder imports none of them.
"""

__all__ = [
    "budget",
    "cache",
    "config",
    "data",
    "estimate",
    "gathering",
    "generate",
    "inspection",
    "parameters",
    "provenance",
    "records",
    "repair",
    "resumable",
    "runfolder",
    "runner",
    "spec",
    "streaming",
    "together",
]
