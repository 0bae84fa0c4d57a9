"""Writing a file so that a kill, a full disk or a second writer never leaves it half-written, and reading the
lines of a JSON Lines file as they were written.

The one atomic writer of the package: run folders (:mod:`cpdagthink.run.runfolder`), the call cache
(:mod:`cpdagthink.run.cache`) and the model files' records (:mod:`cpdagthink.backends.local.models`) all write through it.
"""

from __future__ import annotations

import os
import re
import secrets
from pathlib import Path

# A temporary file of :func:`write_atomic`: ``.<name>.<pid>-<8 hex>.tmp``, its writer's process id in its name.
_TEMPORARY = re.compile(r"\..+\.(\d+)-[0-9a-f]{8}\.tmp")


def write_atomic(path: Path, text: str, *, sync: bool = True) -> None:
    """Replace ``path`` (its folder made if missing) with ``text`` through a temporary file beside it, flushed
    to disk, and a rename: a kill leaves the old file or the new one, never half of either. Each writer has its
    own temporary file, so two processes writing the same entry at once cannot mix their bytes. A failed write
    (a full disk) removes its temporary file and raises the ``OSError`` for the caller to word.

    ``sync=False`` hands the bytes to the operating system without waiting for the disk (no ``fsync``): a killed
    process still loses nothing, but a power cut or a crash of the system may leave the new file empty or torn,
    which only a reader that catches such a file may accept (the call cache sets it aside and asks again)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}-{secrets.token_hex(4)}.tmp")  # :data:`_TEMPORARY`
    try:
        with temporary.open("x", encoding="utf-8") as handle:  # created here, with the usual permissions
            handle.write(text)
            handle.flush()
            if sync:
                os.fsync(handle.fileno())
        temporary.replace(path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def alive(pid: int) -> bool:
    """Whether a process of this id exists (one of another user's counts: its signal is refused, not unknown)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale_temporaries(folder: Path) -> list[Path]:
    """Remove the temporary files :func:`write_atomic` left in ``folder`` when its writer was killed before
    its rename (``kill -9``, a power cut): those whose writer's process no longer exists. A live writer's
    file is left alone, whoever it is. Returns the files removed."""
    removed = []
    for path in folder.glob(".*.tmp"):
        found = _TEMPORARY.fullmatch(path.name)
        if found and not alive(int(found.group(1))):
            path.unlink(missing_ok=True)
            removed.append(path)
    return removed


def jsonl_lines(text: str) -> list[str]:
    """The lines of a JSON Lines text, split at ``\\n`` only: ``str.splitlines`` also splits at U+2028, U+2029,
    U+0085 and other characters that JSON leaves as they are inside a string, so a model's text holding one
    would cut its line in two, and the record, cache entry or batch answer on it would be lost."""
    return text.split("\n")
