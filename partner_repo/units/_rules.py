"""Write-side unit invariants shared by every path that writes ``memory_units`` (save, append, adoption).

A unit is validated again before it is written (:func:`revalidated`), and no unit passes the document size
limit. A slice id belongs to one unit only through :mod:`partner_repo.units._claims`; a database not migrated
yet still has the unique slice-id index of 0.3, whose duplicate-key error is translated here.
"""

from __future__ import annotations

import warnings

from pydantic import ValidationError

from partner_repo.encoding import require_encodable
from partner_repo.errors import ConflictError, DuplicateSliceId, InvalidInput, UnitTooLarge
from partner_repo.models import MemoryUnit
from partner_repo.mongo import DuplicateKeyError, OperationFailure
from partner_repo.validation import first_error


def refuse_too_large(unit_id: str, size_bytes: int, limit_bytes: int) -> None:
    """:class:`UnitTooLarge` when a unit of ``size_bytes`` would pass ``limit_bytes``."""
    if size_bytes > limit_bytes:
        raise UnitTooLarge(unit_id, size_bytes, limit_bytes)


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


def revalidated(unit: MemoryUnit) -> MemoryUnit:
    """A fresh, validated copy: a unit changed after it was built (fields assigned, lists appended to) is
    checked again, so bad data is refused with :class:`InvalidInput` before anything is written."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # pydantic warns while dumping the very values we refuse below
            copy: MemoryUnit = MemoryUnit.model_validate(unit.model_dump())
    except ValidationError as exc:
        raise InvalidInput(f"unit {getattr(unit, 'id', None)!r} is invalid: {first_error(exc)}") from exc
    for position, message in enumerate(copy.conversation_messages):
        require_encodable(message.content, f"unit {copy.id!r}: the content of message {position}")
    for position, piece in enumerate(copy.complete_slices()):
        require_encodable(piece.summary, f"unit {copy.id!r}: the summary of slice {position}")
    return copy


def is_missing_index(exc: OperationFailure) -> bool:
    """The hinted index does not exist (indexes left to migrations that have not run): scan without it."""
    return exc.code == 2 and "hint" in str(exc).lower()


__all__ = [
    "duplicate_error",
    "is_missing_index",
    "is_slice_id_collision",
    "refuse_too_large",
    "revalidated",
]
