"""GroupLease: one active listener per group, whatever the number of processes started for it.

Without it, two ``listen`` processes of one group would both deliver everything. The lease is a field on the
group's checkpoint document, held by an owner id that beats (increments a counter) every ``ttl / 4``. A
standby never compares clocks with the holder: it watches the counter on its *own* monotonic clock and takes
the lease over (a compare-and-set on owner and counter) only once the counter has not moved for ``ttl``. A
holder whose beat finds another owner stops reading at once and becomes a standby; ``stop`` releases the
lease so a standby takes over at its next look rather than after ``ttl``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from partner_repo.leases import LeaseState, SilenceWatch
from partner_repo.listener.state._checkpoints import ListenerCheckpoints
from partner_repo.mongo import library_logger

logger = library_logger("partner_repo.listener")

DEFAULT_LEASE_TTL = 15.0
"""Seconds a holder may stay silent before a standby takes the group over (and so the failover time)."""


def new_owner_id() -> str:
    """host:pid:random, so logs say which process holds a group."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class GroupLease:
    """The lease on one group's checkpoint; see the module docstring."""

    def __init__(
        self,
        checkpoints: ListenerCheckpoints,
        *,
        owner: str,
        ttl: float = DEFAULT_LEASE_TTL,
        vitals: Callable[[], Mapping[str, Any]] | None = None,
    ) -> None:
        self._checkpoints = checkpoints
        self.owner = owner
        self.ttl = ttl
        self._vitals = vitals or dict

    @property
    def period(self) -> float:
        """How often the holder beats and a standby looks."""
        return self.ttl / 4

    async def try_acquire(self) -> bool:
        return await self._checkpoints.claim(self.owner)

    async def acquire(self, stopping: asyncio.Event) -> bool:
        """Wait until this owner holds the lease (True) or ``stopping`` is set (False)."""
        watch = SilenceWatch()
        announced: str | bool | None = False
        while not stopping.is_set():
            if await self.try_acquire():
                return True
            state = await self._checkpoints.lease_state()
            silent = watch.silent(self._checkpoints.group_name, LeaseState(state[0], state[1], self.ttl))
            if announced != state[0]:
                logger.info(*_standing_by(self._checkpoints.group_name, state[0], self.ttl))
                announced = state[0]
            if silent and await self._checkpoints.take_over(self.owner, *state):
                logger.warning(
                    "listener group %r: %s stopped beating for %.0fs; %s takes over",
                    self._checkpoints.group_name,
                    state[0],
                    self.ttl,
                    self.owner,
                )
                return True
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stopping.wait(), self.period)
        return False

    async def keep(self, lost: asyncio.Event) -> None:
        """Beat every ``period`` until cancelled; set ``lost`` (and return) when the lease is no longer ours.

        A heartbeat that keeps failing is retried; once it has failed for ``ttl`` the lease has expired (a
        standby may take it over), which is said once. The lease found no longer ours is said to be taken by
        the listener now holding it, or, when none does, to have been released or lost with its record.
        """
        failing_since: float | None = None
        while True:
            await asyncio.sleep(self.period)
            try:
                held = await self._checkpoints.beat(self.owner, self._vitals())
            except Exception as exc:  # an unreachable database: keep trying; a standby waits ttl anyway
                now = time.monotonic()
                failing_since = now if failing_since is None else failing_since
                expired = now - failing_since >= self.ttl
                logger.warning(
                    "listener group %r: lease heartbeat failed (%s)%s",
                    self._checkpoints.group_name,
                    exc,
                    f"; the lease could not be renewed for {self.ttl:g}s and has expired" if expired else "",
                )
                continue
            failing_since = None
            if not held:
                holder = await self._holder()
                if holder is not None:
                    reason = f"lost the lease to listener {holder}"
                else:
                    reason = (
                        "could not renew the lease: no listener holds it (released, or its record is gone)"
                    )
                logger.warning(
                    "listener group %r: %s %s; standing by", self._checkpoints.group_name, self.owner, reason
                )
                lost.set()
                return

    async def _holder(self) -> str | None:
        with contextlib.suppress(Exception):
            return (await self._checkpoints.lease_state())[0]
        return None

    async def report(self) -> None:
        """Beat now with fresh vitals (a source just started); nothing when the lease is no longer ours."""
        await self._checkpoints.beat(self.owner, self._vitals())

    async def release(self) -> None:
        await self._checkpoints.release(self.owner)


def _standing_by(group: str, holder: str | None, ttl: float) -> tuple[Any, ...]:
    """The log record of a standby: who holds the group, or that its lease is free but cannot be claimed."""
    if holder is not None:
        return (
            "listener group %r is held by %s; standing by (takeover after %.0fs of silence)",
            group,
            holder,
            ttl,
        )
    return (
        "listener group %r: its lease is free but could not be claimed (the group's record is missing); "
        "trying again every %.0fs",
        group,
        ttl / 4,
    )


__all__: list[str] = []  # internal to the listener: nothing here is public API
