"""Whether a run folder's records can be resumed by a run: the same run (its identity), the same record schema,
the same data. A folder that holds another's records is refused with what differs, so that two runs never mix."""

from __future__ import annotations

from typing import Any

from ..causal.instance import Instance
from ..errors import CpdagthinkError
from .records import SCHEMA_VERSION, RunMetadata, RunRecord
from .runfolder import METADATA, RunFolder, RunFolderError, difference, read_metadata


class RunMismatchError(CpdagthinkError, ValueError):
    """An output folder already holds records of a run configured differently from the one asked for."""


# What a changed ``served_weights`` means, said where a folder is refused for it.
_OTHER_WEIGHTS = ("; the server now serves other weights under the same model name, so its answers are another "
                  "model's (set the backend option revision to tell models served under one name apart)")


def check_resumable(folder: RunFolder, metadata: RunMetadata, records: list[RunRecord],
                     instances: list[Instance]) -> None:
    """Refuse to append to records of another run (:meth:`RunMetadata.identity`: another condition, prompt,
    probe, model, computed option or decoding, or another backend computing it), of another record schema, or
    of other data (a row of the same id but other content: another file of the same name, an edited CSV)."""
    if not records:
        return
    content = {i.id: i.content_sha256 for i in instances}
    other = [r.id for r in records if r.id in content and r.content_sha256 != content[r.id]]
    if other:
        raise RunMismatchError(
            f"{folder.path} holds records of other data: {len(other)} row(s) with the same id but other content "
            f"(first: {other[0]}), e.g. another file of the same name or an edited CSV. Choose another output folder.")
    try:
        old = read_metadata(folder.path)
    except RunFolderError:
        old = None  # unreadable: its records cannot be told to be this run's
    if old is None or old.record_schema != SCHEMA_VERSION:
        held = (folder.read_json(METADATA) or {}).get("record_schema", 1)
        raise RunMismatchError(
            f"{folder.path} holds {len(records)} records of another version of cpdagthink (record schema "
            f"{held}, this one writes {SCHEMA_VERSION}); choose another output folder.")
    new, held = metadata.identity(), old.identity()
    differs = [k for k in new if held.get(k) != new[k]]
    if differs:
        raise RunMismatchError(
            f"{folder.path} already holds {len(records)} records of a run with a different {', '.join(differs)} "
            f"({_differences(new, held, differs)}); resuming would mix the two. Choose another output folder or remove this one."
        )


def _differences(new: dict[str, Any], held: dict[str, Any], differs: list[str]) -> str:
    """Where a folder's run identity ``held`` differs from the ``new`` one, field by field, and what a change
    of the weights a server says it serves means."""
    details = "; ".join(difference(new[k], held.get(k), k) for k in differs)
    if (new.get("backend") or {}).get("served_weights") != (held.get("backend") or {}).get("served_weights"):
        details += _OTHER_WEIGHTS
    return details
