"""MemoryUnit: one memory session, its raw messages and its slices.

The front door is :class:`MemoryUnitRepository` (``repository``), which owns the unit's invariants; beside
it the fenced append (``append``), the head cache (``heads``), adoption of units written by other tools
(``adoption``), the change feed the listener reads (``feed``) and the rules a stored unit keeps (``rules``).
"""

from partner_repo.units.repository import (
    HEAD_CACHE_SIZE,
    MemoryUnitRepository,
    UnitFingerprint,
    UnitHead,
    UnitOutline,
)

__all__ = ["HEAD_CACHE_SIZE", "MemoryUnitRepository", "UnitFingerprint", "UnitHead", "UnitOutline"]
