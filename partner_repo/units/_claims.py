"""Slice-id claims: a caller-chosen slice id belongs to the first unit that claimed it, on every topology.

A unique index on ``slice_ids`` cannot exist on ``memory_units`` sharded by ``_id`` (a unique index must be
prefixed by the shard key), so uniqueness is kept by ``slice_id_claims`` instead: one document per claimed
id, ``{_id: slice id, unit_id, claimed_at}``. The insert of that ``_id`` is the arbiter: of two writers that
want one id for different units, exactly one insert succeeds, on any topology (``_id`` is unique on its
shard, and the collection is unsharded or sharded by ``_id``). Every claim is a read or write by ``_id``:
one shard.

A claim is written *before* the unit write, and is never taken over by another writer: a crash between the
two leaves a claim its unit does not hold (an orphan). It blocks nothing of its own unit (the retry finds
the claim its own and goes on); it keeps the id from other units until ``repair`` releases it, which it
does for a claim whose unit is erased at once (nothing can land there any more) and otherwise once the
claim is :data:`ORPHAN_GRACE` old (no write is in flight that long: an append gives up after
``APPEND_PATIENCE_S``). Who holds an id is resolved by reading the claim's unit, by ``_id``.

Ids the library mints (:func:`~partner_repo.normalization.new_slice_id`, UUID4 for every roll) are unique by
construction and are not claimed: claiming would cost a write per roll. ``save`` (imports, repair) claims
every id of the unit it writes.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from datetime import datetime, timedelta
from typing import Any

from partner_repo.clock import utc_now
from partner_repo.errors import DuplicateSliceId
from partner_repo.models import MemoryUnit
from partner_repo.mongo import SLICE_ID_CLAIMS, UNITS, insert_new

ORPHAN_GRACE = timedelta(hours=1)
"""How old a claim its unit does not hold must be before ``repair`` releases it: far beyond the time any
write between a claim and its unit write can take (an append gives up after 10 s)."""


class SliceIdClaims:
    """The claims of one database: claim ids for a unit, find their holders, release them."""

    def __init__(self, database: Any) -> None:
        self._claims = database[SLICE_ID_CLAIMS]
        self._units = database[UNITS]

    async def claim(self, unit_id: str, slice_ids: Iterable[str], *, at: datetime | None = None) -> None:
        """Claim each id for ``unit_id`` (ids it already holds a claim on are kept as they are).

        :class:`DuplicateSliceId` when another unit holds a claim on one of them (found first: nothing is
        claimed; found by the insert, raced by a concurrent writer: the others of that insert stay claimed
        for ``unit_id``, as a crash would leave them: its retry finds them its own, ``repair`` releases them
        if none comes). One read by ``_id`` for several ids, then one unordered insert of those not claimed
        yet: a unit of hundreds of slices costs two round trips, not hundreds; a single id costs one."""
        wanted = list(dict.fromkeys(slice_ids))
        if not wanted:
            return
        holders = await self.holders(wanted) if len(wanted) > 1 else {}
        for slice_id in wanted:
            await self._refuse_foreign(slice_id, unit_id, holders.get(slice_id))
        stamp = at or utc_now()
        claims = [{"_id": s, "unit_id": unit_id, "claimed_at": stamp} for s in wanted if s not in holders]
        for slice_id in await insert_new(self._claims, claims):
            await self._refuse_foreign(slice_id, unit_id, await self._holder(slice_id))

    async def claim_unit(self, unit: MemoryUnit) -> None:
        """Claim every id of ``unit``'s slices for it (``save`` and adoption: a whole unit is written)."""
        await self.claim(unit.id, [s.id for s in unit.complete_slices() if s.id])

    async def holders(self, slice_ids: Collection[str]) -> dict[str, str]:
        """Slice id -> the unit that claimed it, for those of ``slice_ids`` that are claimed."""
        cursor = self._claims.find({"_id": {"$in": list(slice_ids)}}, {"unit_id": 1})
        return {document["_id"]: document["unit_id"] async for document in cursor}

    async def release_units(self, unit_ids: Collection[Any]) -> int:
        """Release every claim of these units (an erasure, a delete); returns how many went."""
        if not unit_ids:
            return 0
        result = await self._claims.delete_many({"unit_id": {"$in": list(unit_ids)}})
        return int(result.deleted_count)

    async def release(self, slice_id: str, unit_id: str) -> bool:
        """Release one claim, only while it is still ``unit_id``'s."""
        result = await self._claims.delete_one({"_id": slice_id, "unit_id": unit_id})
        return bool(result.deleted_count)

    async def transfer(self, slice_id: str, from_unit: str, to_unit: str) -> bool:
        """Hand a claim to the unit that keeps the id (repair of an id two units held), while it is
        ``from_unit``'s."""
        result = await self._claims.update_one(
            {"_id": slice_id, "unit_id": from_unit}, {"$set": {"unit_id": to_unit}}
        )
        return bool(result.matched_count)

    async def _holder(self, slice_id: str) -> str | None:
        document = await self._claims.find_one({"_id": slice_id}, {"unit_id": 1})
        return None if document is None else str(document["unit_id"])

    async def _refuse_foreign(self, slice_id: str, unit_id: str, holder: str | None) -> None:
        """:class:`DuplicateSliceId` when ``holder`` is another unit; says when that unit does not hold the
        id (an interrupted write: ``repair`` releases the claim)."""
        if holder is None or holder == unit_id:
            return
        held = await self._units.find_one({"_id": holder, "slice_ids": slice_id}, {"_id": 1})
        detail = (
            ""
            if held is not None
            else f" (claimed by it, which does not hold it: a write that did not finish; `partner-repo "
            f"repair` releases such a claim once it is {ORPHAN_GRACE} old)"
        )
        raise DuplicateSliceId(slice_id, holder, detail=detail)


__all__ = ["ORPHAN_GRACE", "SliceIdClaims"]
