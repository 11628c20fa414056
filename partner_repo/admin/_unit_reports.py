"""What check and repair say about one unit: its violations, its repair, or why it could not be repaired."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from partner_repo.admin._inspection import InvariantViolation


class UnitViolations(BaseModel):
    """The violations of one unit. ``repairable`` is False when repair cannot fix them (unreadable data)."""

    model_config = ConfigDict(frozen=True)

    unit_id: str
    core_id: str | None
    violations: list[InvariantViolation]
    repairable: bool


class UnitRepair(BaseModel):
    """One repaired unit: what was wrong (now fixed), and the version it was saved as."""

    model_config = ConfigDict(frozen=True)

    unit_id: str
    core_id: str | None
    changes: list[InvariantViolation]
    version: int


class UnitRepairFailure(BaseModel):
    model_config = ConfigDict(frozen=True)

    unit_id: str
    core_id: str | None
    violations: list[InvariantViolation]
    reason: str


__all__ = ["UnitRepair", "UnitRepairFailure", "UnitViolations"]
