"""A scripted MongoDB for the wire benchmarks: mockupdb on the socket, a mongomock store behind it.

The real Motor driver talks OP_MSG to it exactly as to a standalone ``mongod`` 7.0 (sessions supported,
no replica set, so no change streams and no retryable writes). Every reply is what MongoDB answers for the
command: the handler runs the command's filter, projection (``$slice``, ``$elemMatch``), sort, update or
pipeline on the in-memory store and wraps the outcome in the server's reply shape (cursors with
``firstBatch``/``nextBatch`` and MongoDB's batch sizes, ``n``/``nModified``/``upserted``,
``lastErrorObject``, ``writeErrors`` with code 11000). A command or option the store cannot execute
faithfully (an update pipeline, which mongomock would store literally) is refused with an error instead of
being answered wrongly, so a benchmark never measures a fiction.

Run as ``python -m benchmarks.wire_server``: it prints the port, serves until its stdin closes, then exits. It
runs in its own process so the client process's CPU time measures only the library and the driver.
"""

from __future__ import annotations

import itertools
import sys
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import bson
import mongomock
from mockupdb import MockupDB
from pymongo import ReturnDocument
from pymongo.errors import DuplicateKeyError, OperationFailure

MAX_WIRE_VERSION = 21  # MongoDB 7.0
BATCH_BYTES = 16 * 1024 * 1024
DEFAULT_FIRST_BATCH = 101
_IGNORED = {
    "$db",
    "$readPreference",
    "lsid",
    "$clusterTime",
    "maxTimeMS",
    "comment",
    "readConcern",
    "writeConcern",
    "ordered",
    "bypassDocumentValidation",
    "hint",
    "allowDiskUse",
    "apiVersion",
    "apiStrict",
    "apiDeprecationErrors",
    "txnNumber",
}


@dataclass
class _OpenCursor:
    name: str
    documents: list[Any]
    position: int
    batch_size: int | None


class CommandRefused(Exception):
    """A command (or option) the store cannot answer as MongoDB would."""


