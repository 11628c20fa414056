"""Taking a core's rolling lease for a roll: at once when free, or once its holder stayed silent for its ttl.

A held lease is watched on this process's monotonic clock (:class:`partner_repo.leases.SilenceWatch`): its
holder and beat must stay unchanged for the holder's ttl before a compare-and-set on exactly them takes it
over. No clocks are compared across processes.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from partner_repo.cores import CoreLease, WindowState
from partner_repo.leases import SilenceWatch
from partner_repo.models import MemoryCore
from partner_repo.mongo import library_logger

logger = library_logger("partner_repo.rolling.service")


class LeaseTaking:
    """Takes cores' leases for one service's rolls."""

    def __init__(self, lease: CoreLease, watch: SilenceWatch, duration: timedelta) -> None:
        self._lease = lease
        self._watch = watch
        self._duration = duration

    async def take(
        self, core_id: str, owner: str, seen: WindowState | None, due: dict[str, Any] | None, skip: int
    ) -> MemoryCore | None:
        """The core with its lease taken by ``owner``, or None (held by a live roller, no longer ``due``, or
        no such core).

        A free lease is taken at once. A held one is taken over only once this process has watched its holder
        and beat stay unchanged for the holder's ttl (measured here, on this process's monotonic clock).
        """
        duration = self._duration
        state = None if seen is None else seen.lease
        if state is None or state.holder is None:
            core = await self._lease.acquire(core_id, owner, duration=duration, when=due, skip=skip)
            if core is not None or seen is not None:
                return core
            state = await self._lease.state(core_id)  # roll(): who holds it, to watch for its silence
            if state is None or state.holder is None:
                return None
        # a lease written without a ttl (0.1.0's) counts with this service's lease duration
        if not self._watch.silent(core_id, state.or_ttl(duration.total_seconds())):
            logger.debug("core %r: lease held by %s; not rolling", core_id, state.holder)
            return None
        logger.warning(
            "core %r: rolling lease of %s silent for %.0fs; taking it over",
            core_id,
            state.holder,
            state.ttl_s,
        )
        return await self._lease.acquire(core_id, owner, duration=duration, silent=state, when=due, skip=skip)


__all__ = ["LeaseTaking"]
