"""Erasure requests: what each erasure set out to do, how far it got, and the ids it removes.

``erasure_requests`` holds two kinds of documents, ids and counts only:

- one *request* per erasure (``_id``: its id), written before anything is deleted: the core, the scope
  (``"core"``, or ``"before"`` a date), the core lease owner it holds, its state (``pending`` until every
  document is deleted, ``erased`` until it is logged, then ``done``) and what it removed so far;
- one *target* per unit it removes (``_id``: erasure and unit): the unit's slice ids, written before the unit
  is deleted, so a run cut short anywhere still knows, when run again, which ids to delete and to announce.

Every write is a single idempotent update, so each step can be repeated after a crash.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from partner_repo.clock import utc_now
from partner_repo.events import ErasureScope
from partner_repo.mongo import ASCENDING, ERASURE_REQUESTS, MongoDatabase, stored_datetime

ErasureState = Literal["pending", "erased", "done"]

COUNTERS = ("core", "window_messages", "units", "checkpoints", "dead_letters")
"""What a request counts as it removes it (``core``: 1 once the core document is gone)."""


@dataclass(frozen=True)
class ErasureRequest:
    """One erasure as stored: what it erases, whose lease it holds, how far it got."""

    erasure_id: str
    core_id: str
    scope: ErasureScope
    before: datetime | None
    state: ErasureState
    owner: str
    requested_at: datetime
    done_at: datetime | None = None
    removed: dict[str, int] = field(default_factory=dict)
    kept_units: tuple[str, ...] = ()
    slices: int = 0
    parts: int = 0


class ErasureRequests:
    """Reads and writes ``erasure_requests`` on the database it is given."""

    def __init__(self, database: MongoDatabase) -> None:
        self._collection = database[ERASURE_REQUESTS]

    async def open(
        self, core_id: str, scope: ErasureScope, before: datetime | None, *, now: datetime | None = None
    ) -> ErasureRequest:
        """Record a new pending erasure (nothing is deleted before this write)."""
        erasure_id = str(uuid.uuid4())
        document: dict[str, Any] = {
            "_id": erasure_id,
            "kind": "request",
            "erasure_id": erasure_id,
            "core_id": core_id,
            "scope": scope,
            "before": before,
            "state": "pending",
            "owner": f"erasure-{erasure_id}",
            "requested_at": now or utc_now(),
            "done_at": None,
            "removed": dict.fromkeys(COUNTERS, 0),
            "kept_units": [],
            "slices": 0,
            "parts": 0,
        }
        await self._collection.insert_one(document)
        return _request(document)

    async def get(self, erasure_id: str) -> ErasureRequest | None:
        document = await self._collection.find_one({"_id": erasure_id, "kind": "request"})
        return None if document is None else _request(document)

    async def unfinished(self, core_id: str | None = None) -> list[ErasureRequest]:
        """Erasures not done yet (of one core, when given), oldest first."""
        query: dict[str, Any] = {"state": {"$in": ["pending", "erased"]}, "kind": "request"}
        if core_id is not None:
            query["core_id"] = core_id
        cursor = self._collection.find(query).sort([("requested_at", ASCENDING), ("_id", ASCENDING)])
        return [_request(document) async for document in cursor]

    async def recent(self, limit: int = 50) -> list[ErasureRequest]:
        """The newest erasures, whatever their state, newest first."""
        cursor = self._collection.find({"kind": "request"}).sort("requested_at", -1).limit(limit)
        return [_request(document) async for document in cursor]

    # -- targets -------------------------------------------------------------------------------------------

    async def add_targets(self, request: ErasureRequest, units: Iterable[tuple[Any, Sequence[Any]]]) -> None:
        """Name units (and their slice ids) the erasure removes; naming one again adds its new slice ids."""
        for unit_id, slice_ids in units:
            await self._collection.update_one(
                {"_id": {"erasure": request.erasure_id, "unit": unit_id}},
                {
                    "$setOnInsert": {
                        "kind": "target",
                        "erasure_id": request.erasure_id,
                        "unit_id": unit_id,
                        "core_id": request.core_id,
                    },
                    "$addToSet": {"slice_ids": {"$each": list(slice_ids)}},
                },
                upsert=True,
            )

    async def targets(self, erasure_id: str) -> AsyncIterator[tuple[Any, list[Any]]]:
        """The units the erasure removes, with their slice ids, in a stable order (by unit id)."""
        cursor = self._collection.find(
            {"erasure_id": erasure_id, "kind": "target"}, {"unit_id": 1, "slice_ids": 1}
        ).sort([("erasure_id", ASCENDING), ("unit_id", ASCENDING)])
        async for document in cursor:
            yield document["unit_id"], list(document.get("slice_ids") or [])

    async def drop_targets(self, erasure_id: str) -> None:
        """Forget the target documents of a done erasure (the log holds its ids from now on)."""
        await self._collection.delete_many({"erasure_id": erasure_id, "kind": "target"})

    # -- progress ------------------------------------------------------------------------------------------

    async def count(self, erasure_id: str, **removed: int) -> None:
        """Add to what the erasure removed (``units=3, checkpoints=5``)."""
        increments = {f"removed.{name}": value for name, value in removed.items() if value}
        if increments:
            await self._collection.update_one({"_id": erasure_id}, {"$inc": increments})

    async def keep(self, erasure_id: str, unit_ids: Iterable[str]) -> None:
        """Record units the erasure leaves on purpose (the current session's, for ``before``)."""
        await self._collection.update_one(
            {"_id": erasure_id}, {"$addToSet": {"kept_units": {"$each": list(unit_ids)}}}
        )

    async def erased(self, erasure_id: str) -> None:
        """Every document is deleted: from now on the targets are final, only the log entry is missing."""
        await self._collection.update_one(
            {"_id": erasure_id, "state": "pending"}, {"$set": {"state": "erased"}}
        )

    async def done(self, erasure_id: str, *, parts: int, slices: int, at: datetime | None = None) -> None:
        await self._collection.update_one(
            {"_id": erasure_id},
            {"$set": {"state": "done", "parts": parts, "slices": slices, "done_at": at or utc_now()}},
        )


def _request(document: dict[str, Any]) -> ErasureRequest:
    removed = document.get("removed") or {}
    return ErasureRequest(
        erasure_id=document["_id"],
        core_id=document["core_id"],
        scope=document["scope"],
        before=stored_datetime(document.get("before")),
        state=document["state"],
        owner=document["owner"],
        requested_at=stored_datetime(document["requested_at"]),
        done_at=stored_datetime(document.get("done_at")),
        removed={name: int(removed.get(name) or 0) for name in COUNTERS},
        kept_units=tuple(document.get("kept_units") or ()),
        slices=int(document.get("slices") or 0),
        parts=int(document.get("parts") or 0),
    )


__all__ = ["ErasureRequest", "ErasureRequests", "ErasureState"]
