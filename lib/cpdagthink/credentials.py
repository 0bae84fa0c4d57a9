"""Credentials inside endpoint URLs (``http://user:KEY@host/v1``), kept out of every artefact.

Every front door passes its URLs through :func:`strip_credentials` before a URL is stored (``config.json``),
printed, or handed to papermill (executed notebooks, the published book). The user info is kept only in this
process's environment (:data:`ENV_CREDENTIALS`, a JSON object from the bare URL to its ``user:password``),
which notebook kernels inherit; the ``openai`` backend puts it back with :func:`with_credentials` when it
builds its HTTP client, so the key travels in memory and the environment only.
"""

from __future__ import annotations

import json
import os
from urllib.parse import urlsplit, urlunsplit

ENV_CREDENTIALS = "CPDAGTHINK_URL_CREDENTIALS"


def _known() -> dict[str, str]:
    try:
        known = json.loads(os.environ.get(ENV_CREDENTIALS) or "{}")
    except json.JSONDecodeError:
        return {}
    return known if isinstance(known, dict) else {}


def strip_credentials(url: str) -> str:
    """``url`` without its user info; the user info, if any, is remembered in the environment under the
    bare URL for :func:`with_credentials`."""
    parts = urlsplit(url)
    userinfo, at, host = parts.netloc.rpartition("@")
    if not at:
        return url
    bare = urlunsplit((parts.scheme, host, parts.path, parts.query, parts.fragment))
    os.environ[ENV_CREDENTIALS] = json.dumps({**_known(), bare: userinfo})
    return bare


def with_credentials(url: str) -> str:
    """``url`` with the user info :func:`strip_credentials` took from it put back (unchanged otherwise)."""
    parts = urlsplit(url)
    userinfo = None if "@" in parts.netloc else _known().get(url)
    if userinfo is None:
        return url
    return urlunsplit((parts.scheme, f"{userinfo}@{parts.netloc}", parts.path, parts.query, parts.fragment))
