"""One connection policy: the client options every connection gets, whoever opens it.

:func:`partner_repo.connect` and :func:`partner_repo.connect_from_settings` (the CLI too) build their
client's options here, so a URI means the same thing whichever door it comes through. The order of
precedence, highest first: an option the URI sets (``?serverSelectionTimeoutMS=2000`` is honoured, never
overridden), then an option passed in code (``connect(uri, maxPoolSize=10)``) or a ``PARTNER_REPO_*``
setting, then :data:`DEFAULTS`.

The defaults are the ones a production replica set wants; the operation timeout (``timeoutMS``, PyMongo's
client-side operation timeout) bounds every call, retries included, so no library call hangs forever on a
frozen server; ``0`` lifts it (say, for ``partner-repo migrate`` building an index on a big collection).

An option the driver cannot use (a name it does not know, a value it cannot read) is ignored, as MongoDB's
connection string specification has every driver do, so one connection string serves services written in
any language: :func:`ignored_uri_options` names each one with the reason, :mod:`partner_repo.mongo._database`
logs it (one WARNING line), and the library's default for it stays in place. The database a URI names in its
path (``mongodb://host/NAME``, :func:`uri_database`) is the database when the caller names none.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qsl, unquote_plus

from pymongo import uri_parser
from pymongo.errors import ConfigurationError

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

DEFAULT_DATABASE = "partner"
"""The database when neither the caller (``db_name``, ``--db``, ``PARTNER_REPO_DB``) nor the URI names one."""

URI_SCHEMES = ("mongodb://", "mongodb+srv://")


def uri_option_names(uri: str) -> set[str]:
    """The (lower-cased) option names a connection string sets in its query part."""
    _, _, query = uri.partition("?")
    return {name.lower() for name, _ in parse_qsl(query, keep_blank_values=True)}


def client_options(uri: str, given: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The options to open ``uri`` with: :data:`DEFAULTS` under ``given`` (None values dropped), minus every
    option the URI sets itself (the URI wins; an option the driver ignores sets nothing), plus
    :data:`FIXED`."""
    chosen = {**DEFAULTS, **{name: value for name, value in (given or {}).items() if value is not None}}
    if chosen.get("timeoutMS") == 0:  # no operation timeout: the driver's own default, and wTimeoutMS applies
        del chosen["timeoutMS"]
    in_uri = uri_option_names(uri) - {name.lower() for name in ignored_uri_options(uri)}
    options = {name: value for name, value in chosen.items() if name.lower() not in in_uri}
    return {**options, **FIXED}


def ignored_uri_options(uri: str) -> dict[str, str]:
    """The options of ``uri`` the driver ignores (an unknown name, a value it cannot read), each with why, in
    the URI's order. The driver's own warning names no option (the value might be a secret), so each option
    is read on its own, through the driver's parser."""
    return {name: _reason(text) for name, text in driver_refusals(uri).items()}


def driver_refusals(uri: str) -> dict[str, str]:
    """The driver's own words (the text of the warning it gives while parsing ``uri``) for each option of
    ``uri`` it ignores."""
    refused: dict[str, str] = {}
    for component in _query_components(uri):
        name, _, _ = component.partition("=")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a deprecation: the driver warns again when it parses the URI
            try:
                uri_parser.split_options(component, validate=True, warn=False)
            except (ConfigurationError, ValueError, TypeError) as exc:
                refused[unquote_plus(name)] = str(exc)
    return refused


def uri_database(uri: str) -> str | None:
    """The database ``uri`` names in its path (``mongodb://host/NAME?...``), read as the driver reads it (a
    ``NAME.collection`` path names the database ``NAME``); None when it names none."""
    if not uri.startswith(URI_SCHEMES):
        return None
    hosts_and_path = uri.split("://", 1)[1].partition("?")[0]
    if "/" not in hosts_and_path:
        return None
    name = unquote_plus(hosts_and_path.partition("/")[2]).partition(".")[0]
    return name or None


def _query_components(uri: str) -> list[str]:
    """The ``name=value`` components of the query, as written (``&`` or ``;`` between them)."""
    _, _, query = uri.partition("?")
    separator = ";" if ";" in query and "&" not in query else "&"
    return [component for component in query.split(separator) if "=" in component]


def _reason(driver_text: str) -> str:
    """The driver's refusal of one option as the second half of a sentence naming it."""
    text = driver_text.replace(" Refer to docstring.", "").strip()
    if text.startswith("Unknown option."):
        suggestion = text.removeprefix("Unknown option.").strip()
        return "no such option" + (f"; {suggestion[:1].lower()}{suggestion[1:]}" if suggestion else "")
    return text[:1].lower() + text[1:]


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
    "DEFAULT_DATABASE",
    "FIXED",
    "client_options",
    "database_name_problem",
    "driver_refusals",
    "ignored_uri_options",
    "require_database_name",
    "uri_database",
    "uri_option_names",
]