class ScriptedMongo:
    """Answers MongoDB commands from a mongomock store, in MongoDB's reply shapes."""

    def __init__(self) -> None:
        self._store: Any = mongomock.MongoClient(tz_aware=True)
        self._lock = threading.Lock()
        self._cursors: dict[int, _OpenCursor] = {}
        self._cursor_ids = itertools.count(1_000_001)
        self._connections = itertools.count(1)

    def handle(self, request: Any) -> bool:
        """mockupdb responder for every request."""
        command = dict(request.doc)
        name = next(iter(command), "")
        with self._lock:
            try:
                reply = self.execute(name, command)
            except CommandRefused as exc:
                reply = {"ok": 0, "errmsg": f"benchmark server refuses: {exc}", "code": 2}
            except OperationFailure as exc:
                reply = {"ok": 0, "errmsg": str(exc), "code": exc.code or 2}
        return bool(request.replies(reply))

    def execute(self, name: str, command: dict[str, Any]) -> dict[str, Any]:
        lowered = name.lower()
        if lowered in {"hello", "ismaster"}:
            return self._hello()
        handler = getattr(self, f"_cmd_{lowered}", None)
        if handler is None:
            return {
                "ok": 0,
                "errmsg": f"no such command: '{name}'",
                "code": 59,
                "codeName": "CommandNotFound",
            }
        database = command.get("$db", "test")
        result: dict[str, Any] = handler(database, command)
        result.setdefault("ok", 1.0)
        return result

    # -- handshake and administration ----------------------------------------------------------------------

    def _hello(self) -> dict[str, Any]:
        return {
            "helloOk": True,
            "ismaster": True,
            "isWritablePrimary": True,
            "maxBsonObjectSize": 16 * 1024 * 1024,
            "maxMessageSizeBytes": 48_000_000,
            "maxWriteBatchSize": 100_000,
            "localTime": datetime.now(UTC),
            "logicalSessionTimeoutMinutes": 30,
            "connectionId": next(self._connections),
            "minWireVersion": 0,
            "maxWireVersion": MAX_WIRE_VERSION,
            "readOnly": False,
            "ok": 1.0,
        }

    def _cmd_ping(self, database: str, command: dict[str, Any]) -> dict[str, Any]:
        return {}

    def _cmd_endsessions(self, database: str, command: dict[str, Any]) -> dict[str, Any]:
        return {}

    def _cmd_buildinfo(self, database: str, command: dict[str, Any]) -> dict[str, Any]:
        return {"version": "7.0.0-scripted", "versionArray": [7, 0, 0, 0]}

    def _cmd_createindexes(self, database: str, command: dict[str, Any]) -> dict[str, Any]:
        # Indexes change speed, never results; uniqueness of _id is inherent to the store.
        count = len(command.get("indexes") or [])
        return {"numIndexesBefore": 1, "numIndexesAfter": 1 + count, "createdCollectionAutomatically": False}

    def _cmd_drop(self, database: str, command: dict[str, Any]) -> dict[str, Any]:
        self._store[database].drop_collection(command["drop"])
        return {}

    def _cmd_dropdatabase(self, database: str, command: dict[str, Any]) -> dict[str, Any]:
        self._store.drop_database(database)
        return {}

    def _cmd_killcursors(self, database: str, command: dict[str, Any]) -> dict[str, Any]:
        killed = [cursor_id for cursor_id in command.get("cursors", []) if self._cursors.pop(cursor_id, None)]
        return {"cursorsKilled": killed, "cursorsNotFound": [], "cursorsAlive": [], "cursorsUnknown": []}

    # -- reads ---------------------------------------------------------------------------------------------

    def _cmd_find(self, database: str, command: dict[str, Any]) -> dict[str, Any]:
        self._refuse_unknown(
            command,
            {"find", "filter", "projection", "sort", "skip", "limit", "batchSize", "singleBatch", "let"},
        )
        if command.get("let"):
            raise CommandRefused("find with let")
        collection = self._collection(database, command["find"])
        limit = int(command.get("limit") or 0)
        single = bool(command.get("singleBatch")) or limit < 0
        projection = dict(command.get("projection") or {})
        slices_only = _slices_only(projection)
        cursor = collection.find(
            command.get("filter") or {},
            None if slices_only else projection or None,
            skip=int(command.get("skip") or 0),
            limit=abs(limit),
        )
        if command.get("sort"):
            cursor = cursor.sort(list(dict(command["sort"]).items()))
        documents = list(cursor)
        if slices_only:
            documents = [_apply_slices(document, projection) for document in documents]
        batch_size = command.get("batchSize")
        first = DEFAULT_FIRST_BATCH if batch_size is None else int(batch_size)
        return self._cursor_reply(database, command["find"], documents, first, batch_size, single)

    def _cmd_aggregate(self, database: str, command: dict[str, Any]) -> dict[str, Any]:
        self._refuse_unknown(command, {"aggregate", "pipeline", "cursor", "let", "explain"})
        pipeline = list(command.get("pipeline") or [])
        if any("$changeStream" in stage for stage in pipeline):
            return {
                "ok": 0,
                "errmsg": "The $changeStream stage is only supported on replica sets",
                "code": 40573,
                "codeName": "Location40573",
            }
        if command.get("let") or command.get("explain"):
            raise CommandRefused("aggregate with let/explain")
        collection = self._collection(database, command["aggregate"])
        batch_size = (command.get("cursor") or {}).get("batchSize")
        first = DEFAULT_FIRST_BATCH if batch_size is None else int(batch_size)
        results = list(collection.aggregate(pipeline))
        return self._cursor_reply(database, command["aggregate"], results, first, batch_size, False)

    def _cmd_getmore(self, database: str, command: dict[str, Any]) -> dict[str, Any]:
        cursor_id = int(command["getMore"])
        if cursor_id not in self._cursors:
            return {
                "ok": 0,
                "errmsg": f"cursor id {cursor_id} not found",
                "code": 43,
                "codeName": "CursorNotFound",
            }
        cursor = self._cursors.pop(cursor_id)
        size = command.get("batchSize", cursor.batch_size)
        batch, cursor.position = _take(cursor.documents, cursor.position, None if size is None else int(size))
        exhausted = cursor.position >= len(cursor.documents)
        if not exhausted:
            self._cursors[cursor_id] = cursor
        return {
            "cursor": {
                "id": bson.Int64(0 if exhausted else cursor_id),
                "ns": f"{database}.{cursor.name}",
                "nextBatch": batch,
            }
        }

    def _cmd_count(self, database: str, command: dict[str, Any]) -> dict[str, Any]:
        self._refuse_unknown(command, {"count", "query", "limit", "skip"})
        collection = self._collection(database, command["count"])
        options = {k: int(command[k]) for k in ("limit", "skip") if command.get(k)}
        return {"n": collection.count_documents(command.get("query") or {}, **options)}

    def _cmd_distinct(self, database: str, command: dict[str, Any]) -> dict[str, Any]:
        self._refuse_unknown(command, {"distinct", "key", "query"})
        collection = self._collection(database, command["distinct"])
        return {"values": collection.distinct(command["key"], command.get("query") or {})}

    def _cmd_listindexes(self, database: str, command: dict[str, Any]) -> dict[str, Any]:
        indexes = [{"v": 2, "key": {"_id": 1}, "name": "_id_"}]
        return self._cursor_reply(database, command["listIndexes"], indexes, DEFAULT_FIRST_BATCH, None, False)

    def _cmd_listcollections(self, database: str, command: dict[str, Any]) -> dict[str, Any]:
        names = self._store[database].list_collection_names()
        documents = [
            {"name": n, "type": "collection", "options": {}, "info": {"readOnly": False}} for n in names
        ]
        return self._cursor_reply(
            database, "$cmd.listCollections", documents, DEFAULT_FIRST_BATCH, None, False
        )

    # -- writes --------------------------------------------------------------------------------------------

    def _cmd_insert(self, database: str, command: dict[str, Any]) -> dict[str, Any]:
        self._refuse_unknown(command, {"insert", "documents"})
        collection = self._collection(database, command["insert"])
        ordered = command.get("ordered", True)
        inserted, errors = 0, []
        for index, document in enumerate(command.get("documents") or []):
            try:
                collection.insert_one(dict(document))
                inserted += 1
            except DuplicateKeyError:
                errors.append(_duplicate_key(index, command["insert"], database, document.get("_id")))
                if ordered:
                    break
        reply: dict[str, Any] = {"n": inserted}
        if errors:
            reply["writeErrors"] = errors
        return reply

    def _cmd_update(self, database: str, command: dict[str, Any]) -> dict[str, Any]:
        self._refuse_unknown(command, {"update", "updates"})
        collection = self._collection(database, command["update"])
        ordered = command.get("ordered", True)
        matched, modified, upserted, errors = 0, 0, [], []
        for index, statement in enumerate(command.get("updates") or []):
            self._refuse_unknown(statement, {"q", "u", "upsert", "multi"}, ignored=set())
            update = statement["u"]
            if isinstance(update, list):
                raise CommandRefused(
                    "update with an aggregation pipeline (mongomock would store it literally)"
                )
            upsert = bool(statement.get("upsert"))
            try:
                if not any(str(key).startswith("$") for key in update):
                    result = collection.replace_one(statement["q"], dict(update), upsert=upsert)
                elif statement.get("multi"):
                    result = collection.update_many(statement["q"], update, upsert=upsert)
                else:
                    result = collection.update_one(statement["q"], update, upsert=upsert)
            except DuplicateKeyError:
                errors.append(_duplicate_key(index, command["update"], database, None))
                if ordered:
                    break
                continue
            matched += result.matched_count
            modified += result.modified_count
            if result.upserted_id is not None:
                upserted.append({"index": index, "_id": result.upserted_id})
        reply: dict[str, Any] = {"n": matched + len(upserted), "nModified": modified}
        if upserted:
            reply["upserted"] = upserted
        if errors:
            reply["writeErrors"] = errors
        return reply

    def _cmd_delete(self, database: str, command: dict[str, Any]) -> dict[str, Any]:
        self._refuse_unknown(command, {"delete", "deletes"})
        collection = self._collection(database, command["delete"])
        removed = 0
        for statement in command.get("deletes") or []:
            if int(statement.get("limit", 0)) == 1:
                removed += collection.delete_one(statement["q"]).deleted_count
            else:
                removed += collection.delete_many(statement["q"]).deleted_count
        return {"n": removed}

    def _cmd_findandmodify(self, database: str, command: dict[str, Any]) -> dict[str, Any]:
        self._refuse_unknown(
            command,
            {
                "findAndModify",
                "findandmodify",
                "query",
                "sort",
                "remove",
                "update",
                "new",
                "fields",
                "upsert",
            },
        )
        name = command.get("findAndModify") or command["findandmodify"]
        collection = self._collection(database, name)
        query = command.get("query") or {}
        sort = list(dict(command["sort"]).items()) if command.get("sort") else None
        fields = command.get("fields") or None
        existed = collection.find_one(query, sort=sort) is not None
        if command.get("remove"):
            value = collection.find_one_and_delete(query, projection=fields, sort=sort)
            return {"lastErrorObject": {"n": int(value is not None)}, "value": value}
        update = command["update"]
        if isinstance(update, list):
            raise CommandRefused(
                "findAndModify with an aggregation pipeline (mongomock would store it literally)"
            )
        returned = ReturnDocument.AFTER if command.get("new") else ReturnDocument.BEFORE
        upsert = bool(command.get("upsert"))
        try:
            if any(str(key).startswith("$") for key in update):
                value = collection.find_one_and_update(
                    query, update, projection=fields, sort=sort, upsert=upsert, return_document=returned
                )
            else:
                value = collection.find_one_and_replace(
                    query, dict(update), projection=fields, sort=sort, upsert=upsert, return_document=returned
                )
        except DuplicateKeyError:
            return {
                "ok": 0,
                "errmsg": "E11000 duplicate key error",
                "code": 11000,
                "codeName": "DuplicateKey",
            }
        last_error: dict[str, Any] = {"n": 1 if existed or upsert else 0, "updatedExisting": existed}
        if upsert and not existed:
            created = value if value is not None and "_id" in value else collection.find_one(query, sort=sort)
            if created is not None:
                last_error["upserted"] = created["_id"]
        return {"lastErrorObject": last_error, "value": value}

    # -- helpers -------------------------------------------------------------------------------------------

    def _collection(self, database: str, name: str) -> Any:
        return self._store[database][name]

    def _cursor_reply(
        self,
        database: str,
        name: str,
        documents: list[Any],
        first: int,
        batch_size: Any,
        single: bool,
    ) -> dict[str, Any]:
        batch, position = _take(documents, 0, first)
        cursor_id = 0
        if position < len(documents) and not single:
            cursor_id = next(self._cursor_ids)
            size = None if batch_size is None else int(batch_size)
            self._cursors[cursor_id] = _OpenCursor(name, documents, position, size)
        return {"cursor": {"id": bson.Int64(cursor_id), "ns": f"{database}.{name}", "firstBatch": batch}}

    @staticmethod
    def _refuse_unknown(command: Mapping[str, Any], known: set[str], ignored: set[str] = _IGNORED) -> None:
        unknown = set(command) - known - ignored
        if unknown:
            raise CommandRefused(f"options {sorted(unknown)}")


