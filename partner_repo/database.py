"""Opening a database and binding the documents to it.

Every repository, service and query class is handed the database it works on (``Repo(database)``); nothing
reads a global connection. The type is structural (``MongoDatabase``): a Motor database, mongomock-motor's
in-memory one, or a test wrapper around either.
"""

from __future__ import annotations

import re
from typing import Any, TypeAlias

from beanie import init_beanie
from motor.motor_asyncio import AsyncIOMotorClient
from pymongo.errors import ConfigurationError, InvalidURI, PyMongoError

from partner_repo.errors import ConnectionFailed
from partner_repo.indexes import ALL_INDEXES
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

    A server that cannot be reached raises :class:`ConnectionFailed` naming the host (password masked).
    """
    if uri is None:
        database = in_memory_database(db_name)
    else:
        try:
            client: AsyncIOMotorClient[Any] = AsyncIOMotorClient(
                uri,
                tz_aware=True,
                serverSelectionTimeoutMS=server_selection_timeout_ms,
                **client_options,
            )
        except (ConfigurationError, InvalidURI, ValueError, TypeError) as exc:
            # The driver's text may quote parts of the URI, the password included: never show it.
            raise ConnectionFailed(
                f"unusable MongoDB URI {mask_uri(uri)} ({type(exc).__name__}); check its options, and escape "
                "special characters in the user name and password (urllib.parse.quote_plus)"
            ) from None
        database = client[db_name]
        try:
            await database.command("ping")
        except PyMongoError as exc:
            client.close()
            raise ConnectionFailed(f"cannot reach MongoDB at {mask_uri(uri)}: {_first_line(exc)}") from None
    return await init_repository(database, create_indexes=create_indexes)


_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
_SECRET_OPTIONS = re.compile(r"(?i)(?P<name>[^&=]*password[^&=]*|authmechanismproperties)=(?P<value>[^&]*)")


def mask_uri(uri: str) -> str:
    """The URI with its secrets replaced by ``***`` so it can be logged or shown.

    Masks the password (everything up to the last ``@`` of the authority, so an unescaped ``@``, ``/``, ``:``
    or ``?`` in it cannot leak a part), every ``...password...`` option and ``authMechanismProperties`` (AWS
    session tokens).
    """
    scheme = _SCHEME.match(uri)
    if scheme is None:
        return uri
    rest = uri[scheme.end() :]
    options_start = rest.find("?")
    at = rest.rfind("@", 0, options_start if options_start >= 0 else len(rest))
    if at < 0:
        at = rest.rfind("@")  # an unescaped "?" in the password: mask up to the last "@", the safe side
    if at >= 0:
        user, colon, _ = rest[:at].partition(":")
        if colon:
            rest = f"{user}:***{rest[at:]}"
    authority, question, query = rest.partition("?")
    query = _SECRET_OPTIONS.sub(lambda m: f"{m['name']}=***", query)
    return f"{scheme.group()}{authority}{question}{query}"


def _first_line(exc: BaseException) -> str:
    """The driver's reason in one short line: its first line, without the topology dump pymongo appends."""
    text = str(exc).strip().splitlines()
    line = text[0] if text else type(exc).__name__
    for tail in (", Timeout:", " (configured timeouts:", ", Topology Description:"):
        line = line.split(tail, 1)[0]
    return line
