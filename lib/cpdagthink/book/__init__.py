"""The book: what describes its chapters (``chapters``), what the notebooks call (``experiments``), its tables as
a page shows them (``presentation``), the pages' sentences (``readings``, one module per chapter), figures, the
failure explorer and its views, the headless browser, the runs each chapter reads (``plan``; chapter 07's design and its cost in ``components``) and what they cost (``cost``), the recipe of each paper result and
``cpdagthink reproduce`` (``recipes``, ``reproduce``, and its page's generated parts, ``reproduce_page``), the build of the
Jupyter Book (``build``; where each chapter's execution stands in ``chapter_state``; the HTML and its print in ``site``; the intro's account of a build in ``intro``), the console's progress while a chapter runs
(``progress``) and its record of what the build cost (``build_record``).

Its modules import from every layer below it, never from a layer above, and none imports another that imports it
back (``tests/test_layers.py``). Each is imported by its own name (``from cpdagthink.book import browser``):
importing the folder imports none of them.
"""

__all__ = [
    "browser",
    "build",
    "build_record",
    "chapter_state",
    "chapters",
    "components",
    "cost",
    "experiments",
    "explorer",
    "failure_views",
    "figures",
    "intro",
    "plan",
    "presentation",
    "progress",
    "readings",
    "recipes",
    "reproduce",
    "reproduce_page",
    "site",
]
