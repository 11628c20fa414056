"""Operator tooling: read-only queries over slices and units, and the invariant check/repair.

The front doors are :class:`SliceQueries` (``_queries``: lists, details, stats and windows of slices, with
their filters, cursors and views; pages of cores, ``_cores``) and :class:`UnitChecker` (``_check``: check
and repair, with the pure ``_inspection`` of one unit).
"""

from partner_repo.admin._check import (
    CheckReport,
    RepairReport,
    UnitChecker,
    UnitRepair,
    UnitRepairFailure,
    UnitViolations,
)
from partner_repo.admin._inspection import InvariantViolation, normalization_violations
from partner_repo.admin._queries import DEFAULT_LIMIT, MAX_LIMIT, SliceQueries
from partner_repo.admin._views import (
    CorePage,
    CoreView,
    DayCount,
    MemoryStats,
    SliceDetail,
    SlicePage,
    SliceView,
    UnitCounts,
    UnitSize,
    UnitView,
)

__all__ = [
    "CheckReport",
    "CorePage",
    "CoreView",
    "DEFAULT_LIMIT",
    "DayCount",
    "InvariantViolation",
    "MAX_LIMIT",
    "MemoryStats",
    "RepairReport",
    "SliceDetail",
    "SlicePage",
    "SliceQueries",
    "SliceView",
    "UnitChecker",
    "UnitRepair",
    "UnitRepairFailure",
    "UnitCounts",
    "UnitSize",
    "UnitView",
    "UnitViolations",
    "normalization_violations",
]
