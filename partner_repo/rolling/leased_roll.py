"""One roll of one core by the roller holding its lease: resolve, summarize, append fenced, trim.

Correctness never rests on the lease (a roller may stall past it at any point): each write is fenced on its
own.

- **The append** carries the unit's message count at resolution (``expected_start``): it lands only while
  the unit still ends where the increment was resolved. A roller delayed past its lease, whose increment the
  roller that took over already stored, gets :class:`~partner_repo.errors.StaleIncrement`, resolves again,
  finds nothing new and stores nothing. So one increment is stored once, whatever the timing.
- **The trim and session switches** are fenced on ``lease_owner`` (exact, not a time): a roller that lost the
  lease changes nothing on the core.
- **A continuation unit** (the current one full) is opened by a fenced session switch that records the unit it
  continues on the core; a roller that resolves afterwards, even after a crash between switch and append,
  reads the stored tail across both units, so nothing is stored twice there either.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from pymongo.errors import ConnectionFailure

from partner_repo.cores.lease import CoreLease
from partner_repo.cores.repository import MemoryCoreRepository
from partner_repo.cores.state import StoredFront
from partner_repo.cores.window import dropped_count
from partner_repo.errors import ConflictError, LeaseLost, NotFound, StaleIncrement
from partner_repo.models import MemoryCore, MemorySlice, Message
from partner_repo.normalization import new_slice_id
from partner_repo.rolling.config import RollingConfig
from partner_repo.rolling.increment import resolve_chat_increment
from partner_repo.rolling.plan import continues_elsewhere, rollable_prefix, storable_summary
from partner_repo.rolling.result import RollingResult
from partner_repo.units.heads import UnitTail
from partner_repo.units.repository import MemoryUnitRepository

logger = logging.getLogger("partner_repo.rolling.service")

APPEND_ATTEMPTS = 3
"""How often a roll sends its append when the reply is lost; the same slice id makes a repeat a no-op."""

RESOLVE_ATTEMPTS = 3
"""How often a roll resolves its increment again after its fenced append found the unit moved on."""

Summarize = Callable[[str, str, list[Message]], Awaitable[str | None]]
"""``(core_id, lease_owner, increment) -> summary``, or None when the lease was lost while summarizing."""


@dataclass
class HeldLease:
    """A roll's lease on one core: who holds it, and whether the roll's last write already gave it back."""

    core_id: str
    owner: str
    released: bool = False


@dataclass(frozen=True)
class Resolution:
    """What of a snapshot is new to the current session's unit, and where that unit ends."""

    increment: list[Message]
    tail: UnitTail | None

    @property
    def message_count(self) -> int:
        return 0 if self.tail is None else self.tail.message_count


async def resolve(
    units: MemoryUnitRepository,
    session_id: str,
    continues: str | None,
    snapshot: Sequence[Message],
    known: StoredFront | None = None,
) -> Resolution:
    """Partner's ``resolveChatIncrement`` against the stored tail: the session unit's last messages, and, when
    it holds fewer than the snapshot and continues a full unit, that unit's last ones before them.

    With the window's ``known`` stored front (what the last roll left stored) only that front is read:
    when the unit still holds the messages it held then and ends with that front, the increment is the rest
    of the snapshot, exactly. Anything else (the unit moved on, another tool changed it) reads the full tail.
    """
    if known is not None and known.unit_id == session_id and known.front <= len(snapshot):
        tail = await units.tail(session_id, known.front)
        if (
            tail is not None
            and tail.message_count == known.message_count
            and list(tail.messages) == list(snapshot[: known.front])
        ):
            return Resolution(list(snapshot[known.front :]), tail)
    tail = await units.tail(session_id, len(snapshot))
    stored = [] if tail is None else list(tail.messages)
    previous = continues if tail is None else tail.previous_unit_id
    if previous is not None and len(stored) < len(snapshot):
        before = await units.tail(previous, len(snapshot) - len(stored))
        stored = ([] if before is None else list(before.messages)) + stored
    return Resolution(resolve_chat_increment(stored, snapshot), tail)


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
        session, continues = core.memory_session_id, core.session_continues
        stored = StoredFront.parse(core.window_stored)
        for _ in range(RESOLVE_ATTEMPTS):
            resolution = await resolve(self._units, session, continues, snapshot, stored)
            stored = None  # a second resolution (the unit moved on under this roll) reads the whole tail
            increment = resolution.increment
            if not increment:
                if refresh_session:
                    await self._refresh(core, owner, len(snapshot), 0, stamp)  # nothing trimmed
                return None
            part = increment[: rollable_prefix(increment)]
            summary = await self._summarize(core.id, owner, part)
            if summary is None:
                return None
            summary = self._storable(core.id, summary)
            expected, unit_id = resolution.message_count, session
            previous = continues if resolution.tail is None else None  # creating a continuation: link it
            if continues_elsewhere(resolution.tail, part, summary, stamp, self._config.unit_soft_limit_bytes):
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
                expected, unit_id, previous, continues = 0, session, unit_id, unit_id
            consumed = len(snapshot) - (len(increment) - len(part))
            try:
                piece = await self._append(
                    core.id, unit_id, part, summary, stamp, consumed, previous, expected
                )
            except StaleIncrement as exc:
                # the unit moved on under this roll: someone else is at work here (a roller that took the
                # lease over, an erasure). Go on only while the lease is still ours: an erased unit looks
                # like a new one, and resolving again would store the erased messages anew.
                if not await self._lease.renew(core.id, owner, duration=self._config.lease_duration):
                    logger.warning("core %r: %s and the lease is lost; nothing stored", core.id, exc)
                    return None
                logger.info("core %r: %s; resolving the increment again", core.id, exc)
                continue
            refresh = refresh_session and len(part) == len(increment)
            await self._trim(held, len(snapshot), consumed, unit_id, piece, release=not refresh)
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
        consumed: int,
        unit_id: str,
        piece: MemorySlice,
        *,
        release: bool,
    ) -> None:
        """Trim what the roll consumed (fenced on the lease), giving the lease back in the same write when
        ``release``; the window should still hold the snapshot's ``window_size`` (no read unless it grew).
        The write also records that the kept front is stored: the last messages of unit ``unit_id``, which
        ``piece`` now ends."""
        try:
            await self._cores.trim_window(
                held.core_id,
                consumed,
                self._config.retain_divisor,
                lease_owner=held.owner,
                window_size=window_size,
                release=release,
                rolled_into=(unit_id, piece.end_index) if piece.end_index is not None else None,
            )
        except LeaseLost:
            held.released = True  # another roller holds it: there is nothing of ours to give back
            logger.warning(
                "core %r: lease taken over after slice %r was stored; the new roller trims the window",
                held.core_id,
                piece.id,
            )
            return
        except NotFound:
            held.released = True
            logger.warning(
                "core %r: erased after slice %r was stored; nothing to trim", held.core_id, piece.id
            )
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


__all__ = ["APPEND_ATTEMPTS", "RESOLVE_ATTEMPTS", "HeldLease", "LeasedRoll", "Resolution", "resolve"]