def _slices_only(projection: Mapping[str, Any]) -> bool:
    """A projection of nothing but ``$slice`` operators: MongoDB returns every field (slicing those arrays),
    where mongomock would return only the sliced fields."""
    return bool(projection) and all(
        isinstance(value, Mapping) and set(value) == {"$slice"} for value in projection.values()
    )


def _apply_slices(document: dict[str, Any], projection: Mapping[str, Any]) -> dict[str, Any]:
    result = dict(document)
    for name, operator in projection.items():
        if "." in name:
            raise CommandRefused(f"$slice on the nested field {name!r}")
        value = result.get(name)
        if isinstance(value, list):
            result[name] = _slice(value, operator["$slice"])
    return result


def _slice(values: list[Any], spec: Any) -> list[Any]:
    """MongoDB's ``$slice``: ``n`` (first n, or last -n) or ``[skip, limit]`` (a negative skip counts from
    the end)."""
    if isinstance(spec, int):
        return values[:spec] if spec >= 0 else values[spec:]
    skip, limit = int(spec[0]), int(spec[1])
    start = skip if skip >= 0 else max(len(values) + skip, 0)
    return values[start : start + limit]


def _take(documents: list[Any], position: int, count: int | None) -> tuple[list[Any], int]:
    """The next batch from ``position`` and the position after it: ``count`` documents (None or 0: as many as
    fit MongoDB's 16 MiB batch limit)."""
    batch: list[Any] = []
    size = 0
    while position < len(documents):
        document = documents[position]
        size += len(bson.encode(document))
        if batch and size > BATCH_BYTES:
            break
        batch.append(document)
        position += 1
        if count and len(batch) >= count:
            break
    return batch, position


def _duplicate_key(index: int, collection: str, database: str, key: Any) -> dict[str, Any]:
    return {
        "index": index,
        "code": 11000,
        "errmsg": f"E11000 duplicate key error collection: {database}.{collection} index: _id_ dup key: "
        f"{{ _id: {key!r} }}",
        "keyPattern": {"_id": 1},
        "keyValue": {"_id": key},
    }


def serve() -> None:
    """Serve on a free port, print it, and stop when stdin closes."""
    scripted = ScriptedMongo()
    server = MockupDB(request_timeout=3600)
    server.autoresponds(scripted.handle)
    port = server.run()
    print(port, flush=True)
    try:
        sys.stdin.read()
    finally:
        server.stop()


if __name__ == "__main__":
    serve()
