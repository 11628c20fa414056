"""Repairing one unit: the state of a repair in progress and the slice-id renamings it makes (pure)."""

from __future__ import annotations

from typing import Any

from partner_repo.admin._inspection import (
    DUPLICATE_SLICE_ID,
    ID_TOO_LONG,
    UNREADABLE,
    InvariantViolation,
    abbreviated,
)
from partner_repo.admin._slice_ids import SharedSliceIds
from partner_repo.admin._unit_reports import UnitRepair, UnitRepairFailure, UnitViolations
from partner_repo.models import MAX_ID_LENGTH, MemoryUnit
from partner_repo.normalization import new_slice_id


class Repairing:
    """One unit's repair in progress: what was reported, what is wrong now, whether it was completed."""

    def __init__(self, report: UnitViolations) -> None:
        self.report = report
        self.current = report
        self.adopted = False

    def done(self, changes: list[InvariantViolation], version: Any) -> UnitRepair:
        number = version if isinstance(version, int) and not isinstance(version, bool) else 0
        return UnitRepair(
            unit_id=self.report.unit_id, core_id=self.report.core_id, changes=changes, version=number
        )

    def failure(self, reason: str) -> UnitRepairFailure:
        report = self.report
        return UnitRepairFailure(
            unit_id=report.unit_id, core_id=report.core_id, violations=report.violations, reason=reason
        )

    def unrepairable(self) -> UnitRepairFailure:
        if any(p.code == UNREADABLE for p in self.report.violations):
            return self.failure("the stored document is not a valid unit; fix or delete it by hand")
        return self.failure(
            f"a unit's own, core or previous unit id longer than {MAX_ID_LENGTH} characters cannot be "
            "renamed in place; copy the unit under a shorter id by hand"
        )


def release_shared_ids(unit: MemoryUnit, shared: SharedSliceIds) -> list[tuple[InvariantViolation, str, str]]:
    """Fresh ids for slices whose ids a unit with a smaller id also uses (that unit keeps them): each change,
    with the id let go and the unit keeping it."""
    changes: list[tuple[InvariantViolation, str, str]] = []
    lost: dict[str, str] = {}
    for slice_id, other in shared.of(unit.id, sorted({s.id for s in unit.complete_slices() if s.id})):
        if other < unit.id:
            lost[slice_id] = min(other, lost.get(slice_id, other))
    for piece in unit.slices:
        if piece is not None and piece.id in lost:
            fresh, keeper = new_slice_id(), lost[piece.id]
            detail = f"slice id {piece.id!r} (kept by unit {keeper!r}) is now {fresh!r}"
            changes.append((InvariantViolation(code=DUPLICATE_SLICE_ID, detail=detail), piece.id, keeper))
            piece.id = fresh
    return changes


def shorten_slice_ids(unit: MemoryUnit) -> list[InvariantViolation]:
    """Fresh ids for slices whose ids are over the id limit (written by another tool)."""
    changes: list[InvariantViolation] = []
    for piece in unit.slices:
        if piece is not None and piece.id is not None and len(piece.id) > MAX_ID_LENGTH:
            fresh = new_slice_id()
            detail = f"slice id {abbreviated(piece.id)} is now {fresh!r}"
            changes.append(InvariantViolation(code=ID_TOO_LONG, detail=detail))
            piece.id = fresh
    return changes


__all__ = ["Repairing", "release_shared_ids", "shorten_slice_ids"]
