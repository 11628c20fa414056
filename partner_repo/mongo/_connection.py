"""One connection policy: the client options every connection gets, whoever opens it.

:func:`partner_repo.connect` and :func:`partner_repo.connect_from_settings` (the CLI too) build their
client's options here, so a URI means the same thing whichever door it comes through. The order of
precedence, highest first: an option the URI sets (``?serverSelectionTimeoutMS=2000`` is honoured, never
overridden), then an option passed in code (``connect(uri, maxPoolSize=10)``) or a ``PARTNER_REPO_*``
setting, then :data:`DEFAULTS`.

The defaults are the ones a production replica set wants; the operation timeout (``timeoutMS``, PyMongo's
client-side operation timeout) bounds every call, retries included, so no library call hangs forever on a
frozen server; ``0`` lifts it (say, for ``partner-repo migrate`` building an index on a big collection).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qsl

from partner_repo.errors import InvalidInput

DEFAULTS: dict[str, Any] = {
    "w": "majority",
    "wTimeoutMS": 10_000,
    "retryWrites": True,
    "retryReads": True,
    "serverSelectionTimeoutMS": 5_000,
    "connectTimeoutMS": 10_000,
    "timeoutMS": 60_000,
    "maxPoolSize": 100,
    "appname": "partner-repo",
}
"""The client options of every connection (docs/operations.md's settings table lists them, one row each)."""

FIXED: dict[str, Any] = {"tz_aware": True}
"""Options the library needs and nobody overrides: stored times come back as aware UTC datetimes."""

DATABASE_NAME_FORBIDDEN = '/\\. "$\x00'
"""Characters MongoDB refuses in a database name (on every platform)."""

MAX_DATABASE_NAME_BYTES = 63


def uri_option_names(uri: str) -> set[str]:
    """The (lower-cased) option names a connection string sets in its query part."""
    _, _, query = uri.partition("?")
    return {name.lower() for name, _ in parse_qsl(query, keep_blank_values=True)}


def client_options(uri: str, given: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The options to open ``uri`` with: :data:`DEFAULTS` under ``given`` (None values dropped), minus every
    option the URI sets itself (the URI wins), plus :data:`FIXED`."""
    chosen = {**DEFAULTS, **{name: value for name, value in (given or {}).items() if value is not None}}
    if chosen.get("timeoutMS") == 0:  # no operation timeout: the driver's own default, and wTimeoutMS applies
        del chosen["timeoutMS"]
    in_uri = uri_option_names(uri)
    options = {name: value for name, value in chosen.items() if name.lower() not in in_uri}
    return {**options, **FIXED}


def database_name_problem(name: object) -> str | None:
    """Why MongoDB would refuse ``name`` as a database name, or None."""
    if not isinstance(name, str):
        return f"a database name must be a string, not {type(name).__name__}"
    if not name:
        return "a database name must not be empty"
    try:
        size = len(name.encode("utf-8"))
    except UnicodeEncodeError:
        return "a database name must be valid Unicode text (it holds a lone surrogate)"
    bad = sorted({c for c in name if c in DATABASE_NAME_FORBIDDEN})
    if bad:
        shown = " ".join(repr(c) for c in bad)
        return f"not a usable database name: it must not contain {shown}"
    if size > MAX_DATABASE_NAME_BYTES:
        return f"a database name must be at most {MAX_DATABASE_NAME_BYTES} bytes long, not {size}"
    return None


def require_database_name(name: object) -> str:
    """``name`` if MongoDB accepts it as a database name, else :class:`InvalidInput` saying why (one line)."""
    problem = database_name_problem(name)
    if problem is not None:
        raise InvalidInput(f"db_name: {problem}")
    assert isinstance(name, str)
    return name


__all__ = [
    "DEFAULTS",
    "FIXED",
    "client_options",
    "database_name_problem",
    "require_database_name",
    "uri_option_names",
]
