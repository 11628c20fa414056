"""Raising a unit's positions mark outside a roll: what a window clear leaves behind.

A clear empties a core's window. Its messages must never be stored afterwards, also not by a roller that took
its snapshot before the clear and stalled: so before the window goes, the session's unit is marked as having
taken every position up to the window's end. A roller's append is fenced on that mark. For a session whose
unit does not exist yet the clear leaves a tombstone holding the mark under the unit's id (``erased_at`` and
``taken_until``, no ``core_id``: no query of units sees it, :func:`partner_repo.mongo._storage.is_tombstone`),
which the session's first append turns into the unit while the mark admits it; a stalled roller's insert finds
the id taken and the mark past its increment. Like every tombstone it expires after ``TOMBSTONE_RETENTION``;
by then the core's ``window_start`` has long moved past the erased positions, so no fresh roll reads them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from partner_repo.clock import utc_now
from partner_repo.errors import ConflictError, InvalidInput
from partner_repo.mongo import ERASED_AT, DuplicateKeyError, bson_size, is_tombstone, mark_size_change
from partner_repo.units._heads import UnitHead

FENCE_PROJECTION = {"core_id": 1, "erased_at": 1, "taken_until": 1}
"""What tells a tombstone from a unit, and the mark a clear's tombstone holds."""

MARK_ATTEMPTS = 200
"""How often raising a mark re-reads a unit that keeps changing under it."""

ReadHead = Callable[[str], Awaitable[UnitHead | None]]


async def raise_mark(units: Any, read_head: ReadHead, unit_id: str, *, core_id: str, until: int) -> None:
    """Mark every position below ``until`` taken by unit ``unit_id`` of core ``core_id`` (a mark already
    higher stays), keeping the mark trusted (its count is the unit's message count); see the module
    docstring."""
    for _ in range(MARK_ATTEMPTS):
        head = await read_head(unit_id)
        if head is None:
            if await _reserve(units, unit_id, until):
                return
            continue  # a unit now: raise its mark
        if head.core_id != core_id:
            raise InvalidInput(f"unit {unit_id!r} belongs to core {head.core_id!r}, not {core_id!r}")
        if head.mark is not None and head.mark >= until:
            return
        after = (until, head.message_count)
        grows = mark_size_change((head.taken_until, head.taken_count), after)
        result = await units.update_one(
            {"_id": unit_id, "version": head.version},
            {
                "$set": {"taken_until": until, "taken_count": head.message_count},
                "$inc": {"version": 1, "size_bytes": grows},
            },
        )
        if result.matched_count:
            return
    raise ConflictError(f"unit {unit_id!r}: marking its positions taken lost the race {MARK_ATTEMPTS} times")


async def _reserve(units: Any, unit_id: str, until: int) -> bool:
    """Leave the mark in a tombstone for a unit that does not exist; False when the unit exists by now."""
    try:
        await units.insert_one({"_id": unit_id, ERASED_AT: utc_now(), "taken_until": until, "taken_count": 0})
        return True
    except DuplicateKeyError:
        pass  # a tombstone is there already, or the unit was created meanwhile
    fence = await units.find_one({"_id": unit_id}, FENCE_PROJECTION)
    if fence is None or not is_tombstone(fence):
        return False
    if "taken_until" in fence:  # an erased unit's tombstone needs no mark: nothing is ever stored there again
        await units.update_one(
            {"_id": unit_id, "core_id": {"$exists": False}}, {"$max": {"taken_until": until}}
        )
    return True


async def seal(units: Any, unit_id: str, version: int) -> bool:
    """Seal the unit a roll is about to continue in a new one, while it is still at ``version`` (as the
    roll resolved it): from then on no positioned append lands there, so a roller that resolved against it
    earlier cannot store what the continuation takes. False: the unit moved on meanwhile (resolve again)."""
    result = await units.update_one(
        {"_id": unit_id, "version": version, "sealed": {"$ne": True}},
        {"$set": {"sealed": True}, "$inc": {"version": 1, "size_bytes": SEAL_BYTES}},
    )
    return bool(result.matched_count)


SEAL_BYTES = bson_size({"sealed": True}) - bson_size({})
"""What the seal adds to a unit's stored size (kept exact)."""


__all__ = ["FENCE_PROJECTION", "MARK_ATTEMPTS", "SEAL_BYTES", "raise_mark", "seal"]
