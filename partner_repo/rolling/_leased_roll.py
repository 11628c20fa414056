"""One roll of one core by the roller holding its lease: resolve, summarize, append fenced, trim.

Correctness never rests on the lease (a roller may stall past it at any point): each write is fenced on its
own.

- **The append** is fenced on positions (:mod:`partner_repo.rolling._positions`): it lands only while the unit
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

from partner_repo.cores import CoreLease, MemoryCoreRepository, dropped_count
from partner_repo.errors import ConflictError, LeaseLost, NotFound, StaleIncrement
from partner_repo.events import RollingResult
from partner_repo.models import MemoryCore, MemorySlice, Message
from partner_repo.mongo import ConnectionFailure, bson_size
from partner_repo.normalization import new_slice_id
from partner_repo.rolling._config import RollingConfig
from partner_repo.rolling._plan import continues_elsewhere, rollable_prefix, storable_summary
from partner_repo.rolling._positions import Resolution, WholeWindowNeeded, resolve
from partner_repo.rolling._summarizing import Summary
from partner_repo.units import MemoryUnitRepository, UnitHead

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
        self,
        core: MemoryCore,
        held: HeldLease,
        refresh_session: bool,
        stamp: datetime,
        *,
        single: bool = False,
        skipped: int = 0,
    ) -> RollingResult | None:
        """Roll ``core`` (the snapshot taken with the lease, which may leave out its first ``skipped``
        messages, known stored); None when there was nothing to store, or the lease was lost before anything
        was stored. A count roll gives the lease back with its trim. A window of one message rolls only when
        it is large (``trigger_bytes``) or ``single`` says so."""
        try:
            return await self._run(core, held, refresh_session, stamp, single=single, skipped=skipped)
        except WholeWindowNeeded:  # the snapshot left out messages the resolution needs after all
            whole = await self._cores.get(core.id)
            if whole is None or whole.window_start != core.window_start:
                return None  # gone, or trimmed meanwhile under a lease no longer ours: nothing to do here
            return await self._run(whole, held, refresh_session, stamp, single=single, skipped=0)

    async def _run(
        self,
        core: MemoryCore,
        held: HeldLease,
        refresh_session: bool,
        stamp: datetime,
        *,
        single: bool,
        skipped: int,
    ) -> RollingResult | None:
        owner = held.owner
        snapshot = list(core.chat_messages)  # the window but for its first ``skipped`` messages
        sizes = [bson_size(message.model_dump()) for message in snapshot]
        size = skipped + len(snapshot)
        if not size or (size == 1 and not single and sum(sizes) < self._config.trigger_bytes):
            return None  # Partner's rule: one message is no conversation yet, unless it is a big one
        for attempt in range(RESOLVE_ATTEMPTS):
            # the first resolution may use the heads this process last saw; after a failed fence, read
            resolution = await resolve(self._units, core, snapshot, cached=not attempt, skipped=skipped)
            increment = snapshot[resolution.taken - skipped :]
            if not increment:  # stored already (a roll whose trim failed): finish that trim first
                drop = resolution.settled_drop()
                await self._trim(held, size, sizes, drop, release=not refresh_session, exact=True)
                if refresh_session:
                    await self._refresh(core, owner, size - drop, stamp)
                return None
            part = increment[: rollable_prefix(increment)]
            asked = await self._summarize(core.id, owner, part)
            if asked is None:
                return None
            summary = self._storable(core.id, asked.text)
            unit_id, expected = resolution.unit_id, resolution.expected_start
            previous = core.session_continues if resolution.head is None else None  # a continuation's link
            consumed = resolution.taken + len(part)
            failed = asked.failed  # every attempt failed: the placeholder, marked for resummarize
            try:
                head = resolution.head
                if head is not None and (
                    head.sealed
                    or continues_elsewhere(head, part, summary, stamp, self._config.unit_soft_limit_bytes)
                ):
                    opened = await self._continue(core, owner, head, stamp)
                    if opened is None:
                        return None
                    core, previous, unit_id, expected = opened, unit_id, opened.memory_session_id, 0
                trimmed_to = resolution.window_start + dropped_count(
                    size, consumed, self._config.retain_divisor
                )
                piece = await self._append(
                    core.id,
                    unit_id,
                    part,
                    summary,
                    stamp,
                    consumed,
                    previous,
                    expected,
                    resolution,
                    trimmed_to,
                    failed,
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
            await self._trim(held, size, sizes, consumed, release=not refresh, stored=piece.id)
            if refresh:
                kept = size - dropped_count(size, consumed, self._config.retain_divisor)
                await self._refresh(core, owner, kept, stamp)
            return RollingResult.from_slice(unit_id, core.id, piece, part)
        logger.warning(
            "core %r: the unit kept moving on under this roll (%d resolutions); nothing stored, the next "
            "roll tries again",
            core.id,
            RESOLVE_ATTEMPTS,
        )
        return None

    async def _continue(
        self, core: MemoryCore, owner: str, head: UnitHead, stamp: datetime
    ) -> MemoryCore | None:
        """Open a continuation of the full unit ``head``: seal it as resolved (else :class:`StaleIncrement`:
        it moved on), then switch the core to a new session continuing it, fenced on the lease (None: lost).
        The core as it is then."""
        if not head.sealed and not await self._units.seal(head.id, version=head.version):
            raise StaleIncrement(head.id, head.message_count, None)
        try:
            session = await self._cores.switch_session(
                core.id, lease_owner=owner, continues=head.id, now=stamp
            )
        except LeaseLost:
            logger.warning("core %r: lease lost before opening a continuation; nothing stored", core.id)
            return None
        logger.info("core %r: unit %r is full; continuing in unit %r", core.id, head.id, session)
        continued: MemoryCore = core.model_copy(
            update={"memory_session_id": session, "session_continues": head.id}
        )
        return continued

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
        trimmed_to: int,
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
                    trimmed_to=trimmed_to,
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
        self,
        held: HeldLease,
        window_size: int,
        sizes: list[int],
        consumed: int,
        *,
        release: bool,
        stored: str | None = None,
        exact: bool = False,
    ) -> None:
        """Trim what the roll consumed (fenced on the lease), giving the lease back in the same write when
        ``release``; the window should still be the snapshot of ``window_size``, whose last messages take
        ``sizes`` bytes (no read unless it grew). ``exact``: drop exactly ``consumed`` messages (none
        retained). ``stored`` is the slice this roll stored (for the log)."""
        after = "nothing new was stored" if stored is None else f"slice {stored!r} was stored"
        # dropping exactly n is Partner's rule with a divisor past n: n - n // (n + 1) == n
        divisor = consumed + 1 if exact else self._config.retain_divisor
        try:
            await self._cores.trim_window(
                held.core_id,
                consumed,
                divisor,
                lease_owner=held.owner,
                window_size=window_size,
                release=release,
                message_bytes=sizes,
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

    async def _refresh(self, core: MemoryCore, owner: str, kept: int, stamp: datetime) -> None:
        """An idle roll's new session (fenced by the lease), and the mark that it covered the window (which
        its trim left holding ``kept`` messages)."""
        try:
            await self._cores.switch_session(core.id, lease_owner=owner, now=stamp)
        except LeaseLost:
            logger.warning("core %r: lease lost before the idle roll refreshed the session", core.id)
            return
        await self._cores.mark_idle_rolled(
            core.id, window_size=kept, last_interaction_at=core.last_interaction_at
        )


__all__ = ["APPEND_ATTEMPTS", "RESOLVE_ATTEMPTS", "HeldLease", "LeasedRoll"]
