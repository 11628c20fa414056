"""What an erased unit leaves under its id in ``memory_units``: a tombstone, ``{_id, erased_at}``.

A roller that took its lease and snapshot before an erasure, then stalled past its lease while the eraser took
the lease over, still holds an increment of the erased window. Its append is fenced on the unit (see
:mod:`partner_repo.units._append`), and the tombstone is what that fence meets: a push finds no unit, and the
insert that would create the unit again fails on the duplicate ``_id`` (:class:`StaleIncrement`). The roller
then checks its lease, which the eraser took, and stops. A TTL index removes tombstones after
:data:`~partner_repo.mongo._indexes.TOMBSTONE_RETENTION` (``docs/erasure.md`` says what remains after that).

A batch is erased in two commands, both idempotent: the core's units among the ids are deleted, then a
tombstone is inserted for every id (one unordered ``insert``; an id already taken is left as it is: a
tombstone of an earlier run, a clear's reservation, which becomes an erased unit's tombstone, or a unit of
another core). A unit of the core that a stalled roller inserted in
between is found by the ids the insert could not take; it is deleted in turn (and reported, so the erasure
announces it too), until every id of the core holds a tombstone.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from partner_repo.errors import ConflictError
from partner_repo.mongo import ERASED_AT, insert_new

ATTEMPTS = 10
"""How often a batch deletes again the units stalled rollers inserted under its ids meanwhile."""


@dataclass
class Tombstoned:
    """What erasing one batch of ids did: the units of the core it deleted, and those among them that were
    inserted after the erasure had listed its targets (with their slice ids)."""

    deleted: int = 0
    late: list[tuple[Any, list[Any]]] = field(default_factory=list)


async def tombstone_units(
    units: Any,
    core_id: str,
    unit_ids: Sequence[Any],
    at: datetime,
    slice_ids: Callable[[dict[str, Any]], list[Any]],
) -> Tombstoned:
    """Delete the core's units among ``unit_ids`` and leave a tombstone under every one of the ids, existing
    or not (a session's unit not written yet is fenced the same way); see the module docstring."""
    done = Tombstoned()
    pending = list(unit_ids)
    for _ in range(ATTEMPTS):
        result = await units.delete_many({"_id": {"$in": pending}, "core_id": core_id})
        done.deleted += int(result.deleted_count)
        taken = await insert_new(units, [{"_id": unit_id, ERASED_AT: at} for unit_id in pending])
        if not taken:
            return done
        await _erase_reservations(units, taken, at)
        cursor = units.find({"_id": {"$in": taken}, "core_id": core_id}, {"slice_ids": 1, "slices.id": 1})
        inserted = [(document["_id"], slice_ids(document)) async for document in cursor]
        if not inserted:
            return done  # every id taken holds a tombstone (or another core's unit)
        done.late += inserted  # written after the delete above: by a roller stalled past its lease
        pending = [unit_id for unit_id, _ in inserted]
    raise ConflictError(
        f"core {core_id!r}: units kept being written under the ids being erased; run the erasure again"
    )


async def _erase_reservations(units: Any, unit_ids: Sequence[Any], at: datetime) -> None:
    """A clear's reservation under one of the ids (a session whose unit does not exist yet; every id an
    erasure names is the core's) is a unit for the erasure: it becomes an erased unit's tombstone, so no
    stalled roller turns it into a unit holding the erased text (its mark would admit text recorded after
    the clear). One update, idempotent."""
    await units.update_many(
        {"_id": {"$in": list(unit_ids)}, "core_id": {"$exists": False}, "taken_until": {"$exists": True}},
        {"$set": {ERASED_AT: at}, "$unset": {"taken_until": "", "taken_count": "", "trimmed_to": ""}},
    )


__all__ = ["Tombstoned", "tombstone_units"]
