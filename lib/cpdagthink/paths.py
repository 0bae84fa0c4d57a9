"""Where the project's files are: the checkout, and the outputs folder (runs, caches, generated sets).

Every module that needs a location takes it from here, so moving a module within the package never
changes where it reads or writes.
"""

from __future__ import annotations

import os
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[2]
ENV_OUTPUTS = "CPDAGTHINK_OUTPUTS"
# Run records, caches and generated sets: anchored to the project (or $CPDAGTHINK_OUTPUTS), never to the
# working directory, so a command run from elsewhere finds the same cache instead of redoing every call.
OUTPUTS_ROOT = Path(os.environ.get(ENV_OUTPUTS) or PROJECT_ROOT / "outputs").expanduser().resolve()
