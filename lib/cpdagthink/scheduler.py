"""A grid's group job ends with the Snakemake that started it.

The Snakefile names its own process in ``$CPDAGTHINK_SCHEDULER_PID``; ``cpdagthink plan --group --execute``
watches that process and stops as on SIGTERM when it ends. Its own module because both the command line (which
watches) and the workflow (whose Snakefile sets the variable) use it, and the workflow reads the command line.
"""

from __future__ import annotations

import os
import select
import signal
import threading
import time

from .files import alive

__all__ = ["ENV_SCHEDULER", "stop_with_scheduler"]

# The Snakemake process that runs a group job's shell (set by the Snakefile in every Snakemake that reads it).
ENV_SCHEDULER = "CPDAGTHINK_SCHEDULER_PID"


def stop_with_scheduler() -> None:
    """End this process as on SIGTERM (its run stops within seconds, every finished record kept) when the
    Snakemake process named by ``$CPDAGTHINK_SCHEDULER_PID`` ends: a group job whose Snakemake was killed (even
    ``kill -9``, which lets it stop nothing) does not run on as an orphan holding its run folders and the
    directory. Nothing when the variable is unset (a job run by hand)."""
    pid = os.environ.get(ENV_SCHEDULER, "")
    if not pid.isdigit():
        return
    try:
        handle = os.pidfd_open(int(pid))  # Linux: readable once the process has ended, whatever reuses its pid
    except ProcessLookupError:
        os.kill(os.getpid(), signal.SIGTERM)
        return
    except (AttributeError, OSError):  # no pidfd: ask once a second whether the process still exists
        handle = None

    def watch() -> None:
        if handle is not None:
            select.select([handle], [], [])
        else:
            while alive(int(pid)):
                time.sleep(1)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="stop-with-scheduler", daemon=True).start()
