"""Opening a database, binding the documents to it, and closing it.

Every repository, service and query class is handed the database it works on (``Repo(database)``); nothing
reads a global connection. The type they take is structural (``MongoDatabase``): a Motor database,
mongomock-motor's in-memory one, or a test wrapper around either.

:func:`connect` opens one: ``async with connect(uri) as database:`` closes its client at the end, and
``database = await connect(uri)`` leaves that to :func:`close_database`. An application that runs its own
``init_beanie`` registers :data:`DOCUMENT_MODELS` there and creates the indexes with :func:`ensure_indexes`
(or leaves them to ``partner-repo migrate``).
"""

from __future__ import annotations

import warnings
from collections.abc import Coroutine, Generator
from pathlib import Path
from types import TracebackType
from typing import Any, TypeAlias

import pymongo
from beanie import init_beanie
from pymongo.errors import ConfigurationError, InvalidURI, OperationFailure, PyMongoError

from partner_repo.errors import ConnectionFailed, InvalidInput
from partner_repo.models import MemoryCore, MemoryUnit
from partner_repo.mongo import _driver as driver
from partner_repo.mongo._connection import (
    DEFAULT_DATABASE,
    client_options,
    database_name_problem,
    driver_refusals,
    ignored_uri_options,
    require_database_name,
    uri_database,
)
from partner_repo.mongo._indexes import ALL_INDEXES
from partner_repo.mongo._masking import library_logger, mask_uri, remember_secrets, scrub
from partner_repo.mongo._topology import topology_of

log = library_logger("partner_repo.database")  # its 0.4 name, which operators filter on

MongoDatabase: TypeAlias = Any
"""A database of either driver (PyMongo's async API or Motor), the in-memory backend's, or anything with the
same async collection interface (see :mod:`partner_repo.mongo._driver`)."""

Database: TypeAlias = Any
"""What :func:`connect` gives: the installed stack's database (``AsyncDatabase`` or ``AsyncIOMotorDatabase``;
on the in-memory backend, one with the same interface)."""

AUTHENTICATION_FAILURES = frozenset({11, 18})
"""The server's codes for credentials it refused: UserNotFound, AuthenticationFailed."""

DOCUMENT_MODELS: list[type[Any]] = [MemoryUnit, MemoryCore]
"""The Beanie documents of the library, for an application's own ``init_beanie(document_models=[...])``.

Register them with ``skip_indexes=True`` and call :func:`ensure_indexes`: Beanie would create only these two
documents' indexes (the library also indexes listener checkpoints, dead letters and erasures, which are not
documents), and mongomock's batch index creation drops partial filters."""


async def init_repository(database: MongoDatabase, *, create_indexes: bool = True) -> MongoDatabase:
    """Register the documents with Beanie on ``database`` and (unless told not to) create the indexes.

    Services that leave index creation to migrations pass ``create_indexes=False``.
    """
    await init_beanie(database=database, document_models=DOCUMENT_MODELS, skip_indexes=True)
    if create_indexes:
        await ensure_indexes(database)
    return database


async def ensure_indexes(database: MongoDatabase) -> None:
    """Create every index the library relies on (``partner_repo.mongo._indexes``), those that exist left as
    they are.

    Each index is created with its own ``createIndexes`` (idempotent): mongomock's batch form drops partial
    filter expressions. On a sharded cluster an index a sharded collection cannot have is never requested
    (:mod:`partner_repo.mongo._topology`; logged instead), so a process starts on a collection sharded first.
    """
    topology = await topology_of(database)
    for collection, indexes in ALL_INDEXES.items():
        for index in indexes:
            reason = topology.refusal(collection, index.document)
            if reason is not None:
                log.warning("%s: not creating it on %s (sharded)", reason, collection)
                continue
            options = dict(index.document)
            keys = list(options.pop("key").items())
            await database[collection].create_index(keys, **options)


def in_memory_database(db_name: str = DEFAULT_DATABASE) -> MongoDatabase:
    """A fresh embedded in-memory database (mongomock, in the installed stack's shape): no server, nothing
    persists."""
    return driver.in_memory_client(tz_aware=True)[require_database_name(db_name)]


