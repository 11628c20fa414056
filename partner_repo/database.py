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

import inspect
import warnings
from collections.abc import Coroutine, Generator
from types import TracebackType
from typing import Any, TypeAlias

from beanie import init_beanie
from motor.motor_asyncio import AsyncIOMotorClient, AsyncIOMotorDatabase
from pymongo.errors import ConfigurationError, InvalidURI, PyMongoError

from partner_repo.errors import ConnectionFailed
from partner_repo.indexes import ALL_INDEXES
from partner_repo.masking import mask_uri as mask_uri  # its home before partner_repo.masking
from partner_repo.masking import remember_secrets, scrub
from partner_repo.models import MemoryCore, MemoryUnit

MongoDatabase: TypeAlias = Any
"""A Motor database (real or mongomock-motor's), or anything with the same async collection interface."""

Database: TypeAlias = AsyncIOMotorDatabase[dict[str, Any]]
"""What :func:`connect` gives: a Motor database (on the in-memory backend, mongomock-motor's, which has the
same interface)."""

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
    """Create every index the library relies on (``partner_repo.indexes``), those that exist left as they are.

    Each index is created with its own ``createIndexes`` (idempotent): mongomock's batch form drops partial
    filter expressions.
    """
    for collection, indexes in ALL_INDEXES.items():
        for index in indexes:
            options = dict(index.document)
            keys = list(options.pop("key").items())
            await database[collection].create_index(keys, **options)


def in_memory_database(db_name: str = "partner") -> MongoDatabase:
    """A fresh embedded in-memory database (mongomock-motor): no server, nothing persists."""
    from mongomock_motor import AsyncMongoMockClient

    return AsyncMongoMockClient(tz_aware=True)[db_name]


class Connecting:
    """What :func:`connect` returns: ``await`` it for the database, or enter it (``async with``) to have the
    database's client closed when the block ends, however it ends."""

    __slots__ = ("_database", "_opening")

    def __init__(self, opening: Coroutine[Any, Any, Database]) -> None:
        self._opening = opening
        self._database: Database | None = None

    def __await__(self) -> Generator[Any, None, Database]:
        return self._opening.__await__()

    async def __aenter__(self) -> Database:
        self._database = await self._opening
        return self._database

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._database is not None:
            await close_database(self._database)


def connect(
    uri: str | None = None,
    db_name: str = "partner",
    *,
    create_indexes: bool = True,
    server_selection_timeout_ms: int = 5000,
    **client_options: Any,
) -> Connecting:
    """A ready database: the in-memory backend when ``uri`` is None, the MongoDB at ``uri`` otherwise.

    ``database = await connect(uri)`` returns it (close it with :func:`close_database` when done);
    ``async with connect(uri) as database:`` closes it when the block ends.

    A server that cannot be reached, or a URI the driver refuses, raises :class:`ConnectionFailed` naming the
    host; whatever could be a credential is masked (:mod:`partner_repo.masking`), in the URI and in the
    driver's text, and the secrets of ``uri`` are masked in every later :func:`~partner_repo.masking.scrub`.
    """
    return Connecting(_connect(uri, db_name, create_indexes, server_selection_timeout_ms, client_options))


async def close_database(database: MongoDatabase) -> None:
    """Close the client behind ``database``: its connection pool and server monitors (every database and
    collection of that client stops working). Closing again does nothing more."""
    outcome = database.client.close()
    if inspect.isawaitable(outcome):  # PyMongo's async client closes with a coroutine
        await outcome


async def _connect(
    uri: str | None,
    db_name: str,
    create_indexes: bool,
    server_selection_timeout_ms: int,
    client_options: dict[str, Any],
) -> Database:
    if uri is None:
        database = in_memory_database(db_name)
    else:
        remember_secrets(uri)
        client = _client(uri, server_selection_timeout_ms, client_options)
        database = client[db_name]
        try:
            await database.command("ping")
        except PyMongoError as exc:
            client.close()
            reason = scrub(_first_line(exc), uri)
            raise ConnectionFailed(f"cannot reach MongoDB at {mask_uri(uri)}: {reason}") from None
    ready: Database = await init_repository(database, create_indexes=create_indexes)
    return ready


def _client(uri: str, timeout_ms: int, options: dict[str, Any]) -> AsyncIOMotorClient[Any]:
    """The driver's client, or :class:`ConnectionFailed` without the driver's text (it may quote the URI).

    The driver's warnings (an unknown option) are held back while it parses the URI: shown, scrubbed, when
    the client is made; dropped when the URI is refused anyway (the error says what to check).
    """
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            client: AsyncIOMotorClient[Any] = AsyncIOMotorClient(
                uri, tz_aware=True, serverSelectionTimeoutMS=timeout_ms, **options
            )
        except (ConfigurationError, InvalidURI, ValueError, TypeError) as exc:
            raise ConnectionFailed(
                f"unusable MongoDB URI {mask_uri(uri)} ({type(exc).__name__}); check its options, and escape "
                "special characters in the user name and password (urllib.parse.quote_plus)"
            ) from None
    for warning in caught:
        warnings.warn(scrub(str(warning.message), uri), warning.category, stacklevel=3)
    return client


def _first_line(exc: BaseException) -> str:
    """The driver's reason in one short line: its first line, without the topology dump pymongo appends."""
    text = str(exc).strip().splitlines()
    line = text[0] if text else type(exc).__name__
    for tail in (", Timeout:", " (configured timeouts:", ", Topology Description:"):
        line = line.split(tail, 1)[0]
    return line
