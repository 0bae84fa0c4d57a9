"""Credentials inside endpoint URLs (``http://user:KEY@host/v1``), kept out of every artefact.

Every front door passes its URLs through :func:`strip_credentials` before a URL is stored (``config.json``),
printed, or handed to papermill (executed notebooks, the published book). The user info is kept only in this
process's environment (:data:`ENV_CREDENTIALS`, a JSON object from the bare URL to its ``user:password``),
which notebook kernels inherit; the ``openai`` backend puts it back with :func:`with_credentials` when it
builds its HTTP client, so the key travels in memory and the environment only.

A secret in a URL's query string (``?api-key=...``) or user info that cannot be read (a key holding ``/``,
``?``, ``#`` or ``@`` not percent-encoded, which moves the rest of the key into the path) is refused by
:func:`check_url` with a message that holds none of the URL.
"""

from __future__ import annotations

import json
import os
from urllib.parse import SplitResult, parse_qsl, urlsplit, urlunsplit

from .errors import CpdagthinkError

ENV_CREDENTIALS = "CPDAGTHINK_URL_CREDENTIALS"
# Query parameter names whose values are credentials (compared lower-case, '-' read as '_').
SECRET_QUERY_KEYS = frozenset({"key", "api_key", "apikey", "token", "access_token", "auth", "sig", "signature",
                               "password", "secret", "client_secret", "x_api_key", "subscription_key"})
_WHERE_KEYS_GO = ("give the key as the URL's password (http://user:KEY@host/v1, percent-encoded), or in an "
                  "environment variable named with --api-key-env")


class URLCredentialsError(CpdagthinkError, ValueError):
    """A URL whose credentials would be stored or printed, or could not be read; the message quotes none of it."""


def is_secret_query_key(name: str) -> bool:
    """Whether a query parameter called ``name`` carries a credential."""
    return name.lower().replace("-", "_") in SECRET_QUERY_KEYS


def check_url(url: str) -> SplitResult:
    """``url`` split, once it is known to hold no credential in its query string and user info that reads as
    such. Raises :class:`URLCredentialsError` (naming no part of the URL) otherwise."""
    parts = urlsplit(url)
    try:
        parts.port  # noqa: B018 - raises on a netloc cut short by a '/', '?' or '#' inside a key
    except ValueError:
        raise URLCredentialsError(
            "an endpoint URL's host and port cannot be read; if it holds a key, percent-encode the key ('/' as "
            "%2F, '?' as %3F, '#' as %23, '@' as %40)") from None
    if "@" in url.partition("://")[2][len(parts.netloc):]:
        raise URLCredentialsError(
            "an endpoint URL has an '@' after its host: percent-encode the key in its user info ('/' as %2F, "
            "'?' as %3F, '#' as %23, '@' as %40)")
    secret = sorted({k for k, _ in parse_qsl(parts.query, keep_blank_values=True) if is_secret_query_key(k)})
    if secret:
        raise URLCredentialsError(
            f"an endpoint URL carries a credential in its query string ({', '.join(secret)}), which would be "
            f"stored and printed with the URL: {_WHERE_KEYS_GO}")
    return parts


def _known() -> dict[str, str]:
    try:
        known = json.loads(os.environ.get(ENV_CREDENTIALS) or "{}")
    except json.JSONDecodeError:
        return {}
    return known if isinstance(known, dict) else {}


def strip_credentials(url: str) -> str:
    """``url`` without its user info; the user info, if any, is remembered in the environment under the
    bare URL for :func:`with_credentials`. A URL :func:`check_url` refuses raises :class:`URLCredentialsError`."""
    parts = check_url(url)
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
