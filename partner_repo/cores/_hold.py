"""Holding a core's rolling lease for work that must not run beside a roll: erasing it, clearing its window.

Such work takes the lease the way a roller does (:mod:`partner_repo.cores._lease`): a free lease at once, a
held one only once its holder has stayed silent for its whole ttl, watched on this process's monotonic clock;
while a live roller holds it, the work waits (up to ``wait`` seconds, then :class:`ConflictError`). Holding it
means no roll of the core starts, and no roll in flight can trim the window or switch the session (both are
fenced on the lease owner); its append resolved before is fenced on the unit's message count (see
``docs/erasure.md`` for what that leaves). Such work changes the session's unit (a clear's mark, an
erasure's tombstones), so taking the lease also ends the core's word for the head the last roll left
(``last_unit_version``), in the same write: a roller that remembers that head reads it again instead, also
after the work was cut short right after changing the unit.

A lease already held by the same owner (an erasure run again after a crash) is taken back at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from datetime import timedelta

from partner_repo.cores._lease import CoreLease
from partner_repo.errors import ConflictError
from partner_repo.leases import SilenceWatch
from partner_repo.models import MemoryCore
from partner_repo.mongo import MongoDatabase, library_logger

logger = library_logger("partner_repo.cores.hold")

DEFAULT_TTL = timedelta(seconds=60)
"""The ttl assumed for a lease written without one (partner-repo 0.1.0's), as the rolling service does."""

POLL_S = 0.05
"""How often a waiting holder looks at the lease again."""


class CoreHold:
    """Takes, keeps and gives back a core's rolling lease on the database it is given."""

    def __init__(
        self,
        database: MongoDatabase,
        *,
        monotonic: Callable[[], float] = time.monotonic,
        poll: float = POLL_S,
    ) -> None:
        self._lease = CoreLease(database)
        self._monotonic = monotonic
        self._poll = poll

    @contextlib.asynccontextmanager
    async def held(
        self, core_id: str, owner: str, *, duration: timedelta, wait: float, release_on_error: bool = True
    ) -> AsyncIterator[MemoryCore | None]:
        """``async with hold.held(...) as core:`` the core with its lease held by ``owner`` and beaten every
        third of ``duration`` (None: no such core, nothing held). Released at the end, and on an error only
        when ``release_on_error`` (an erasure cut short keeps the core from rolling until it is run again)."""
        core = await self.take(core_id, owner, duration=duration, wait=wait)
        if core is None:
            yield None
            return
        keeper = asyncio.create_task(self._lease.keep(core_id, owner, duration=duration))
        failed = False
        try:
            yield core
        except BaseException:
            failed = True
            raise
        finally:
            keeper.cancel()
            await asyncio.wait({keeper})
            if release_on_error or not failed:
                with contextlib.suppress(Exception):  # gone with the core, or it expires
                    await self._lease.release(core_id, owner)

    async def take(self, core_id: str, owner: str, *, duration: timedelta, wait: float) -> MemoryCore | None:
        """The core with its lease taken by ``owner``, or None when there is no such core; waits while a live
        roller holds it, :class:`ConflictError` when it still does after ``wait`` seconds."""
        watch = SilenceWatch(self._monotonic)
        deadline = self._monotonic() + wait
        while True:
            core = await self._lease.acquire(core_id, owner, duration=duration, changes_unit=True)
            if core is not None:
                return core
            state = await self._lease.state(core_id)
            if state is None:
                return None
            state = state.or_ttl(DEFAULT_TTL.total_seconds())
            if state.holder is not None and (state.holder == owner or watch.silent(core_id, state)):
                if state.holder != owner:
                    logger.warning(
                        "core %r: rolling lease of %s silent for %.0fs; taking it over",
                        core_id,
                        state.holder,
                        state.ttl_s,
                    )
                core = await self._lease.acquire(
                    core_id, owner, duration=duration, silent=state, changes_unit=True
                )
                if core is not None:
                    return core
                continue
            if state.holder is not None and self._monotonic() >= deadline:
                raise ConflictError(
                    f"core {core_id!r} is being rolled ({state.holder} holds its lease after {wait:g}s); "
                    "nothing of the core was changed yet: try again"
                )
            await asyncio.sleep(self._poll)


__all__ = ["CoreHold"]
