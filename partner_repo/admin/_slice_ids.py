"""The slice-id side of ``check`` and ``repair``: ids two units hold, and claims their unit does not hold.

Shared ids are found with one aggregation over ``memory_units`` (every unit's ids unwound and grouped by id,
only the ids of two units or more kept), not one query per unit: on a sharded cluster each of those would
go to every shard. Claims (:mod:`partner_repo.units._claims`) are walked in ``_id`` batches; each batch reads
the units it names by ``_id`` (each routed to the shards holding them).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict

from partner_repo.clock import UtcDatetime
from partner_repo.mongo import NOT_ERASED, SLICE_ID_CLAIMS, UNITS, driver, is_tombstone, stored_datetime
from partner_repo.units import ORPHAN_GRACE

SHARED_PIPELINE: list[dict[str, Any]] = [
    {"$match": NOT_ERASED},
    {"$project": {"ids": {"$setUnion": [{"$ifNull": ["$slice_ids", []]}, {"$ifNull": ["$slices.id", []]}]}}},
    {"$unwind": "$ids"},
    {"$match": {"ids": {"$type": "string"}}},
    {"$group": {"_id": "$ids", "units": {"$addToSet": "$_id"}}},
    {"$match": {"units.1": {"$exists": True}}},
]
"""Each slice id held by two units or more, with its units (the derived ``slice_ids`` and the slices' own
ids: a unit from another tool may lack the derived array)."""


class SharedSliceIds:
    """Slice id -> the units holding it (sorted), for the ids more than one unit holds."""

    def __init__(self, holders: dict[str, list[str]]) -> None:
        self._holders = holders

    def of(self, unit_id: str, slice_ids: list[str]) -> list[tuple[str, str]]:
        """(slice id, other unit) for each of ``slice_ids`` another unit also holds, by other unit."""
        pairs = [(s, other) for s in slice_ids for other in self._holders.get(s, []) if other != unit_id]
        return sorted(set(pairs), key=lambda pair: (pair[1], pair[0]))

    def let_go(self, slice_id: str, unit_id: str) -> None:
        """``unit_id`` no longer holds ``slice_id`` (repair gave it a fresh id)."""
        holders = [u for u in self._holders.get(slice_id, []) if u != unit_id]
        self._holders[slice_id] = holders if len(holders) > 1 else []


async def shared_slice_ids(database: Any, *, max_time_ms: int) -> SharedSliceIds:
    """The ids two units or more hold: one aggregation (spilling to disk past the memory limit)."""
    rows = await driver.aggregate_list(
        database[UNITS], SHARED_PIPELINE, allowDiskUse=True, maxTimeMS=max_time_ms
    )
    return SharedSliceIds({row["_id"]: sorted(str(u) for u in row["units"]) for row in rows})


class OrphanClaim(BaseModel):
    """A claim its unit does not hold: a write that did not finish (or is still on its way), or a unit
    erased or deleted since. ``releasable``: ``repair`` releases it (its unit is erased, or it is older than
    :data:`~partner_repo.units._claims.ORPHAN_GRACE`)."""

    model_config = ConfigDict(frozen=True)

    slice_id: str
    unit_id: str
    claimed_at: UtcDatetime | None
    releasable: bool

    @property
    def key(self) -> tuple[str, str]:
        """(slice id, unit id): what :meth:`~partner_repo.units._claims.SliceIdClaims.release` takes."""
        return self.slice_id, self.unit_id


async def orphan_claims(
    database: Any, now: datetime, *, batch: int, max_time_ms: int
) -> AsyncIterator[OrphanClaim]:
    """Every claim whose unit does not hold its id, in slice-id order."""
    claims, units = database[SLICE_ID_CLAIMS], database[UNITS]
    last: str | None = None
    while True:
        query: dict[str, Any] = {} if last is None else {"_id": {"$gt": last}}
        cursor = claims.find(query).sort("_id", 1).limit(batch).max_time_ms(max_time_ms)
        found = [document async for document in cursor]
        if not found:
            return
        last = found[-1]["_id"]
        named = list({document["unit_id"] for document in found})
        projection = {"slice_ids": 1, "erased_at": 1, "taken_until": 1}
        holders = units.find({"_id": {"$in": named}}, projection)
        stored = {document["_id"]: document async for document in holders.max_time_ms(max_time_ms)}
        for claim in found:
            unit = stored.get(claim["unit_id"])
            if unit is not None and not is_tombstone(unit) and claim["_id"] in (unit.get("slice_ids") or []):
                continue
            claimed_at = stored_datetime(claim.get("claimed_at"))
            # an erased unit's tombstone takes no write again; a window clear's (a mark) may become the unit
            erased = is_tombstone(unit) and not isinstance((unit or {}).get("taken_until"), int)
            old = claimed_at is None or now - claimed_at >= ORPHAN_GRACE
            yield OrphanClaim(
                slice_id=claim["_id"],
                unit_id=claim["unit_id"],
                claimed_at=claimed_at,
                releasable=erased or old,
            )
        if len(found) < batch:
            return


__all__ = ["OrphanClaim", "SharedSliceIds", "orphan_claims", "shared_slice_ids"]
