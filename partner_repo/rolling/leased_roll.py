"""One roll of one core by the roller holding its lease: resolve, summarize, append fenced, trim.

Correctness never rests on the lease (a roller may stall past it at any point): each write is fenced on its
own.

- **The append** is fenced on positions (:mod:`partner_repo.rolling.positions`): it lands only while the unit
  has taken no position at or after the increment's first, and moves the unit's mark to the increment's end.
  A roller delayed past its lease, whose increment the roller that took over already stored (or whose window
  a clear or an erasure took), gets :class:`~partner_repo.errors.StaleIncrement` and stores nothing twice.
- **The trim and session switches** are fenced on ``lease_owner`` (exact, not a time): a roller that lost the
  lease changes nothing on the core. A roll always trims what is stored, also when its increment is empty, so
  a window an earlier roll stored but could not trim is cut before a session switch.
- **A continuation unit** (the current one full) is opened by a fenced session switch that records the unit it
  continues on the core; the new unit starts from that unit's mark, so nothing is stored twice there either.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime

from pymongo.errors import ConnectionFailure

from partner_repo.cores.lease import CoreLease
from partner_repo.cores.repository import MemoryCoreRepository
from partner_repo.cores.window import dropped_count
from partner_repo.errors import ConflictError, LeaseLost, NotFound, StaleIncrement
from partner_repo.models import MemoryCore, MemorySlice, Message
from partner_repo.normalization import new_slice_id
from partner_repo.rolling.config import RollingConfig
from partner_repo.rolling.plan import continues_elsewhere, rollable_prefix, storable_summary
from partner_repo.rolling.positions import Resolution, resolve
from partner_repo.rolling.result import RollingResult
from partner_repo.rolling.summarizing import Summary
from partner_repo.units.repository import MemoryUnitRepository

logger = logging.getLogger("partner_repo.rolling.service")

APPEND_ATTEMPTS = 3
"""How often a roll sends its append when the reply is lost; the same slice id makes a repeat a no-op."""

RESOLVE_ATTEMPTS = 3
"""How often a roll resolves its increment again after its fenced append found the unit moved on."""

Summarize = Callable[[str, str, list[Message]], Awaitable[Summary | None]]
"""``(core_id, lease_owner, increment) -> summary``, or None when the lease was lost while summarizing."""


@dataclass
class HeldLease:
    """A roll's lease on one core: who holds it, and whether the roll's last write already gave it back."""

    core_id: str
    owner: str
    released: bool = False


class LeasedRoll:
    """Rolls a core whose lease the caller holds; see the module docstring."""

    def __init__(
        self,
        cores: MemoryCoreRepository,
        units: MemoryUnitRepository,
        lease: CoreLease,
        config: RollingConfig,
        summarize: Summarize,
    ) -> None:
        self._cores = cores
        self._units = units
        self._lease = lease
        self._config = config
        self._summarize = summarize

    async def run(
        self, core: MemoryCore, held: HeldLease, refresh_session: bool, stamp: datetime
    ) -> RollingResult | None:
        """Roll ``core`` (the snapshot taken with the lease); None when there was nothing to store, or the
        lease was lost before anything was stored. A count roll gives the lease back with its trim."""
        owner = held.owner
        snapshot = list(core.chat_messages)
        if len(snapshot) <= 1:
            return None
        for attempt in range(RESOLVE_ATTEMPTS):
            # the first resolution may use the heads this process last saw; after a failed fence, read
            resolution = await resolve(self._units, core, snapshot, cached=not attempt)
            increment = snapshot[resolution.taken :]
            if not increment:  # stored already (a roll whose trim failed): trim before anything else
                await self._trim(held, len(snapshot), resolution.taken, release=not refresh_session)
                if refresh_session:
                    await self._refresh(core, owner, len(snapshot), resolution.taken, stamp)
                return None
            part = increment[: rollable_prefix(increment)]
            asked = await self._summarize(core.id, owner, part)
            if asked is None:
                return None
            summary = self._storable(core.id, asked.text)
            unit_id, expected = resolution.unit_id, resolution.expected_start
            previous = core.session_continues if resolution.head is None else None  # a continuation: link it
            if continues_elsewhere(resolution.head, part, summary, stamp, self._config.unit_soft_limit_bytes):
                try:
                    session = await self._cores.switch_session(
                        core.id, lease_owner=owner, continues=unit_id, now=stamp
                    )
                except LeaseLost:
                    logger.warning(
                        "core %r: lease lost before opening a continuation; nothing stored", core.id
                    )
                    return None
                logger.info("core %r: unit %r is full; continuing in unit %r", core.id, unit_id, session)
                core = core.model_copy(update={"memory_session_id": session, "session_continues": unit_id})
                expected, previous, unit_id = 0, unit_id, session
            consumed = resolution.taken + len(part)
            failed = asked.failed  # every attempt failed: the placeholder, marked for resummarize
            try:
                piece = await self._append(
                    core.id, unit_id, part, summary, stamp, consumed, previous, expected, resolution, failed
                )
            except StaleIncrement as exc:
                # the unit moved on under this roll: someone else is at work here (a roller that took the
                # lease over, a clear, an erasure). Go on only while the lease is still ours.
                if not await self._lease.renew(core.id, owner, duration=self._config.lease_duration):
                    logger.warning("core %r: %s and the lease is lost; nothing stored", core.id, exc)
                    return None
                logger.info("core %r: %s; resolving the increment again", core.id, exc)
                continue
            refresh = refresh_session and len(part) == len(increment)
            await self._trim(held, len(snapshot), consumed, release=not refresh, stored=piece.id)
            if refresh:
                await self._refresh(core, owner, len(snapshot), consumed, stamp)
            return RollingResult.from_slice(unit_id, core.id, piece, part)
        logger.warning(
            "core %r: the unit kept moving on under this roll (%d resolutions); nothing stored, the next "
            "roll tries again",
            core.id,
            RESOLVE_ATTEMPTS,
        )
        return None

    def _storable(self, core_id: str, summary: str) -> str:
        stored, changes = storable_summary(summary)
        for change in changes:
            logger.warning("core %r: the summary is stored with %s", core_id, change)
        return stored

    async def _append(
        self,
        core_id: str,
        unit_id: str,
        increment: list[Message],
        summary: str,
        created_at: datetime,
        rolling_size: int,
        previous_unit_id: str | None,
        expected_start: int,
        resolution: Resolution,
        unsummarized: bool,
    ) -> MemorySlice:
        slice_id = new_slice_id()  # one id per attempt: a repeat after a lost reply is a no-op
        for attempt in range(1, APPEND_ATTEMPTS + 1):
            try:
                return await self._units.append(
                    unit_id,
                    increment,
                    summary,
                    core_id=core_id,
                    slice_id=slice_id,
                    created_at=created_at,
                    rolling_size=rolling_size,
                    retain_divisor=self._config.retain_divisor,
                    previous_unit_id=previous_unit_id,
                    fresh_slice_id=True,  # minted above for this roll only: no cross-unit check (shard-local)
                    expected_start=expected_start,
                    first_position=resolution.first_position,
                    unsummarized=unsummarized,
                )
            except StaleIncrement:
                raise
            except (ConnectionFailure, ConflictError) as exc:
                if attempt == APPEND_ATTEMPTS:
                    raise
                logger.warning(
                    "core %r: append of slice %r to unit %r failed (%s); sending it again",
                    core_id,
                    slice_id,
                    unit_id,
                    exc,
                )
        raise AssertionError("unreachable")  # pragma: no cover

    async def _trim(
        self, held: HeldLease, window_size: int, consumed: int, *, release: bool, stored: str | None = None
    ) -> None:
        """Trim what the roll consumed (fenced on the lease), giving the lease back in the same write when
        ``release``; the window should still hold the snapshot's ``window_size`` (no read unless it grew).
        ``stored`` is the slice this roll stored (for the log)."""
        after = "nothing new was stored" if stored is None else f"slice {stored!r} was stored"
        try:
            await self._cores.trim_window(
                held.core_id,
                consumed,
                self._config.retain_divisor,
                lease_owner=held.owner,
                window_size=window_size,
                release=release,
            )
        except LeaseLost:
            held.released = True  # another roller holds it: there is nothing of ours to give back
            logger.warning(
                "core %r: lease taken over after %s; the new roller trims the window", held.core_id, after
            )
            return
        except NotFound:
            held.released = True
            logger.warning("core %r: erased after %s; nothing to trim", held.core_id, after)
            return
        held.released = release

    async def _refresh(
        self, core: MemoryCore, owner: str, window_size: int, consumed: int, stamp: datetime
    ) -> None:
        """An idle roll's new session (fenced by the lease), and the mark that it covered the window."""
        try:
            await self._cores.switch_session(core.id, lease_owner=owner, now=stamp)
        except LeaseLost:
            logger.warning("core %r: lease lost before the idle roll refreshed the session", core.id)
            return
        kept = window_size - dropped_count(window_size, consumed, self._config.retain_divisor)
        await self._cores.mark_idle_rolled(
            core.id, window_size=kept, last_interaction_at=core.last_interaction_at
        )


__all__ = ["APPEND_ATTEMPTS", "RESOLVE_ATTEMPTS", "HeldLease", "LeasedRoll"]
