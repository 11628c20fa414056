"""The embedded in-memory backend: mongomock as it is, in the installed stack's shape, plus the few shims the
library's own commands need.

It is for the demo, for trying the CLI and the MCP server, and for tests. mongomock answers every read by
testing every document of the collection, and copies what it answers: that is fine at those sizes, and no
cost or latency of the library is ever measured here (benchmarks and docs/operations.md measure on a server;
in memory they count calls and documents only).

On the Motor stack the backend is mongomock-motor's client, as it is. On the PyMongo async stack no
maintained package gives mongomock PyMongo's async shape (mongomock-motor's maintainer says so, January 2026),
so :class:`EmbeddedClient` does, for what the library and Beanie 2's ``init_beanie`` use: coroutine methods on
collections and databases, ``find`` returning a cursor, ``aggregate``/``list_indexes`` as coroutines that
return one, ``client.close()`` as a coroutine. mongomock's limits stay (no sessions, no change streams: a
collection here has no ``watch``, which the library reads as "no change streams").

The shims, each over mongomock's public API, the same on both stacks:

- **plain strings** (:func:`plain`): Beanie passes field names as ``str`` subclasses (its expression fields);
  mongomock compares them by type, so every filter, update, sort and projection is handed over with plain
  strings (mongomock-motor does the same for its own calls).
- **PyMongo's bulk requests** (:func:`mongomock_requests`): PyMongo 4.9+'s requests add themselves to a bulk
  with a ``sort`` argument that mongomock's bulk builder does not take, so each is handed to mongomock's
  ``bulk_write`` in a form that drops it (the driver adapter does this on both stacks).
- **a leading ``$match`` read through ``find``** (:func:`aggregate`): mongomock's ``aggregate`` is
  ``find()`` of the whole collection (every document copied) and its pipeline run over that; with the
  pipeline's leading ``$match`` given to ``find`` instead (a ``$limit`` right after it as the find's limit,
  and only ids for a pipeline that ends in ``$count``), only what the match selects is copied, and the rest
  of the pipeline runs as mongomock runs it. The same answer (a ``$match`` is ``find``'s filter there), at
  the cost of what a read selects rather than of the collection: a recall reads a few dozen slices of
  thousands. Every aggregation of the library begins with such a ``$match`` (it names the core).
- **buildInfo**: mongomock has no such command; Beanie asks for it (:data:`BUILD_INFO`).

No private member of mongomock is used (a test reads every module of the package for one).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Sequence
from typing import Any

import mongomock
from mongomock.aggregate import process_pipeline
from pymongo.errors import InvalidOperation

_COLLECTION_COROUTINES = frozenset(
    {
        "count_documents",
        "create_index",
        "create_indexes",
        "delete_many",
        "delete_one",
        "distinct",
        "drop",
        "drop_index",
        "drop_indexes",
        "estimated_document_count",
        "find_one",
        "find_one_and_delete",
        "find_one_and_replace",
        "find_one_and_update",
        "index_information",
        "insert_many",
        "insert_one",
        "options",
        "rename",
        "replace_one",
        "update_many",
        "update_one",
    }
)
_CURSOR_CHAIN = frozenset(
    {"sort", "skip", "limit", "hint", "max_time_ms", "batch_size", "collation", "comment", "allow_disk_use"}
)

BUILD_INFO = {"ok": 1.0, "version": "7.0.0", "versionArray": [7, 0, 0, 0], "maxBsonObjectSize": 16 * 1024**2}
"""What ``buildInfo`` answers (mongomock has no such command; Beanie asks for it)."""


def aggregate(collection: Any, pipeline: list[Any]) -> list[Any]:
    """mongomock's ``aggregate`` of ``pipeline`` on the mongomock ``collection``, a leading ``$match`` read
    through ``find`` (see the module)."""
    pipeline = plain(pipeline)
    if not pipeline or set(pipeline[0]) != {"$match"}:
        return list(collection.aggregate(pipeline))
    rest = pipeline[1:]
    counting = bool(rest) and set(rest[-1]) == {"$count"} and all(set(s) == {"$limit"} for s in rest[:-1])
    cursor = collection.find(
        pipeline[0]["$match"], {"_id": 1} if counting else None
    )  # a count needs no field
    if rest and set(rest[0]) == {"$limit"}:  # a read stopped at a bound: only that many copied
        cursor, rest = cursor.limit(rest[0]["$limit"]), rest[1:]
    found = list(cursor)
    return list(process_pipeline(found, collection.database, rest, None))  # type: ignore[no-untyped-call]


def plain(value: Any) -> Any:
    """``value`` with every ``str`` subclass (Beanie's expression fields) turned into a plain ``str``."""
    if isinstance(value, str):
        return str(value) if type(value) is not str else value
    if isinstance(value, dict):
        return {plain(k): plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    if isinstance(value, tuple):
        return tuple(plain(v) for v in value)
    return value


class _BulkTaker:
    """Hands what a PyMongo request adds to a bulk to mongomock's bulk builder, which takes the same calls
    but for PyMongo 4.9+'s ``sort`` (never set by the library; refused here rather than ignored)."""

    def __init__(self, builder: Any) -> None:
        self._builder = builder

    def add_insert(self, document: Any) -> None:
        self._builder.add_insert(plain(document))

    def add_update(
        self, selector: Any, update: Any, multi: bool, upsert: bool, sort: Any = None, **options: Any
    ) -> None:
        _no_sort(sort)
        self._builder.add_update(plain(selector), plain(update), multi, upsert, **options)

    def add_replace(
        self, selector: Any, replacement: Any, upsert: bool, sort: Any = None, **options: Any
    ) -> None:
        _no_sort(sort)
        self._builder.add_replace(plain(selector), plain(replacement), upsert, **options)

    def add_delete(self, selector: Any, limit: int, **options: Any) -> None:
        self._builder.add_delete(plain(selector), limit, **options)


def _no_sort(sort: Any) -> None:
    if sort is not None:
        raise InvalidOperation("the in-memory backend has no sorted single-document bulk writes")


class _MongomockRequest:
    """A PyMongo bulk request in the form mongomock's ``bulk_write`` takes: mongomock adds each request to its
    bulk builder through the request's ``_add_to_bulk`` (PyMongo's own protocol), as PyMongo does."""

    def __init__(self, request: Any) -> None:
        self._request = request

    def _add_to_bulk(self, builder: Any) -> None:
        self._request._add_to_bulk(_BulkTaker(builder))


def mongomock_requests(requests: Sequence[Any]) -> list[Any]:
    """PyMongo's bulk ``requests`` (``UpdateOne``, ``ReplaceOne``, ``DeleteMany``, ...) as mongomock's
    ``bulk_write`` (and mongomock-motor's, which is mongomock's) takes them: the same writes, and the answer a
    server gives (a ``BulkWriteResult``, or a ``BulkWriteError`` listing each failed operation by index and
    code; an ordered batch stops at its first)."""
    return [_MongomockRequest(request) for request in requests]


class EmbeddedCursor:
    """A query or command cursor: chain it, iterate it with ``async for``, or read it with ``to_list``."""

    def __init__(self, cursor: Iterable[Any]) -> None:
        self._mongomock = cursor
        self._documents: Iterator[Any] | None = None

    def _iterator(self) -> Iterator[Any]:
        """The documents, read once: chaining (sort, limit, ...) happens before the first read."""
        if self._documents is None:
            self._documents = iter(self._mongomock)
        return self._documents

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._mongomock, name)
        if name in _CURSOR_CHAIN:

            def chained(*args: Any, **kwargs: Any) -> EmbeddedCursor:
                if name != "max_time_ms":  # mongomock has no time limit to set
                    attribute(*plain(args), **plain(kwargs))
                return self

            return chained
        return attribute

    async def to_list(self, length: int | None = None) -> list[Any]:
        if length is None:
            return list(self._iterator())
        documents: list[Any] = []
        for document in self._iterator():
            documents.append(document)
            if len(documents) >= length:
                break
        return documents

    def __aiter__(self) -> AsyncIterator[Any]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[Any]:
        for document in self._iterator():
            yield document

    async def next(self) -> Any:
        try:
            return next(self._iterator())
        except StopIteration:
            raise StopAsyncIteration from None

    async def close(self) -> None:
        close: Callable[[], Any] | None = getattr(self._mongomock, "close", None)
        if close is not None:
            close()


class EmbeddedCollection:
    """A mongomock collection with PyMongo's async methods."""

    def __init__(self, database: EmbeddedDatabase, collection: Any) -> None:
        self.database = database
        self._mongomock = collection

    @property
    def name(self) -> str:
        return str(self._mongomock.name)

    @property
    def full_name(self) -> str:
        return str(self._mongomock.full_name)

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._mongomock, name)
        if name not in _COLLECTION_COROUTINES:
            return attribute

        async def call(*args: Any, **kwargs: Any) -> Any:
            kwargs.pop("session", None)  # mongomock has no sessions; a session-less call is the same here
            return attribute(*plain(args), **plain(kwargs))

        return call

    def __eq__(self, other: object) -> bool:
        return isinstance(other, EmbeddedCollection) and other._mongomock == self._mongomock

    def __hash__(self) -> int:
        return hash(self.full_name)

    def find(self, *args: Any, **kwargs: Any) -> EmbeddedCursor:
        kwargs.pop("session", None)
        kwargs.pop("max_time_ms", None)
        return EmbeddedCursor(self._mongomock.find(*plain(args), **plain(kwargs)))

    async def aggregate(self, pipeline: list[Any], **kwargs: Any) -> EmbeddedCursor:
        return EmbeddedCursor(aggregate(self._mongomock, pipeline))

    async def bulk_write(self, requests: Sequence[Any], ordered: bool = True, **options: Any) -> Any:
        options.pop("session", None)
        return self._mongomock.bulk_write(mongomock_requests(requests), ordered=ordered, **options)

    async def list_indexes(self, **kwargs: Any) -> EmbeddedCursor:
        return EmbeddedCursor(list(self._mongomock.list_indexes()))

    def with_options(self, **options: Any) -> EmbeddedCollection:
        return EmbeddedCollection(self.database, self._mongomock.with_options(**options))


