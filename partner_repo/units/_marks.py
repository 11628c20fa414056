"""Raising a unit's positions mark outside a roll: what a window clear leaves behind.

A clear empties a core's window. Its messages must never be stored afterwards, also not by a roller that took
its snapshot before the clear and stalled: so before the window goes, the session's unit is marked as having
taken every position up to the window's end. A roller's append is fenced on that mark. For a session whose
unit does not exist yet the clear leaves a *reservation*: a tombstone holding the mark under the unit's id
(``erased_at`` and ``taken_until``, no ``core_id``: no query of units sees it,
:func:`partner_repo.mongo._storage.is_tombstone`), which the session's first append turns into the unit while
the mark admits it; a stalled roller's insert finds the id taken and the mark past its increment. A
reservation is a unit for every fence: a roll resolves against its mark (:meth:`MemoryUnitRepository.fence`),
an erasure turns it into an erased unit's tombstone, an import never adopts a session over it. Like every
tombstone it expires after ``TOMBSTONE_RETENTION``; by then the core's ``window_start`` has long moved past
the erased positions, so no fresh roll reads them.

The mark also moves ``trimmed_to`` (where the window is to be cut) to the window's end: a clear cut short
after this write (its process died before it emptied the window) leaves a state the next roll recognises
and rolls forward, dropping the marked messages from the window without storing them (``docs/protocol.md``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from partner_repo.clock import utc_now
from partner_repo.errors import ConflictError, InvalidInput
from partner_repo.mongo import (
    ERASED_AT,
    DuplicateKeyError,
    bson_size,
    field_size_change,
    is_tombstone,
    mark_size_change,
)
from partner_repo.units._heads import UnitHead

FENCE_PROJECTION = {"core_id": 1, "erased_at": 1, "taken_until": 1, "trimmed_to": 1}
"""What tells a tombstone from a unit, and the mark a clear's tombstone holds."""

MARK_ATTEMPTS = 200
"""How often raising a mark re-reads a unit that keeps changing under it."""

ReadHead = Callable[[str], Awaitable[UnitHead | None]]


@dataclass(frozen=True)
class Reservation:
    """What a clear left under the id of a session whose unit does not exist yet: every position below
    ``mark`` is taken (the clear discarded it), and the window is to be cut at ``trimmed_to``."""

    mark: int
    trimmed_to: int | None


@dataclass(frozen=True)
class UnitFence:
    """What stands under a unit id, as a roll resolves against it: the unit's head, a clear's reservation, an
    erased unit's tombstone (``erased``), or nothing (all empty)."""

    head: UnitHead | None = None
    reservation: Reservation | None = None
    erased: bool = False


def fence_of(document: Mapping[str, Any] | None, head: Callable[[], UnitHead]) -> UnitFence:
    """The fence a document read with the head's projection (and ``erased_at``) stands for; ``head`` builds
    the head of a unit."""
    if document is None:
        return UnitFence()
    if not is_tombstone(document):
        return UnitFence(head=head())
    mark = document.get("taken_until")
    if isinstance(mark, int) and not isinstance(mark, bool) and "core_id" not in document:
        trimmed = document.get("trimmed_to")
        return UnitFence(reservation=Reservation(mark, trimmed if isinstance(trimmed, int) else None))
    return UnitFence(erased=True)


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
        mark = max(until, head.mark or 0)
        if head.mark is not None and head.mark >= until and (head.trimmed_to or 0) >= until:
            return
        after = (mark, head.message_count)
        grows = mark_size_change((head.taken_until, head.taken_count), after)
        grows += field_size_change("trimmed_to", head.trimmed_to, until)
        result = await units.update_one(
            {"_id": unit_id, "version": head.version},
            {
                "$set": {"taken_until": mark, "taken_count": head.message_count, "trimmed_to": until},
                "$inc": {"version": 1, "size_bytes": grows},
            },
        )
        if result.matched_count:
            return
    raise ConflictError(f"unit {unit_id!r}: marking its positions taken lost the race {MARK_ATTEMPTS} times")


async def _reserve(units: Any, unit_id: str, until: int) -> bool:
    """Leave the mark in a tombstone for a unit that does not exist; False when the unit exists by now."""
    try:
        reservation = {"_id": unit_id, ERASED_AT: utc_now(), "taken_until": until, "taken_count": 0}
        await units.insert_one({**reservation, "trimmed_to": until})
        return True
    except DuplicateKeyError:
        pass  # a tombstone is there already, or the unit was created meanwhile
    fence = await units.find_one({"_id": unit_id}, FENCE_PROJECTION)
    if fence is None or not is_tombstone(fence):
        return False
    if "taken_until" in fence:  # an erased unit's tombstone needs no mark: nothing is ever stored there again
        await units.update_one(
            {"_id": unit_id, "core_id": {"$exists": False}, "taken_until": {"$exists": True}},
            {"$max": {"taken_until": until, "trimmed_to": until}},
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


__all__ = [
    "FENCE_PROJECTION",
    "MARK_ATTEMPTS",
    "SEAL_BYTES",
    "Reservation",
    "UnitFence",
    "fence_of",
    "raise_mark",
    "seal",
]
