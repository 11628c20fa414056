"""The rolling lease on a memory core: single-flight rolling across processes, skew-proof.

The lease lives on the core document: ``lease_owner`` (the roller holding it), ``lease_beat`` (a heartbeat
counter the holder increments while it works) and ``lease_ttl_ms`` (how long the holder may stay silent). No
time is stored: a roller that finds the lease held watches owner and beat on its own monotonic clock
(:class:`partner_repo.leases.SilenceWatch`) and takes the lease over only with a compare-and-set on exactly
the owner and beat it watched stay unchanged for the holder's ttl. Clock skew between processes therefore
never lets a second roller in early; a crashed roller's lease is taken over by whoever keeps looking.

Every write here is one atomic update on the core. The lease is an optimisation: what it protects is also
fenced on its own (the append on the unit's message count, the trim and session switches on ``lease_owner``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from partner_repo.errors import InvalidInput
from partner_repo.leases import LeaseState
from partner_repo.models import MemoryCore
from partner_repo.mongo import CORES, MongoDatabase, ReturnDocument, library_logger
from partner_repo.validation import require_id

logger = library_logger("partner_repo.cores.lease")

LEASE_PROJECTION = {"lease_owner": 1, "lease_beat": 1, "lease_ttl_ms": 1}


RELEASED: dict[str, dict[str, Any]] = {"$set": {"lease_owner": None}, "$inc": {"lease_beat": 1}}
"""The update that gives a lease back (merged into the roll's last write, the trim)."""


WHOLE = 2**31 - 1
"""A ``$slice`` count no window reaches: the rest of the window after the skipped messages."""


def _skipping(skip: int) -> dict[str, Any] | None:
    """Every field, the window but for its first ``skip`` messages. The projection also excludes a field
    (the 0.1.0 lease's, never read): alone, ``$slice`` is an exclusion projection to MongoDB but an inclusion
    to mongomock; with an exclusion both return every other field, as the manual says."""
    return {"chat_messages": {"$slice": [skip, WHOLE]}, "lease_until": 0} if skip else None


def lease_of(core: MemoryCore) -> LeaseState:
    """The lease state of a core as read."""
    return lease_state(core.lease_owner, core.lease_beat, core.lease_ttl_ms)


def lease_state(owner: Any, beat: Any, ttl_ms: Any) -> LeaseState:
    """A lease as stored (fields written by another tool read as a free lease, beat 0, no ttl)."""
    beat = beat if isinstance(beat, int) and not isinstance(beat, bool) else 0
    ttl = ttl_ms / 1000 if isinstance(ttl_ms, int | float) and ttl_ms > 0 else 0.0
    return LeaseState(holder=owner if isinstance(owner, str) else None, beat=beat, ttl_s=ttl)


class CoreLease:
    """Takes, renews and releases the rolling lease of the cores on the database it is given."""

    def __init__(self, database: MongoDatabase) -> None:
        self._cores = database[CORES]

    async def acquire(
        self,
        core_id: str,
        owner: str,
        *,
        duration: timedelta,
        silent: LeaseState | None = None,
        when: Mapping[str, Any] | None = None,
        skip: int = 0,
        changes_unit: bool = False,
    ) -> MemoryCore | None:
        """Take the lease if it is free, or if it is still exactly ``silent`` (a holder and beat the caller
        watched stay unchanged for that holder's ttl); the core at that instant (the roller's snapshot), else
        None (held, no such core, or the core does not meet ``when``). Of several callers at once exactly
        one wins.

        ``when`` is a query the stored core must match as well (a roll's trigger): the lease is then taken
        only while the roll is still due, with the snapshot, in one command. ``skip``: the snapshot leaves out
        the window's first ``skip`` messages (ones the roller knows are stored: a ``$slice`` projection).

        ``changes_unit``: the holder changes the session's unit outside a roll (a clear's mark, an erasure's
        tombstones), so the same write ends the core's word for the head the last roll left
        (``last_unit_version``): no roller resolves by a head it remembers from before, also when the holder
        is cut short right after changing the unit.
        """
        core_id = require_id(core_id, "core_id")
        owner = require_id(owner, "owner")
        takeable: list[dict[str, Any]] = [{"lease_owner": None}]
        if silent is not None and silent.holder is not None:
            takeable.append({"lease_owner": silent.holder, "lease_beat": _beat(silent.beat)})
        query: dict[str, Any] = {"_id": core_id, "$or": takeable}
        if when:
            query = {"_id": core_id, "$and": [{"$or": takeable}, dict(when)]}
        taken: dict[str, Any] = {"lease_owner": owner, "lease_ttl_ms": _ttl_ms(duration)}
        if changes_unit:
            taken["last_unit_version"] = None
        document = await self._cores.find_one_and_update(
            query,
            {
                "$set": taken,
                "$inc": {"lease_beat": 1, "version": 1},
                "$unset": {"lease_until": ""},  # the wall-clock lease of 0.1.0, never read again
            },
            projection=_skipping(skip),
            return_document=ReturnDocument.AFTER,
        )
        if document is None:
            return None
        core: MemoryCore = MemoryCore.model_validate(document)
        return core

    async def state(self, core_id: str) -> LeaseState | None:
        """Who holds the core's lease now (None: no such core)."""
        document = await self._cores.find_one({"_id": require_id(core_id, "core_id")}, LEASE_PROJECTION)
        if document is None:
            return None
        return lease_state(
            document.get("lease_owner"), document.get("lease_beat"), document.get("lease_ttl_ms")
        )

    async def renew(self, core_id: str, owner: str, *, duration: timedelta) -> bool:
        """Beat: ``owner`` is alive for another ``duration``; False when another roller holds it by now."""
        result = await self._cores.update_one(
            {"_id": require_id(core_id, "core_id"), "lease_owner": require_id(owner, "owner")},
            {"$set": {"lease_ttl_ms": _ttl_ms(duration)}, "$inc": {"lease_beat": 1, "version": 1}},
        )
        return bool(result.matched_count)

    async def keep(self, core_id: str, owner: str, *, duration: timedelta) -> None:
        """Beat every third of ``duration`` until cancelled, or until the lease is no longer ``owner``'s;
        a beat that fails (the database unreachable) is logged and the next one tried."""
        while True:
            await asyncio.sleep(duration.total_seconds() / 3)
            try:
                if not await self.renew(core_id, owner, duration=duration):
                    return
            except Exception:
                logger.warning(
                    "core %r: could not renew the rolling lease of %s", core_id, owner, exc_info=True
                )

    async def release(self, core_id: str, owner: str) -> bool:
        """Give the lease back so the next roll need not wait; False if ``owner`` no longer held it."""
        result = await self._cores.update_one(
            {"_id": require_id(core_id, "core_id"), "lease_owner": require_id(owner, "owner")},
            {"$set": RELEASED["$set"], "$inc": {**RELEASED["$inc"], "version": 1}},
        )
        return bool(result.matched_count)


def _ttl_ms(duration: timedelta) -> int:
    if not isinstance(duration, timedelta) or duration <= timedelta(0):
        raise InvalidInput(f"lease duration must be a positive timedelta, got {duration!r}")
    return max(int(duration.total_seconds() * 1000), 1)


def _beat(beat: int) -> Any:
    """Match a beat as read; a core whose lease predates the counter has none (read as 0)."""
    return {"$in": [0, None]} if beat == 0 else beat


__all__ = ["LEASE_PROJECTION", "RELEASED", "CoreLease", "lease_of", "lease_state"]
