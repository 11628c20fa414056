"""Listing cores: a page of cores with their window, current unit, last roll and lease, without their
windows' messages.

Pages are keyset-based on the core id (the ``_id`` index): a page is the first ``limit`` ids after the last
one shown, never a ``skip``, so a walk over every page returns each core once, in id order, at the same cost
on page 1 and page 1,000. A search by id is a prefix of the id, matched literally as an ``_id`` range (no
regex, no operator). Per page: one aggregation on ``memory_cores`` (the ids, each core's fields but its
messages, the window's length counted by the server) and one ``$in`` lookup of the units its cores' last
rolls wrote to and their current units, by ``_id``: two index-backed queries, whatever the number of cores
or slices.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from partner_repo.admin._views import CorePage, CoreView, UnitCounts
from partner_repo.clock import to_utc_ms
from partner_repo.errors import InvalidInput
from partner_repo.mongo import CORES, UNIT_FINGERPRINT_INDEX, UNITS, MongoDatabase, OperationFailure, driver
from partner_repo.validation import require_id

MAX_PREFIX_LENGTH = 200


async def core_page(
    database: MongoDatabase,
    *,
    prefix: str | None,
    after: str | None,
    limit: int,
    max_time_ms: int,
) -> CorePage:
    """One page of cores in id order: those whose id starts with ``prefix`` (all when None), after the core
    id ``after`` (a previous page's ``next_cursor``), at most ``limit`` of them."""
    ids: dict[str, Any] = {}
    if prefix:
        if not isinstance(prefix, str) or len(prefix) > MAX_PREFIX_LENGTH:
            raise InvalidInput(f"a core id prefix is a string of at most {MAX_PREFIX_LENGTH} characters")
        ids = {"$gte": prefix, "$lt": prefix + "\U0010ffff"}  # every id that starts with it, as an _id range
    if after is not None:
        after = require_id(after, "after")
        if after >= ids.get("$gte", after):  # past the prefix's first id: the page starts after it
            ids.pop("$gte", None)
            ids["$gt"] = after
    match: dict[str, Any] = {"_id": ids} if ids else {}
    pipeline: list[dict[str, Any]] = [
        {"$match": match},
        {"$sort": {"_id": 1}},
        {"$limit": limit + 1},
        {"$addFields": {"window_count": {"$size": {"$ifNull": ["$chat_messages", []]}}}},
        {"$project": {"chat_messages": 0}},
    ]
    documents = await driver.aggregate_list(database[CORES], pipeline, limit + 1, maxTimeMS=max_time_ms)
    more = len(documents) > limit
    documents = documents[:limit]
    units = await _units(database, documents, max_time_ms)
    items = [_view(document, units) for document in documents]
    return CorePage(items=items, next_cursor=items[-1].id if more and items else None)


async def _units(
    database: MongoDatabase, cores: list[dict[str, Any]], max_time_ms: int
) -> dict[str, dict[str, Any]]:
    """The current and last rolled units of ``cores`` (their time and counts), by id, in one lookup."""
    wanted = {
        value
        for core in cores
        for value in (core.get("memory_session_id"), core.get("last_unit_id"))
        if isinstance(value, str)
    }
    if not wanted:
        return {}
    found = (
        await database[UNITS]
        .find(
            {"_id": {"$in": sorted(wanted)}},
            {"_id": 1, "updated_at": 1, "message_count": 1, "slice_count": 1},
            max_time_ms=max_time_ms,
        )
        .to_list(length=None)
    )
    return {str(unit["_id"]): unit for unit in found}


def _view(document: dict[str, Any], units: dict[str, dict[str, Any]]) -> CoreView:
    session = document.get("memory_session_id")
    current = units.get(session) if isinstance(session, str) else None
    last = units.get(document.get("last_unit_id") or "") or current
    owner = document.get("lease_owner")
    size = document.get("window_count")
    counted = document.get("window_bytes")
    return CoreView(
        id=str(document["_id"]),
        session_unit_id=session if isinstance(session, str) else None,
        session_continues=document.get("session_continues"),
        window_messages=size if _count(size) else 0,
        window_bytes=counted if _count(counted) else None,
        window_start=document["window_start"] if _count(document.get("window_start")) else 0,
        last_interaction_at=_moment(document.get("last_interaction_at")),
        idle_rolled=document.get("idle_rolled") is True,
        lease_owner=owner if isinstance(owner, str) else None,
        lease_beat=document["lease_beat"] if _count(document.get("lease_beat")) else 0,
        last_roll_at=_moment((last or {}).get("updated_at")),
        unit_messages=_count_or_none((current or {}).get("message_count")),
        unit_slices=_count_or_none((current or {}).get("slice_count")),
    )


def _moment(value: object) -> datetime | None:
    """A stored time in the library's form; anything else (another tool's value) shows as unknown."""
    return to_utc_ms(value) if isinstance(value, datetime) else None


def _count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _count_or_none(value: object) -> int | None:
    return value if isinstance(value, int) and _count(value) else None


async def unit_counts(
    database: MongoDatabase, unit_ids: list[str], max_time_ms: int
) -> dict[str, UnitCounts]:
    """The message and slice counts of these units, by id, read from the ``unit_fingerprint`` index alone
    (a covered query: no unit document is read); units that do not exist are left out."""
    if not unit_ids:
        return {}
    query = {"_id": {"$in": sorted(set(unit_ids))}}
    projection = {"_id": 1, "message_count": 1, "slice_count": 1}
    units = database[UNITS]
    try:
        rows = await (
            units.find(query, projection, max_time_ms=max_time_ms).hint(UNIT_FINGERPRINT_INDEX).to_list(None)
        )
    except OperationFailure as exc:
        if exc.code != 2 or "hint" not in str(exc).lower():
            raise
        rows = await units.find(query, projection, max_time_ms=max_time_ms).to_list(None)  # not built yet
    return {
        str(row["_id"]): UnitCounts(
            unit_id=str(row["_id"]),
            message_count=_count_or_none(row.get("message_count")) or 0,
            slice_count=_count_or_none(row.get("slice_count")) or 0,
        )
        for row in rows
    }


__all__ = ["MAX_PREFIX_LENGTH", "core_page", "unit_counts"]
