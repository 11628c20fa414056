"""Adopting a Partner state's current session as the core's (the last step of an import).

A core that already records into a session of its own keeps it (reported); one whose session has no unit yet
takes Partner's, with a compare-and-set on the session it had. A clear's reservation under the core's session
is a unit here too: the core keeps that session, or the mark the reservation fences with would be lost.
"""

from __future__ import annotations

from partner_repo.cores import MemoryCoreRepository
from partner_repo.importing._state_format import MEMORY_JSON, ImportIssue
from partner_repo.mongo import MongoDatabase
from partner_repo.units import MemoryUnitRepository


async def adopt_session(
    database: MongoDatabase, units: MemoryUnitRepository, core_id: str, session_id: str
) -> tuple[bool, ImportIssue | None]:
    """Make Partner's current session the core's, unless the core already records into its own session:
    whether it did, and the note when the core kept its own."""
    cores = MemoryCoreRepository(database)
    core = await cores.get(core_id)
    if core is None:
        return await cores.set_session(core_id, session_id), None
    if core.memory_session_id == session_id:
        return False, None
    adopted = False
    fence = await units.fence(core.memory_session_id)
    if fence.head is None and fence.reservation is None:
        # a clear's reservation is a unit here too: adopting over it would lose the mark it fences with
        adopted = await cores.set_session(core_id, session_id, expected=core.memory_session_id)
    if adopted:
        return True, None
    kept = ImportIssue(
        file=MEMORY_JSON.as_posix(),
        item="memory_session_id",
        reason=f"core {core_id!r} already records into session {core.memory_session_id!r}; "
        f"kept it instead of {session_id!r}",
    )
    return False, kept


__all__ = ["adopt_session"]