class Connecting:
    """What :func:`connect` returns: ``await`` it for the database, or enter it (``async with``) to have the
    database's client closed when the block ends, however it ends (unless the client is the caller's own)."""

    __slots__ = ("_database", "_opening", "_owned")

    def __init__(self, opening: Coroutine[Any, Any, Database], *, owned: bool = True) -> None:
        self._opening = opening
        self._owned = owned
        self._database: Database | None = None

    def __await__(self) -> Generator[Any, None, Database]:
        return self._opening.__await__()

    async def __aenter__(self) -> Database:
        self._database = await self._opening
        return self._database

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._database is not None and self._owned:
            await close_database(self._database)


def connect(
    uri: str | Any | None = None,
    db_name: str | None = None,
    *,
    create_indexes: bool = True,
    server_selection_timeout_ms: int | None = None,
    **client_options: Any,
) -> Connecting:
    """A ready database: the in-memory backend when ``uri`` is None, the MongoDB at ``uri`` otherwise.

    ``database = await connect(uri)`` returns it (close it with :func:`close_database` when done);
    ``async with connect(uri) as database:`` closes it when the block ends.

    ``uri`` may also be the application's own client or database, of either driver: the library registers
    its documents there (and creates its indexes) and leaves closing it to the application.

    The client gets the one connection policy (:mod:`partner_repo.mongo._connection`): its defaults, under the
    ``client_options`` given here (``server_selection_timeout_ms`` is ``serverSelectionTimeoutMS``), under
    whatever the URI itself sets; an option of the URI the driver ignores is logged (one WARNING naming it).
    The database is ``db_name``, else the one the URI names in its path (``mongodb://host/NAME``), else
    ``partner``; a bad one is :class:`InvalidInput`. A server that cannot be reached, or a URI the driver
    refuses, raises :class:`ConnectionFailed` naming the host and the driver's reason; whatever could be a
    credential is masked (:mod:`partner_repo.mongo._masking`), in the URI and in the driver's text, and the
    secrets of ``uri`` are masked in every later :func:`~partner_repo.mongo._masking.scrub`.
    """
    if uri is not None and not isinstance(uri, str):
        return Connecting(_adopt(uri, db_name or DEFAULT_DATABASE, create_indexes), owned=False)
    if db_name is not None:
        require_database_name(db_name)
    if server_selection_timeout_ms is not None:
        client_options["serverSelectionTimeoutMS"] = server_selection_timeout_ms
    return Connecting(_connect(uri, db_name, create_indexes, client_options))


async def close_database(database: MongoDatabase) -> None:
    """Close the client behind ``database``: its connection pool and server monitors (every database and
    collection of that client stops working). Closing again does nothing more."""
    client = driver.client_of(database)
    if client is not None:
        await driver.close_client(client)


async def _adopt(given: Any, db_name: str, create_indexes: bool) -> Database:
    """The application's own client (its database ``db_name``) or database, registered and indexed."""
    if (problem := driver.unusable_with_installed_beanie(given)) is not None:
        raise InvalidInput(f"connect(): {problem}")
    if driver.is_client(given):
        database = given[require_database_name(db_name)]
    elif driver.is_database(given):
        database = given
    else:
        raise InvalidInput(f"connect() takes a URI, a client or a database, not {type(given).__name__}")
    ready: Database = await init_repository(database, create_indexes=create_indexes)
    return ready


async def _connect(
    uri: str | None, db_name: str | None, create_indexes: bool, given: dict[str, Any]
) -> Database:
    if uri is None:
        database = in_memory_database(db_name or DEFAULT_DATABASE)
    else:
        remember_secrets(uri)
        name = db_name or _database_of(uri)
        client = _client(uri, given)
        database = client[name]
        try:
            # With an operation timeout the driver would wait that long to select a server; reaching it
            # takes no longer than the server selection timeout (the URI's, when it sets one).
            with pymongo.timeout(client.options.server_selection_timeout):
                await database.command("ping")
        except PyMongoError as exc:
            await driver.close_client(client)
            raise ConnectionFailed(_not_connected(uri, exc)) from None
        except ValueError as exc:  # the driver refuses the credentials before sending them (SASLprep)
            await driver.close_client(client)
            raise ConnectionFailed(
                f"cannot authenticate to MongoDB at {mask_uri(uri)}: the user name or password is unusable "
                f"({scrub(driver.first_line(exc), uri)}); check that it is UTF-8 text without control "
                "characters"
            ) from None
    ready: Database = await init_repository(database, create_indexes=create_indexes)
    return ready


