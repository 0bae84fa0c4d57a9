"""Where an OpenAI-compatible backend sends its requests, with which key, and how both are kept out of records.

Each endpoint gets its own key, handed to its client only. A ``base_url`` with a password
(``http://user:KEY@host``) sends that key to that URL only. Otherwise OpenAI's own host gets the variable
``api_key_env`` (``OPENAI_API_KEY`` when not named), and any other host gets a named ``api_key_env`` only: the
environment's OpenAI key never reaches a proxy or server it was not named for (a server with no key gets the
placeholder :data:`NO_KEY`). URLs are recorded without credentials (:func:`public_url`), and error bodies are
stored with ``Authorization``/``api-key``/bearer values redacted (:func:`redact`).
"""

from __future__ import annotations

import os
import re
from typing import Annotated, Any, Sequence

from pydantic import AfterValidator
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

from ...credentials import check_url, is_secret_query_key, with_credentials
from ..base import BackendError

OPENAI_URL = "https://api.openai.com/v1"
OPENAI_HOST = "api.openai.com"
DEFAULT_KEY_ENV = "OPENAI_API_KEY"
# What a host without a key is sent: the client needs some string, servers without auth ignore it, and it is no secret.
NO_KEY = "no-key"

_SECRET_PATTERNS = (
    # header lines and JSON fields: Authorization / api-key / x-api-key, then the value
    re.compile(r"""(?i)(["']?(?:authorization|proxy-authorization|x-api-key|api[-_]key)["']?\s*[:=]\s*["']?)[^"',\s}]+(?:\s+[^"',\s}]+)?"""),
    re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{6,}"),
    re.compile(r"\bsk-[A-Za-z0-9_-]{8,}"),
    re.compile(r"(?i)(\b[a-z][a-z0-9+.-]*://)[^/@\s:]*:[^/@\s]*@"),  # URL userinfo
)


def public_url(url: str | None) -> str:
    """``url`` as it may be recorded: no user name or password, secret-looking query values redacted."""
    if url is None:
        return OPENAI_URL
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = host + (f":{parts.port}" if parts.port else "")
    query = urlencode([(k, "REDACTED" if is_secret_query_key(k) else v)
                       for k, v in parse_qsl(parts.query, keep_blank_values=True)])
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def key_variable(url: str | None, api_key_env: str | None = None) -> str | None:
    """The environment variable whose value is sent to ``url`` (None: OpenAI's default endpoint) when the URL
    holds no key of its own: ``api_key_env`` where the caller named one; else ``OPENAI_API_KEY`` for OpenAI's
    own host only (the environment's OpenAI key is meant for OpenAI), and None for any other host."""
    if api_key_env:
        return api_key_env
    return DEFAULT_KEY_ENV if url is None or urlsplit(url).hostname == OPENAI_HOST else None


def key_for(url: str | None, api_key_env: str | None = None) -> str | None:
    """The key sent to ``url``, or None where none is given: the URL's own password (percent-decoded), which
    goes to that URL only, else the value of :func:`key_variable`'s variable."""
    password = None if url is None else urlsplit(url).password
    if password:
        return unquote(password)
    variable = key_variable(url, api_key_env)
    return (os.environ.get(variable) or None) if variable else None


def public_url_for_client(url: str) -> str:
    """The URL the HTTP client gets: without user info (the password, if any, is sent as the bearer key;
    httpx would otherwise replace the bearer header with Basic auth)."""
    parts = urlsplit(url)
    netloc = parts.netloc.rpartition("@")[2]
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def redact(text: str, secrets: Sequence[str] = ()) -> str:
    """``text`` with credentials removed: known secret values, auth header values, bearer tokens, API-key
    shaped strings and URL passwords."""
    for secret in secrets:
        if secret and len(secret) >= 4:
            text = text.replace(secret, "REDACTED")
    for pattern in _SECRET_PATTERNS:
        text = pattern.sub(lambda m: (m.group(1) if m.groups() else "") + "REDACTED", text)
    return text


def http_urls(base_url: Any) -> Any:
    """``base_url`` as given, once each URL it names is an ``http://`` or ``https://`` URL with a host (None:
    OpenAI's default endpoint). A message never repeats the URL, nor its scheme (a key pasted where the URL
    should be reads as one): it may hold a secret."""
    urls = [] if base_url is None else [base_url] if isinstance(base_url, str) else list(base_url)
    if base_url is not None and not urls:
        raise ValueError("base_url names no endpoint")
    for url in urls:
        if not url.strip():
            raise ValueError("base_url is empty: give the server's URL, e.g. http://127.0.0.1:8000/v1")
        parts = urlsplit(url.strip())
        if parts.scheme.lower() not in ("http", "https") or not parts.netloc.rpartition("@")[2]:
            raise ValueError("base_url must be an http:// or https:// URL with a host, e.g. "
                             "http://127.0.0.1:8000/v1 (the URL given is not repeated: it may hold a key)")
    return base_url


# The ``base_url`` option: None (api.openai.com), one URL, or a list (round-robin), each http(s).
Endpoints = Annotated[str | Sequence[str] | None, AfterValidator(http_urls)]


def endpoint_urls(base_url: str | Sequence[str] | None) -> list[str | None]:
    """The endpoints a ``base_url`` option names (None: OpenAI's default endpoint), each with the key a front
    door stripped from it put back (:mod:`cpdagthink.credentials`) and checked to hold no unreadable or
    query-string credential."""
    http_urls(base_url)
    urls: list[str | None] = [None] if base_url is None else [base_url] if isinstance(base_url, str) else list(base_url)
    urls = [None if u is None else with_credentials(u) for u in urls]
    for url in urls:
        if url is not None:
            check_url(url)
    return urls


def endpoint_keys(urls: Sequence[str | None], api_key_env: str | None) -> list[str | None]:
    """The key for each of ``urls`` (:func:`key_for`); raises :class:`BackendError` where an endpoint's key
    variable is unset or empty."""
    keys = [key_for(u, api_key_env) for u in urls]
    for url, key in zip(urls, keys):
        variable = key_variable(url, api_key_env)
        if key is None and variable:
            raise BackendError(f"{public_url(url)} needs a key in the environment variable {variable}, which "
                               "is unset or empty")
    return keys
