"""Write-side unit invariants shared by every path that writes ``memory_units`` (save, append, adoption).

Two rules are checked in code before anything is sent: no unit passes the document size limit, and a slice id
belongs to one unit only (mongomock ignores unique multikey indexes; on a server the unique index backs the
check and its duplicate-key error is translated here).
"""

from __future__ import annotations

from typing import Any

from pymongo.errors import DuplicateKeyError

from partner_repo.errors import ConflictError, DuplicateSliceId, UnitTooLarge
from partner_repo.models import MemoryUnit


def refuse_too_large(unit_id: str, size_bytes: int, limit_bytes: int) -> None:
    """:class:`UnitTooLarge` when a unit of ``size_bytes`` would pass ``limit_bytes``."""
    if size_bytes > limit_bytes:
        raise UnitTooLarge(unit_id, size_bytes, limit_bytes)


async def refuse_foreign_slice_ids(units: Any, unit: MemoryUnit) -> None:
    """:class:`DuplicateSliceId` when another unit already holds one of ``unit``'s slice ids."""
    ids = [s.id for s in unit.complete_slices()]
    if not ids:
        return
    other = await units.find_one(
        {"_id": {"$ne": unit.id}, "slices.id": {"$in": ids}},
        {"slices": {"$elemMatch": {"id": {"$in": ids}}}},
    )
    if other is not None:
        clash = (other.get("slices") or [{}])[0].get("id") or ids[0]
        raise DuplicateSliceId(str(clash), str(other["_id"]))


def is_slice_id_collision(exc: DuplicateKeyError) -> bool:
    """Whether a duplicate-key error came from the unique slice-id index (not from ``_id``)."""
    details = exc.details or {}
    in_key = "slices.id" in (details.get("keyPattern") or {})
    return in_key or "slice_id_unique" in str(details.get("errmsg", ""))


def duplicate_error(exc: DuplicateKeyError, unit_id: str, exists_hint: str) -> Exception:
    """The project's error for a duplicate key: :class:`DuplicateSliceId`, or a conflict on the unit's id."""
    if is_slice_id_collision(exc):
        value = ((exc.details or {}).get("keyValue") or {}).get("slices.id")
        return DuplicateSliceId(str(value) if value is not None else "?", None)
    return ConflictError(f"unit {unit_id!r} {exists_hint}".strip())


__all__ = ["duplicate_error", "is_slice_id_collision", "refuse_foreign_slice_ids", "refuse_too_large"]
