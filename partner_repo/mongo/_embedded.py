"""The embedded in-memory backend in PyMongo's async shape: a thin facade over mongomock.

mongomock-motor gives mongomock Motor's shape, and imports Motor to do it; on the PyMongo async stack no
maintained package gives mongomock PyMongo's async shape (mongomock-motor's maintainer says so, January
2026), so this module does, for what the library and Beanie 2's ``init_beanie`` use: coroutine methods on
collections and databases, ``find`` returning a cursor, ``aggregate``/``list_indexes`` as coroutines that
return one, ``client.close()`` as a coroutine. Everything runs synchronously inside mongomock (as with
mongomock-motor); mongomock's limits stay (no sessions, no change streams: a collection here has no
``watch``, which the library reads as "no change streams").

Beanie passes field names as ``str`` subclasses (its expression fields); mongomock compares them by type, so
every filter, update, sort and projection is handed over with plain strings.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from typing import Any

from mongomock import aggregate as mongomock_aggregate

from partner_repo.mongo import _pushdown as pushdown
from partner_repo.mongo._mongomock_store import IndexedClient

_COLLECTION_COROUTINES = frozenset(
    {
        "bulk_write",
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


def _plain(value: Any) -> Any:
    """``value`` with every ``str`` subclass (Beanie's expression fields) turned into a plain ``str``."""
    if isinstance(value, str):
        return str(value) if type(value) is not str else value
    if isinstance(value, dict):
        return {_plain(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, tuple):
        return tuple(_plain(v) for v in value)
    return value


class EmbeddedCursor:
    """A query or command cursor: chain it, iterate it with ``async for``, or read it with ``to_list``."""

    def __init__(self, cursor: Iterable[Any]) -> None:
        self._cursor = cursor
        self._documents: Iterator[Any] | None = None

    def _iterator(self) -> Iterator[Any]:
        """The documents, read once: chaining (sort, limit, ...) happens before the first read."""
        if self._documents is None:
            self._documents = iter(self._cursor)
        return self._documents

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._cursor, name)
        if name in _CURSOR_CHAIN:

            def chained(*args: Any, **kwargs: Any) -> EmbeddedCursor:
                if name != "max_time_ms":  # mongomock has no time limit to set
                    attribute(*_plain(args), **_plain(kwargs))
                return self

            return chained
        return attribute

    async def to_list(self, length: int | None = None) -> list[Any]:
        if length is None:
            return list(self._iterator())
        documents: list[Any] = []
        for document in self._iterator():
            documents.append(document)
            if length is not None and len(documents) >= length:
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
        close: Callable[[], Any] | None = getattr(self._cursor, "close", None)
        if close is not None:
            close()


class EmbeddedCollection:
    """A mongomock collection with PyMongo's async methods."""

    def __init__(self, database: EmbeddedDatabase, collection: Any) -> None:
        self.database = database
        self._collection = collection

    @property
    def name(self) -> str:
        return str(self._collection.name)

    @property
    def full_name(self) -> str:
        return str(self._collection.full_name)

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._collection, name)
        if name not in _COLLECTION_COROUTINES:
            return attribute

        async def call(*args: Any, **kwargs: Any) -> Any:
            kwargs.pop("session", None)  # mongomock has no sessions; a session-less call is the same here
            return attribute(*_plain(args), **_plain(kwargs))

        return call

    def __eq__(self, other: object) -> bool:
        return isinstance(other, EmbeddedCollection) and other._collection == self._collection

    def __hash__(self) -> int:
        return hash(self.full_name)

    def find(self, *args: Any, **kwargs: Any) -> EmbeddedCursor:
        kwargs.pop("session", None)
        kwargs.pop("max_time_ms", None)
        return EmbeddedCursor(self._collection.find(*_plain(args), **_plain(kwargs)))

    async def aggregate(self, pipeline: list[Any], **kwargs: Any) -> EmbeddedCursor:
        for option in ("session", "maxTimeMS", "hint", "allowDiskUse", "comment", "batchSize"):
            kwargs.pop(option, None)
        pipeline = _plain(pipeline)
        read = pushdown.plan(pipeline)  # mongomock copies the whole collection first
        if read is None:
            return EmbeddedCursor(self._collection.aggregate(pipeline, **kwargs))
        process: Callable[..., list[Any]] = mongomock_aggregate.process_pipeline
        indexed = getattr(self._collection, "read", None)
        if indexed is not None and not read.copy:  # the stages only read: copy what they answer
            stored = indexed(read.filter, None, read.limit, copy=False)
            answer = process(stored, self._collection.database, read.rest, None)
            return EmbeddedCursor(self._collection.answer(answer))
        found = self._read(read.filter, read.projection, read.limit)
        return EmbeddedCursor(process(found, self._collection.database, read.rest, None))

    def _read(self, filter: Any, projection: Any, limit: int) -> list[Any]:
        """What a pipeline's leading ``$match`` reads: through the indexed store's own read (at most
        ``limit`` documents copied, only the fields the pipeline needs), else mongomock's ``find``."""
        read = getattr(self._collection, "read", None)
        if read is not None:
            return list(read(filter, projection, limit))
        cursor = self._collection.find(filter, projection)
        return list(cursor.limit(limit) if limit else cursor)

    async def list_indexes(self, **kwargs: Any) -> EmbeddedCursor:
        return EmbeddedCursor(list(self._collection.list_indexes()))

    def with_options(self, **options: Any) -> EmbeddedCollection:
        return EmbeddedCollection(self.database, self._collection.with_options(**options))