class EmbeddedDatabase:
    """A mongomock database with PyMongo's async methods."""

    def __init__(self, client: EmbeddedClient, database: Any) -> None:
        self.client = client
        self._mongomock = database

    @property
    def name(self) -> str:
        return str(self._mongomock.name)

    def __getitem__(self, name: str) -> EmbeddedCollection:
        return self.get_collection(name)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._mongomock, name)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, EmbeddedDatabase) and other._mongomock == self._mongomock

    def __hash__(self) -> int:
        return hash(self.name)

    def get_collection(self, name: str, **options: Any) -> EmbeddedCollection:
        return EmbeddedCollection(self, self._mongomock.get_collection(name, **options))

    def with_options(self, **options: Any) -> EmbeddedDatabase:
        return self

    async def command(self, command: Any, *args: Any, **kwargs: Any) -> Any:
        first = command if isinstance(command, str) else next(iter(command), "")
        if str(first).lower() == "buildinfo":
            return dict(BUILD_INFO)
        return self._mongomock.command(plain(command), *args, **kwargs)

    async def list_collection_names(self, filter: Any = None, **_options: Any) -> list[str]:
        return list(self._mongomock.list_collection_names(filter=filter))

    async def create_collection(self, name: str, **options: Any) -> EmbeddedCollection:
        return EmbeddedCollection(self, self._mongomock.create_collection(name, **options))

    async def drop_collection(self, name: Any, **_options: Any) -> None:
        self._mongomock.drop_collection(name if isinstance(name, str) else name.name)


