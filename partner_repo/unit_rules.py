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
    other = await units.find_one({"_id": {"$ne": unit.id}, "slice_ids": {"$in": ids}}, {"slice_ids": 1})
    if other is not None:
        theirs = set(other.get("slice_ids") or [])
        clash = next((i for i in ids if i in theirs), ids[0])
        raise DuplicateSliceId(str(clash), str(other["_id"]))


SLICE_ID_KEYS = ("slice_ids", "slices.id")
"""The unique slice-id index's key: ``slice_ids`` now; ``slices.id`` on databases not migrated yet."""


def is_slice_id_collision(exc: DuplicateKeyError) -> bool:
    """Whether a duplicate-key error came from the unique slice-id index (not from ``_id``)."""
    details = exc.details or {}
    pattern = details.get("keyPattern") or {}
    message = str(details.get("errmsg", ""))
    return any(key in pattern for key in SLICE_ID_KEYS) or "slice_id" in message


def duplicate_error(exc: DuplicateKeyError, unit_id: str, exists_hint: str) -> Exception:
    """The project's error for a duplicate key: :class:`DuplicateSliceId`, or a conflict on the unit's id."""
    if is_slice_id_collision(exc):
        values = (exc.details or {}).get("keyValue") or {}
        value = next((values[key] for key in SLICE_ID_KEYS if values.get(key) is not None), None)
        return DuplicateSliceId(str(value) if value is not None else "?", None)
    return ConflictError(f"unit {unit_id!r} {exists_hint}".strip())


__all__ = ["duplicate_error", "is_slice_id_collision", "refuse_foreign_slice_ids", "refuse_too_large"]
