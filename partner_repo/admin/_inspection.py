"""What is wrong with one stored unit, described: the pure half of check/repair.

Each rule mirrors one of :func:`partner_repo.normalize_unit`'s (so ``check`` names what a save would change)
plus the stored-layout rules (derived fields exact, a version to guard writes on). A unit that breaks none
of the named rules but would still change under normalization is reported too, so no change goes unnamed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from itertools import pairwise
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from partner_repo.models import MAX_ID_LENGTH, MemoryUnit
from partner_repo.mongo import DERIVED_FIELDS, bson_size, unit_from_document
from partner_repo.normalization import normalize_unit
from partner_repo.validation import first_error

UNREADABLE = "unreadable"
UNVERSIONED = "unversioned"
DERIVED_FIELDS_WRONG = "derived_fields"
MISSING_UPDATED_AT = "missing_updated_at"
NULL_SLICE = "null_slice"
MISSING_SLICE_ID = "missing_slice_id"
REPEATED_SLICE_ID = "repeated_slice_id"
MISSING_CREATED_AT = "missing_created_at"
INTERVAL_OUT_OF_RANGE = "interval_out_of_range"
SLICES_UNSORTED = "slices_unsorted"
NOT_NORMALIZED = "not_normalized"
DUPLICATE_SLICE_ID = "duplicate_slice_id"
"""A slice id that another unit uses as well (slice ids are unique across the collection)."""
ID_TOO_LONG = "id_too_long"
"""An id over :data:`~partner_repo.models.MAX_ID_LENGTH` characters (only another tool can have written
it): repair gives such a slice a fresh id; a unit whose own, core or previous unit id is too long is left to
you."""

_FIXED_NOW = datetime(2000, 1, 1, tzinfo=UTC)


class InvariantViolation(BaseModel):
    """One broken invariant: a stable ``code`` for scripts and a ``detail`` for people."""

    model_config = ConfigDict(frozen=True)

    code: str
    detail: str


@dataclass(frozen=True)
class Inspection:
    """A unit as read (None when it does not validate) and its violations, shared slice ids excepted."""

    unit: MemoryUnit | None
    violations: list[InvariantViolation]

    @property
    def repairable(self) -> bool:
        """Readable, and its unit-level ids are within the limit (repair can rename slices, not units)."""
        unit = self.unit
        return unit is not None and not any(
            _too_long(i) for i in (unit.id, unit.core_id, unit.previous_unit_id)
        )


def inspect_document(document: Mapping[str, Any]) -> Inspection:
    """Every problem of one stored unit that can be seen without looking at other units."""
    try:
        unit = unit_from_document(document)
    except ValidationError as exc:
        detail = f"not a valid unit: {first_error(exc)}"
        return Inspection(None, [InvariantViolation(code=UNREADABLE, detail=detail)])
    violations = _layout_violations(document)
    violations += id_violations(unit)
    violations += normalization_violations(unit)
    return Inspection(unit, violations)


def id_violations(unit: MemoryUnit) -> list[InvariantViolation]:
    """Every id of the unit (its own, core, previous unit, slices) over the id limit."""
    named = [("unit id", unit.id), ("core id", unit.core_id), ("previous unit id", unit.previous_unit_id)]
    named += [(f"slice #{n} id", piece.id) for n, piece in enumerate(unit.slices) if piece is not None]
    return [
        InvariantViolation(code=ID_TOO_LONG, detail=f"{what} {abbreviated(value)} is over the limit")
        for what, value in named
        if value is not None and _too_long(value)
    ]


def abbreviated(value: str) -> str:
    """A long id for a report: its start and its length, not all of it."""
    return f"{value[:32]!r}... ({len(value)} characters, at most {MAX_ID_LENGTH} allowed)"


def _too_long(value: str | None) -> bool:
    return value is not None and len(value) > MAX_ID_LENGTH


def normalization_violations(unit: MemoryUnit) -> list[InvariantViolation]:
    """What :func:`normalize_unit` would change in ``unit``, rule by rule."""
    violations: list[InvariantViolation] = []
    count = len(unit.conversation_messages)
    if unit.updated_at is None:
        violations.append(InvariantViolation(code=MISSING_UPDATED_AT, detail="the unit has no updated_at"))
    nulls = sum(1 for piece in unit.slices if piece is None)
    if nulls:
        violations.append(InvariantViolation(code=NULL_SLICE, detail=f"{nulls} slice entries are null"))
    seen: set[str] = set()
    times: list[datetime] = []
    for position, piece in enumerate(unit.slices):
        if piece is None:
            continue
        name = f"slice {piece.id!r}" if piece.id and piece.id.strip() else f"slice #{position}"
        if piece.id is None or not piece.id.strip():
            violations.append(
                InvariantViolation(code=MISSING_SLICE_ID, detail=f"slice #{position} has no id")
            )
        elif piece.id in seen:
            detail = f"{name} appears more than once in the unit"
            violations.append(InvariantViolation(code=REPEATED_SLICE_ID, detail=detail))
        else:
            seen.add(piece.id)
        if piece.created_at is None:
            violations.append(InvariantViolation(code=MISSING_CREATED_AT, detail=f"{name} has no created_at"))
        start, end = piece.start_index, piece.end_index
        if start is None or end is None or start < 0 or end < start or end > count:
            violations.append(
                InvariantViolation(
                    code=INTERVAL_OUT_OF_RANGE,
                    detail=f"{name} covers [{start}, {end}) but the unit has {count} messages",
                )
            )
        times.append(piece.created_at or unit.updated_at or _FIXED_NOW)
    if any(later < earlier for earlier, later in pairwise(times)):
        violations.append(
            InvariantViolation(code=SLICES_UNSORTED, detail="slices are not sorted by created_at")
        )
    if not violations and normalize_unit(unit, now=_FIXED_NOW) != unit:
        violations.append(
            InvariantViolation(code=NOT_NORMALIZED, detail="normalization would change the unit")
        )
    return violations


def _layout_violations(document: Mapping[str, Any]) -> list[InvariantViolation]:
    violations: list[InvariantViolation] = []
    version = document.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        violations.append(
            InvariantViolation(
                code=UNVERSIONED, detail=f"version is {version!r}: written by another tool, not a save"
            )
        )
    expected = _derived_values(document)
    for field in DERIVED_FIELDS:
        if field not in document:
            violations.append(InvariantViolation(code=DERIVED_FIELDS_WRONG, detail=f"{field} is missing"))
        elif field in expected and _comparable(document[field]) != _comparable(expected[field]):
            violations.append(
                InvariantViolation(
                    code=DERIVED_FIELDS_WRONG,
                    detail=f"{field} is {document[field]!r}, the unit has {expected[field]!r}",
                )
            )
    return violations


def _derived_values(document: Mapping[str, Any]) -> dict[str, Any]:
    messages, slices = document.get("conversation_messages"), document.get("slices")
    pieces = slices if isinstance(slices, list) else []
    return {
        "message_count": len(messages) if isinstance(messages, list) else 0,
        "slice_count": len(pieces),
        "slice_ids": [p.get("id") for p in pieces if isinstance(p, Mapping) and isinstance(p.get("id"), str)],
        "size_bytes": bson_size(document),
    }


def _comparable(value: Any) -> Any:
    """``slice_ids`` is a set kept as an array (appends push ids at the end, slices may go in the middle)."""
    if isinstance(value, list):
        return sorted(value, key=repr)
    return value


__all__ = [
    "DUPLICATE_SLICE_ID",
    "ID_TOO_LONG",
    "Inspection",
    "InvariantViolation",
    "id_violations",
    "inspect_document",
    "normalization_violations",
]
