"""PyMongo's ``bulk_write`` for the embedded in-memory backend: the requests applied one by one, in order.

mongomock's own ``bulk_write`` reads each request through the request's ``_add_to_bulk`` protocol and
breaks on the ``sort`` argument PyMongo 4.9+ passes there. The same protocol is read here by a recorder that
takes any arguments, and each recorded operation is applied through the collection's public method
(``insert_one``, ``update_one``/``update_many``, ``replace_one``, ``delete_one``/``delete_many``). The answer
has a server's shape: a ``BulkWriteResult``, or a ``BulkWriteError`` whose details list each failed
operation by index with its code (an ordered batch stops at the first; an unordered one goes on).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pymongo.errors import BulkWriteError, PyMongoError
from pymongo.results import BulkWriteResult


@dataclass
class _Recorder:
    """What PyMongo's requests add to a bulk, as ``(kind, arguments)``."""

    ops: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def add_insert(self, document: Any, *_: Any, **__: Any) -> None:
        self.ops.append(("insert", {"document": document}))

    def add_update(
        self, selector: Any, update: Any, multi: bool, upsert: bool | None = None, **options: Any
    ) -> None:
        filters = options.get("array_filters")
        extra = {} if filters is None else {"array_filters": filters}
        self.ops.append(
            ("update", {"q": selector, "u": update, "multi": multi, "upsert": bool(upsert), **extra})
        )

    def add_replace(self, selector: Any, replacement: Any, upsert: bool | None = None, **_: Any) -> None:
        self.ops.append(("replace", {"q": selector, "u": replacement, "upsert": bool(upsert)}))

    def add_delete(self, selector: Any, limit: int, **_: Any) -> None:
        self.ops.append(("delete", {"q": selector, "many": limit == 0}))


@dataclass
class _Totals:
    inserted: int = 0
    matched: int = 0
    modified: int = 0
    removed: int = 0
    upserted: list[dict[str, Any]] = field(default_factory=list)
    errors: list[dict[str, Any]] = field(default_factory=list)

    def details(self) -> dict[str, Any]:
        return {
            "nInserted": self.inserted,
            "nUpserted": len(self.upserted),
            "nMatched": self.matched,
            "nModified": self.modified,
            "nRemoved": self.removed,
            "upserted": self.upserted,
            "writeErrors": self.errors,
            "writeConcernErrors": [],
        }

    def count(self, kind: str, index: int, result: Any) -> None:
        if kind == "insert":
            self.inserted += 1
        elif kind == "delete":
            self.removed += result.deleted_count
        elif result.upserted_id is not None:
            self.upserted.append({"index": index, "_id": result.upserted_id})
        else:
            self.matched += result.matched_count
            self.modified += result.modified_count

    def failed(self, index: int, error: PyMongoError, op: dict[str, Any], ordered: bool) -> bool:
        """Record a failed operation; whether the batch stops there."""
        code = getattr(error, "code", None)
        self.errors.append({"index": index, "code": code, "errmsg": str(error), "op": op})
        return ordered

    def answer(self) -> BulkWriteResult:
        if self.errors:
            raise BulkWriteError(self.details())
        return BulkWriteResult(self.details(), True)


def apply_requests(collection: Any, requests: Sequence[Any], ordered: bool = True) -> BulkWriteResult:
    """Apply PyMongo's bulk ``requests`` to a mongomock ``collection`` (see the module)."""
    totals = _Totals()
    for index, (kind, arguments) in enumerate(recorded(requests)):
        try:
            method, args, options = _call(collection, kind, arguments)
            totals.count(kind, index, method(*args, **options))
        except PyMongoError as exc:
            if totals.failed(index, exc, arguments, ordered):
                break
    return totals.answer()


async def apply_requests_async(
    collection: Any, requests: Sequence[Any], ordered: bool = True
) -> BulkWriteResult:
    """:func:`apply_requests` for a collection whose methods are coroutines (mongomock-motor's)."""
    totals = _Totals()
    for index, (kind, arguments) in enumerate(recorded(requests)):
        try:
            method, args, options = _call(collection, kind, arguments)
            totals.count(kind, index, await method(*args, **options))
        except PyMongoError as exc:
            if totals.failed(index, exc, arguments, ordered):
                break
    return totals.answer()


def recorded(requests: Sequence[Any]) -> list[tuple[str, dict[str, Any]]]:
    """The operations PyMongo's ``requests`` add to a bulk, in order."""
    recorder = _Recorder()
    for request in requests:
        request._add_to_bulk(recorder)
    return recorder.ops


def _call(
    collection: Any, kind: str, arguments: dict[str, Any]
) -> tuple[Any, tuple[Any, ...], dict[str, Any]]:
    """The collection method that applies one operation, with its arguments."""
    if kind == "insert":
        return collection.insert_one, (arguments["document"],), {}
    if kind == "delete":
        return (collection.delete_many if arguments["many"] else collection.delete_one), (arguments["q"],), {}
    if kind == "replace":
        return collection.replace_one, (arguments["q"], arguments["u"]), {"upsert": arguments["upsert"]}
    method = collection.update_many if arguments["multi"] else collection.update_one
    options: dict[str, Any] = {"upsert": arguments["upsert"]}
    if "array_filters" in arguments:
        options["array_filters"] = arguments["array_filters"]
    return method, (arguments["q"], arguments["u"]), options


__all__ = ["apply_requests", "apply_requests_async", "recorded"]
