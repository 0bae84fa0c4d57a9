"""Where the project's files are: the files the package ships, the checkout, and the outputs folder (runs,
caches, generated sets).

Every module that needs a location takes it from here, so moving a module within the package never
changes where it reads or writes.
"""

from __future__ import annotations

import os
from importlib.resources import files
from importlib.resources.abc import Traversable
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[2]
# A source checkout (an editable install, or lib/ on PYTHONPATH) has its pyproject.toml two folders above the
# package; an installed wheel has none, and keeps what it writes in the user's cache instead.
IN_CHECKOUT = (PROJECT_ROOT / "pyproject.toml").is_file()
USER_CACHE = Path.home() / ".cache" / "cpdagthink"
# The commands that read the checkout's notebooks and _toc.yml; a package install runs every other one. Said in
# these words by `cpdagthink --help` and by the error of such a command run without a checkout, nowhere else.
CHECKOUT_COMMANDS = ("book", "plan", "render")
NEEDS_CHECKOUT = (f"{', '.join(CHECKOUT_COMMANDS[:-1])} and {CHECKOUT_COMMANDS[-1]} read the book's notebooks and "
                  "_toc.yml, so they need a checkout of the repository (clone it and run them inside the clone); "
                  "every other command works from a package install (pip install .)")
ENV_OUTPUTS = "CPDAGTHINK_OUTPUTS"
# Run records, caches and generated sets: anchored to the project (or $CPDAGTHINK_OUTPUTS), never to the
# working directory, so a command run from elsewhere finds the same cache instead of redoing every call.
OUTPUTS_ROOT = Path(os.environ.get(ENV_OUTPUTS) or (PROJECT_ROOT / "outputs" if IN_CHECKOUT else USER_CACHE)
                    ).expanduser().resolve()

# The files the package ships (package data, in the wheel too), read through importlib.resources so that an
# installed package needs no checkout. The checkout's prompts/, data/graphs/ and data/paper_reported.csv are
# links to these, so the files a user edits are the ones read.
PACKAGE_FILES: Traversable = files(__package__)
PROMPTS = PACKAGE_FILES / "prompts"
GRAPHS = PACKAGE_FILES / "data" / "graphs"
PAPER_REPORTED = PACKAGE_FILES / "data" / "paper_reported.csv"