class EmbeddedClient:
    """A mongomock client with PyMongo's async shape (``AsyncMongoClient``'s methods the library uses)."""

    def __init__(self, **options: Any) -> None:
        self._mongomock: Any = mongomock.MongoClient(**options)

    def __getitem__(self, name: str) -> EmbeddedDatabase:
        return self.get_database(name)

    def get_database(self, name: str | None = None, **options: Any) -> EmbeddedDatabase:
        options.pop("read_preference", None)  # one node: every read is the primary's
        return EmbeddedDatabase(self, self._mongomock.get_database(name, **options))

    def start_session(self, **_options: Any) -> Any:
        raise NotImplementedError("the in-memory backend does not support sessions")

    async def drop_database(self, name: Any) -> None:
        self._mongomock.drop_database(name if isinstance(name, str) else name.name)

    async def list_database_names(self) -> list[str]:
        return list(self._mongomock.list_database_names())

    async def close(self) -> None:
        self._mongomock.close()

    async def aconnect(self) -> None:
        """Nothing to connect to."""

    def append_metadata(self, _driver_info: Any) -> None:
        """Nothing to tell a server (Beanie names itself to the driver here)."""


__all__ = [
    "aggregate",
    "BUILD_INFO",
    "EmbeddedClient",
    "EmbeddedCollection",
    "EmbeddedCursor",
    "EmbeddedDatabase",
    "mongomock_requests",
    "plain",
]
