"""Where every listener group stands, read from the database alone (so from any process, listening or not).

For each group (``listener_checkpoints``' group documents): the lease's owner and its last heartbeat, what
the holder reported with it (source, consumers and their concurrency), how old the position a restart would
resume from is (the saved resume token under a change stream; the start of the newest polling pass whose
finds were all delivered, as of the last heartbeat, when polling), the slices pending per consumer, the
dead letters per consumer, and the last delivered slice.

*Pending* is an estimate from the checkpoints, without reading any slice: per unit, the unit's
``slice_count`` (read from the ``unit_fingerprint`` index) minus the slices the group delivered to every
consumer, minus, for a consumer, those only it has finished; units the group has no checkpoint of count in
full. It is exact for a quiet group; it can be off by a slice or two while deliveries run, and counts
slices of units no repository can read (they are never delivered; see docs/listener.md).

Times are the listener's and writers' clocks: ages compare them with this process's clock.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from partner_repo.listener.state._dead_letters import DeadLetterRepository
from partner_repo.mongo import (
    CHECKPOINTS,
    UNIT_FINGERPRINT_INDEX,
    UNITS,
    MongoDatabase,
    OperationFailure,
    driver,
    stored_datetime,
)
from partner_repo.units import MemoryUnitRepository

BATCH = 1000
"""Unit checkpoints compared with their units per round trip."""


@dataclass(frozen=True)
class ConsumerStatus:
    """One consumer of a group: its concurrency (as the holder last reported it), pending slices (estimated)
    and dead letters."""

    name: str
    concurrency: int | None
    pending: int
    dead_letters: int


@dataclass(frozen=True)
class GroupStatus:
    """One listener group; see the module docstring for what each figure means."""

    group: str
    owner: str | None
    heartbeat_at: datetime | None
    source: str | None
    position_at: datetime | None
    pending: int
    consumers: tuple[ConsumerStatus, ...]
    last_delivered_slice_at: datetime | None
    last_delivered_at: datetime | None
    start_from: str
    created_at: datetime | None

    def age(self, moment: datetime | None, now: datetime) -> float | None:
        """Seconds from ``moment`` (one of this status's times) to ``now``; None when it is unknown."""
        return None if moment is None else (now - moment).total_seconds()


async def listener_status(database: MongoDatabase, group: str | None = None) -> list[GroupStatus]:
    """Every listener group's status (only ``group``'s when given), by group name."""
    checkpoints = database[CHECKPOINTS]
    query: dict[str, Any] = {"kind": "group"} if group is None else {"kind": "group", "group": group}
    documents = [d async for d in checkpoints.find(query, {"resume_token": 0}).sort("group", 1)]
    letters = await DeadLetterRepository(database).counts(group=group)
    slices = (await MemoryUnitRepository(database).fingerprint_totals())[3]
    statuses = []
    for document in documents:
        name = document["group"]
        reported = {c["name"]: c.get("concurrency") for c in document.get("consumers") or []}
        names = {*reported, *(consumer for g, consumer in letters if g == name)}
        pending, finished = await _pending(database, name, slices)
        names |= set(finished)
        consumers = tuple(
            ConsumerStatus(
                name=consumer,
                concurrency=reported.get(consumer),
                pending=max(pending - finished.get(consumer, 0), 0),
                dead_letters=letters.get((name, consumer), 0),
            )
            for consumer in sorted(names)
        )
        source = document.get("source")
        position = "token_saved_at" if source == "change_stream" else "polled_at"
        statuses.append(
            GroupStatus(
                group=name,
                owner=document.get("owner"),
                heartbeat_at=stored_datetime(document.get("beat_at")),
                source=source,
                position_at=stored_datetime(document.get(position)),
                pending=pending,
                consumers=consumers,
                last_delivered_slice_at=stored_datetime(document.get("last_delivered_slice_at")),
                last_delivered_at=stored_datetime(document.get("last_delivered_at")),
                start_from=str(document.get("start_from", "beginning")),
                created_at=stored_datetime(document.get("created_at")),
            )
        )
    return statuses


async def _pending(database: MongoDatabase, group: str, slices: int) -> tuple[int, dict[str, int]]:
    """``(pending, finished)``: the slices not delivered to every consumer, and per consumer how many of
    those it has finished (its own pending is the difference)."""
    pending = slices
    finished_alone: dict[str, int] = {}
    async for batch in _unit_checkpoints(database, group):
        counts = await _slice_counts(database, [row["unit_id"] for row in batch])
        for row in batch:
            count = counts.get(row["unit_id"])
            if count is None:
                continue  # the unit is gone: what the group delivered of it is not pending anywhere
            undelivered = max(count - int(row["delivered"]), 0)
            pending -= count - undelivered
            alone: dict[str, int] = {}
            for entry in row["partial"]:
                if entry.get("revision"):
                    continue  # a revision of a slice counted already (revisions are not estimated)
                alone[entry["consumer"]] = alone.get(entry["consumer"], 0) + 1
            for consumer, done in alone.items():
                finished_alone[consumer] = finished_alone.get(consumer, 0) + min(done, undelivered)
    return max(pending, 0), finished_alone


async def _unit_checkpoints(database: MongoDatabase, group: str) -> AsyncIterator[list[Mapping[str, Any]]]:
    """The group's unit checkpoints in batches: unit id, how many slices it delivered, its partial entries."""
    pipeline: list[dict[str, Any]] = [
        {"$match": {"group": group, "kind": "unit"}},
        {
            "$project": {
                "unit_id": 1,
                "delivered": {"$size": {"$ifNull": ["$delivered", []]}},
                "partial": {"$ifNull": ["$partial", []]},
            }
        },
    ]
    batch: list[Mapping[str, Any]] = []
    async for row in await driver.aggregate(database[CHECKPOINTS], pipeline):
        batch.append(row)
        if len(batch) >= BATCH:
            yield batch
            batch = []
    if batch:
        yield batch


async def _slice_counts(database: MongoDatabase, unit_ids: list[str]) -> dict[str, int]:
    """unit id -> its ``slice_count``, for those of ``unit_ids`` that exist (read from the index alone)."""
    collection = database[UNITS]
    query = {"_id": {"$in": unit_ids}}
    projection = {"_id": 1, "slice_count": 1}
    try:
        rows = await collection.find(query, projection).hint(UNIT_FINGERPRINT_INDEX).to_list(length=None)
    except OperationFailure as exc:
        if exc.code != 2 or "hint" not in str(exc).lower():
            raise
        rows = await collection.find(query, projection).to_list(length=None)  # the index is not built yet
    return {row["_id"]: int(row.get("slice_count") or 0) for row in rows}


__all__ = ["ConsumerStatus", "GroupStatus", "listener_status"]