class EmbeddedDatabase:
    """A mongomock database with PyMongo's async methods."""

    def __init__(self, client: EmbeddedClient, database: Any) -> None:
        self.client = client
        self._database = database

    @property
    def name(self) -> str:
        return str(self._database.name)

    def __getitem__(self, name: str) -> EmbeddedCollection:
        return self.get_collection(name)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._database, name)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, EmbeddedDatabase) and other._database == self._database

    def __hash__(self) -> int:
        return hash(self.name)

    def get_collection(self, name: str, **options: Any) -> EmbeddedCollection:
        return EmbeddedCollection(self, self._database.get_collection(name, **options))

    def with_options(self, **options: Any) -> EmbeddedDatabase:
        return self

    async def command(self, command: Any, *args: Any, **kwargs: Any) -> Any:
        first = command if isinstance(command, str) else next(iter(command), "")
        if str(first).lower() == "buildinfo":
            return dict(BUILD_INFO)
        return self._database.command(_plain(command), *args, **kwargs)

    async def list_collection_names(self, filter: Any = None, **_options: Any) -> list[str]:
        return list(self._database.list_collection_names(filter=filter))

    async def create_collection(self, name: str, **options: Any) -> EmbeddedCollection:
        return EmbeddedCollection(self, self._database.create_collection(name, **options))

    async def drop_collection(self, name: Any, **_options: Any) -> None:
        self._database.drop_collection(name if isinstance(name, str) else name.name)


class EmbeddedClient:
    """A mongomock client with PyMongo's async shape (``AsyncMongoClient``'s methods the library uses)."""

    def __init__(self, **options: Any) -> None:
        self._client = IndexedClient(**options)

    def __getitem__(self, name: str) -> EmbeddedDatabase:
        return self.get_database(name)

    def get_database(self, name: str | None = None, **options: Any) -> EmbeddedDatabase:
        options.pop("read_preference", None)  # one node: every read is the primary's
        return EmbeddedDatabase(self, self._client.get_database(name, **options))

    def start_session(self, **_options: Any) -> Any:
        raise NotImplementedError("the in-memory backend does not support sessions")

    async def drop_database(self, name: Any) -> None:
        self._client.drop_database(name if isinstance(name, str) else name.name)

    async def list_database_names(self) -> list[str]:
        return list(self._client.list_database_names())

    async def close(self) -> None:
        self._client.close()

    async def aconnect(self) -> None:
        """Nothing to connect to."""

    def append_metadata(self, _driver_info: Any) -> None:
        """Nothing to tell a server (Beanie names itself to the driver here)."""


__all__ = ["EmbeddedClient", "EmbeddedCollection", "EmbeddedCursor", "EmbeddedDatabase"]
