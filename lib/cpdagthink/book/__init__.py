"""The book: what the notebooks call (``experiments``), the pages' sentences (``readings``), figures, the failure
explorer and its views, the headless browser, the runs each chapter reads (``plan``), the build of the
Jupyter Book (``build``) and its record of what the build cost (``build_record``).

Its modules import from every layer below it, never from a layer above (``tests/test_layers.py``). Each is
imported by its own name (``from cpdagthink.book import browser``): importing the folder imports none of them.
"""

__all__ = [
    "browser",
    "build",
    "build_record",
    "experiments",
    "explorer",
    "failure_views",
    "figures",
    "plan",
    "readings",
]
