"""Opening a database and binding the documents to it.

Every repository, service and query class is handed the database it works on (``Repo(database)``); nothing
reads a global connection. The type is structural (``MongoDatabase``): a Motor database, mongomock-motor's
in-memory one, or a test wrapper around either.
"""

from __future__ import annotations

import warnings
from typing import Any, TypeAlias

from beanie import init_beanie
from motor.motor_asyncio import AsyncIOMotorClient
from pymongo.errors import ConfigurationError, InvalidURI, PyMongoError

from partner_repo.errors import ConnectionFailed
from partner_repo.indexes import ALL_INDEXES
from partner_repo.masking import mask_uri as mask_uri  # its home before partner_repo.masking
from partner_repo.masking import remember_secrets, scrub
from partner_repo.models import MemoryCore, MemoryUnit

MongoDatabase: TypeAlias = Any
"""A Motor database (real or mongomock-motor's), or anything with the same async collection interface."""

DOCUMENT_MODELS: list[type[Any]] = [MemoryUnit, MemoryCore]


async def init_repository(database: MongoDatabase, *, create_indexes: bool = True) -> MongoDatabase:
    """Register the documents with Beanie on ``database`` and (unless told not to) create the indexes.

    Services that leave index creation to migrations pass ``create_indexes=False``. Each index is created
    with its own ``createIndexes`` (idempotent): mongomock's batch form drops partial filter expressions.
    """
    await init_beanie(database=database, document_models=DOCUMENT_MODELS, skip_indexes=True)
    if create_indexes:
        for collection, indexes in ALL_INDEXES.items():
            for index in indexes:
                options = dict(index.document)
                keys = list(options.pop("key").items())
                await database[collection].create_index(keys, **options)
    return database


def in_memory_database(db_name: str = "partner") -> MongoDatabase:
    """A fresh embedded in-memory database (mongomock-motor): no server, nothing persists."""
    from mongomock_motor import AsyncMongoMockClient

    return AsyncMongoMockClient(tz_aware=True)[db_name]


async def connect(
    uri: str | None = None,
    db_name: str = "partner",
    *,
    create_indexes: bool = True,
    server_selection_timeout_ms: int = 5000,
    **client_options: Any,
) -> MongoDatabase:
    """Return a ready database: the in-memory backend when ``uri`` is None, the MongoDB at ``uri`` otherwise.

    A server that cannot be reached, or a URI the driver refuses, raises :class:`ConnectionFailed` naming the
    host; whatever could be a credential is masked (:mod:`partner_repo.masking`), in the URI and in the
    driver's text, and the secrets of ``uri`` are masked in every later :func:`~partner_repo.masking.scrub`.
    """
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
    return await init_repository(database, create_indexes=create_indexes)


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