def _database_of(uri: str) -> str:
    """The database the URI names in its path, else ``partner``; :class:`InvalidInput` for one MongoDB would
    refuse (the driver accepts some of those in a URI)."""
    name = uri_database(uri)
    if name is None:
        return DEFAULT_DATABASE
    if (problem := database_name_problem(name)) is not None:
        raise InvalidInput(f"the database {mask_uri(uri)} names in its path: {problem}")
    return name


def _client(uri: str, given: dict[str, Any]) -> Any:
    """The driver's client, or :class:`ConnectionFailed` with the driver's reason, scrubbed (it may quote the
    URI).

    The driver's warnings while it parses the URI are never Python warnings: each option it ignores is one
    log line naming it (:func:`~partner_repo.mongo._connection.ignored_uri_options`), any other warning of the
    driver's (a repeated option) is logged scrubbed; none is said when the URI is refused anyway. A warning
    that is not the driver's goes on as it came.
    """
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            client = driver.new_client(uri, **client_options(uri, given))
        except (ConfigurationError, InvalidURI, ValueError, TypeError) as exc:
            raise ConnectionFailed(_unusable(uri, exc)) from None
    for name, reason in ignored_uri_options(uri).items():
        log.warning("MongoDB URI option %r is ignored: %s", name, scrub(reason, uri))
    said = set(driver_refusals(uri).values())
    for warning in caught:
        if not _parsing_the_uri(
            warning
        ):  # another's warning raised meanwhile (a socket the collector closed)
            warnings.warn_explicit(warning.message, warning.category, warning.filename, warning.lineno)
        elif str(warning.message) not in said:
            log.warning("MongoDB URI: %s", scrub(str(warning.message), uri))
    return client


def _parsing_the_uri(warning: warnings.WarningMessage) -> bool:
    """Whether ``warning`` is the driver's own, raised in its code while it read the URI (recording every
    warning raised meanwhile would log a stranger's, such as a ``ResourceWarning`` the garbage collector
    raises for a socket another test left open, as a URI warning)."""
    return issubclass(warning.category, UserWarning) and "pymongo" in Path(warning.filename).parts


def _unusable(uri: str, exc: BaseException) -> str:
    """Why the driver refused ``uri``, in its words (scrubbed); when the URI has no ``@`` and a "port" that is
    no number, that is masked and said to be possibly a password whose ``@host`` was forgotten."""
    reason = scrub(driver.first_line(exc), uri).rstrip(".")
    if "@" not in uri and _odd_port(uri):
        reason += " (masked: with no '@' in the URI, what follows a ':' there may be a password)"
    return f"unusable MongoDB URI {mask_uri(uri)}: {reason}"


def _odd_port(uri: str) -> bool:
    """Whether a host of ``uri`` has a "port" that is no number."""
    hosts = uri.partition("://")[2].partition("?")[0].partition("/")[0]
    ports = (host.rpartition("]")[2].partition(":")[2] for host in hosts.split(","))
    return any(port and not port.isdigit() for port in ports)


def _not_connected(uri: str, exc: PyMongoError) -> str:
    """Why connecting failed, in one line: authentication failed (the server's own message, once), the server
    refused the first command (its message), or it cannot be reached (the driver's first line)."""
    if isinstance(exc, OperationFailure):
        details = exc.details or {}
        message = scrub(str(details.get("errmsg") or driver.first_line(exc)).strip(), uri)
        name = details.get("codeName") or f"code {exc.code}"
        if exc.code in AUTHENTICATION_FAILURES:
            return (
                f"authentication failed at MongoDB {mask_uri(uri)}: the server says {message!r} ({name}); "
                "check the user name, the password and authSource"
            )
        return f"MongoDB at {mask_uri(uri)} refused to connect: the server says {message!r} ({name})"
    return f"cannot reach MongoDB at {mask_uri(uri)}: {scrub(driver.first_line(exc), uri)}"
