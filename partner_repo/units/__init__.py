"""MemoryUnit: one memory session, its raw messages and its slices.

The front door is :class:`MemoryUnitRepository` (``_repository``), which owns the unit's invariants; beside
it the fenced append (``_append``, ``_increment``, ``_marks``), the head cache (``_heads``), slice-id claims
(``_claims``), the change feed the listener reads (``_feed``), placeholder summaries (``_summaries``), chosen
messages of several units (``_picking``) and the rules a stored unit keeps (``_rules``); units written by
other tools are adopted by the repository itself.
"""

from partner_repo.units._claims import ORPHAN_GRACE, SliceIdClaims
from partner_repo.units._feed import UnitFingerprint, UnitOutline, stored_id_problem
from partner_repo.units._heads import HEAD_CACHE_SIZE, UnitHead
from partner_repo.units._marks import UnitFence
from partner_repo.units._picking import messages_at
from partner_repo.units._repository import MemoryUnitRepository
from partner_repo.units._summaries import UnitSummaries, UnsummarizedSlice

__all__ = [
    "HEAD_CACHE_SIZE",
    "MemoryUnitRepository",
    "ORPHAN_GRACE",
    "SliceIdClaims",
    "UnitFence",
    "UnitFingerprint",
    "UnitHead",
    "UnitOutline",
    "UnitSummaries",
    "UnsummarizedSlice",
    "messages_at",
    "stored_id_problem",
]
