"""One roll of one core by the roller holding its lease: resolve, summarize, append fenced, trim.

Correctness never rests on the lease (a roller may stall past it at any point): each write is fenced on its
own.

- **The append** is fenced on positions (:mod:`partner_repo.rolling._positions`): it lands only while the unit
  has taken no position at or after the increment's first, and moves the unit's mark to the increment's end.
  A roller delayed past its lease, whose increment the roller that took over already stored (or whose window
  a clear or an erasure took), gets :class:`~partner_repo.errors.StaleIncrement` and stores nothing twice.
- **The trim and session switches** are fenced on ``lease_owner`` (exact, not a time): a roller that lost the
  lease changes nothing on the core. A roll ends with one write that cuts the window, gives the lease back and
  (an idle roll) switches the session and marks the window rolled, so no state lies between those. A roll
  always cuts what is settled (:meth:`Resolution.settled_drop`), also when its increment is empty, so a
  window an earlier roll stored but could not cut, or a clear marked but could not empty, is cut before
  anything else.
- **A continuation unit** (the current one full) is opened by a fenced session switch that records the unit it
  continues on the core; the new unit starts from that unit's mark, so nothing is stored twice there either.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime

from partner_repo.cores import CoreLease, MemoryCoreRepository, RollFinish, new_session_id
from partner_repo.errors import ConflictError, ConnectionFailed, LeaseLost, NotFound, StaleIncrement
from partner_repo.events import RollingResult
from partner_repo.models import MemoryCore, MemorySlice, Message
from partner_repo.mongo import ConnectionFailure, bson_size, library_logger
from partner_repo.normalization import new_slice_id
from partner_repo.rolling._config import RollingConfig
from partner_repo.rolling._plan import continues_elsewhere, rollable_prefix, storable_summary
from partner_repo.rolling._positions import Resolution, SessionErased, WholeWindowNeeded, resolve
from partner_repo.rolling._summarizing import Summary
from partner_repo.units import MemoryUnitRepository, UnitHead

logger = library_logger("partner_repo.rolling.service")

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


@dataclass(frozen=True)
class _Roll:
    """One roll's fixed inputs: the core as the lease took it (its window, but for its first ``skipped``
    messages), the lease, whether it refreshes the session, its time, and whether it makes room for a turn
    the window cannot take (``single``: a one-message window rolls, and what is stored already leaves the
    window, retained context included)."""

    core: MemoryCore
    held: HeldLease
    refresh: bool
    stamp: datetime
    single: bool
    skipped: int
    snapshot: list[Message]
    sizes: list[int]

    @property
    def size(self) -> int:
        return self.skipped + len(self.snapshot)


_AGAIN = object()
"""What an attempt answers when its fenced append found the unit moved on while the lease is still ours."""


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
        was stored. The roll gives the lease back with its trim. A window of one message rolls only when
        it is large (``trigger_bytes``) or ``single`` says so (a roll making room for a turn)."""
        try:
            try:
                return await self._run(core, held, refresh_session, stamp, single=single, skipped=skipped)
            except WholeWindowNeeded:  # the snapshot left out messages the resolution needs after all
                whole = await self._cores.get(core.id)
                if whole is None or whole.window_start != core.window_start:
                    return None  # gone, or trimmed meanwhile under a lease no longer ours: nothing to do here
                return await self._run(whole, held, refresh_session, stamp, single=single, skipped=0)
        except SessionErased as erased:
            logger.warning(
                "core %r: its session's unit %s was erased by an erasure not finished; nothing is rolled "
                "until it is (forget the core again, or `forget --pending`)",
                core.id,
                erased,
            )
            return None

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
        snapshot = list(core.chat_messages)  # the window but for its first ``skipped`` messages
        sizes = [bson_size(message.model_dump()) for message in snapshot]
        roll = _Roll(core, held, refresh_session, stamp, single, skipped, snapshot, sizes)
        if not roll.size or (roll.size == 1 and not single and sum(sizes) < self._config.trigger_bytes):
            return None  # Partner's rule: one message is no conversation yet, unless it is a big one
        for attempt in range(RESOLVE_ATTEMPTS):
            # the first resolution may use the head this process last saw, when the core says it is current
            resolution = await resolve(self._units, core, snapshot, cached=not attempt, skipped=skipped)
            outcome = await self._attempt(roll, resolution)
            if outcome is not _AGAIN:
                return outcome  # type: ignore[return-value]
        logger.warning(
            "core %r: the unit kept moving on under this roll (%d resolutions); nothing stored, the next "
            "roll tries again",
            core.id,
            RESOLVE_ATTEMPTS,
        )
        return None

    async def _attempt(self, roll: _Roll, resolution: Resolution) -> RollingResult | object | None:
        """Store the increment ``resolution`` finds (summarized), then cut the window in one write; None when
        nothing was new (the window is cut to what is settled) or the lease was lost, :data:`_AGAIN` when the
        unit moved on under this attempt."""
        core = roll.core
        increment = roll.snapshot[resolution.taken - roll.skipped :]
        if not increment:  # stored already (a roll whose trim failed, a clear cut short): finish that cut
            await self._settle(roll, resolution)
            return None
        part = increment[: rollable_prefix(increment)]
        asked = await self._summarize(core.id, roll.held.owner, part)
        if asked is None:
            return None
        try:
            stored = await self._store(roll, resolution, part, asked)
        except StaleIncrement as exc:
            # the unit moved on under this roll: someone else is at work here (a roller that took the
            # lease over, a clear, an erasure). Go on only while the lease is still ours.
            if not await self._lease.renew(core.id, roll.held.owner, duration=self._config.lease_duration):
                logger.warning("core %r: %s and the lease is lost; nothing stored", core.id, exc)
                return None
            logger.info("core %r: %s; resolving the increment again", core.id, exc)
            return _AGAIN
        if stored is None:
            return None
        unit_id, piece = stored
        consumed = resolution.taken + len(part)
        refresh = roll.refresh and len(part) == len(increment)
        drop = resolution.drop(consumed, self._config.retain_divisor)
        finish = self._finish(roll, refresh, self._appended(unit_id, piece))
        await self._trim(roll, drop, finish, stored=piece.id)
        return RollingResult.from_slice(unit_id, core.id, piece, part)

    async def _store(
        self, roll: _Roll, resolution: Resolution, part: list[Message], asked: Summary
    ) -> tuple[str, MemorySlice] | None:
        """Append ``part`` with its summary: to the session's unit, or to a continuation opened first when
        the unit is full (None: the lease was lost before that). The unit and the slice stored."""
        core, stamp = roll.core, roll.stamp
        summary = self._storable(core.id, asked.text)
        unit_id, expected = resolution.unit_id, resolution.expected_start
        previous = core.session_continues if resolution.head is None else None  # a continuation's link
        head = resolution.head
        if head is not None and (
            head.sealed or continues_elsewhere(head, part, summary, stamp, self._config.unit_soft_limit_bytes)
        ):
            opened = await self._continue(core, roll.held.owner, head, stamp)
            if opened is None:
                return None
            previous, unit_id, expected = unit_id, opened.memory_session_id, 0
        consumed = resolution.taken + len(part)
        trimmed_to = resolution.window_start + resolution.drop(consumed, self._config.retain_divisor)
        piece = await self._append(
            _Append(core.id, unit_id, part, summary, stamp, consumed, previous, expected),
            resolution,
            trimmed_to,
            asked.failed,  # every attempt failed: the placeholder, marked for resummarize
        )
        return unit_id, piece

    async def _settle(self, roll: _Roll, resolution: Resolution) -> None:
        """Nothing of the snapshot is new: cut the window to what is settled (where the roll or the clear
        that set the mark cuts it; everything stored when making room for a turn) and give the lease back,
        switching the session in the same write when asked (an idle roll)."""
        drop = resolution.taken if roll.single else resolution.settled_drop()
        await self._trim(roll, drop, self._finish(roll, roll.refresh, None))

    def _finish(self, roll: _Roll, refresh: bool, appended: tuple[str, int] | None) -> RollFinish:
        """What the roll's last write sets besides the cut: the head its append left, and for an idle roll
        the new session and the ``idle_rolled`` mark (while nothing was recorded since the snapshot)."""
        if not refresh:
            return RollFinish(appended=appended)
        return RollFinish(
            appended=appended,
            session=new_session_id(),
            started_at=roll.stamp,
            idle_since=roll.core.last_interaction_at,
        )

    def _appended(self, unit_id: str, piece: MemorySlice) -> tuple[str, int] | None:
        """The unit and version this roll's append left, when the repository saw it land (its last slice is
        this one): the core records it so the next roller that remembers it need not read the head."""
        head = self._units.known_head(unit_id)
        if head is None or head.last_slice is None or head.last_slice.id != piece.id:
            return None
        return unit_id, head.version

    async def _continue(
        self, core: MemoryCore, owner: str, head: UnitHead, stamp: datetime
    ) -> MemoryCore | None:
        """Open a continuation of the full unit ``head``: seal it as resolved (else :class:`StaleIncrement`:
        it moved on), then switch the core to a new session continuing it, fenced on the lease (None: lost).
        The core as it is then."""
        if not head.sealed and not await self._units.seal(head.id, version=head.version):
            # the unit changed since it was resolved: still sealable when it took nothing new and its cut is
            # where it was (a summary replaced), else the increment is resolved again: this roll's trim goes
            # by the cut it resolved, and a clear's mark moves it also where it takes nothing new (a head
            # remembered from before a clear cut short kept the cleared messages in the window)
            fresh = await self._units.head(head.id)
            if fresh is None or _settled(fresh) != _settled(head):
                raise StaleIncrement(
                    head.id, head.message_count, None if fresh is None else fresh.message_count
                )
            if not fresh.sealed and not await self._units.seal(head.id, version=fresh.version):
                raise StaleIncrement(head.id, head.message_count, fresh.message_count)
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
        self, append: _Append, resolution: Resolution, trimmed_to: int, unsummarized: bool
    ) -> MemorySlice:
        slice_id = new_slice_id()  # one id per attempt: a repeat after a lost reply is a no-op
        for attempt in range(1, APPEND_ATTEMPTS + 1):
            try:
                return await self._units.append(
                    append.unit_id,
                    append.increment,
                    append.summary,
                    core_id=append.core_id,
                    slice_id=slice_id,
                    created_at=append.created_at,
                    rolling_size=append.rolling_size,
                    retain_divisor=self._config.retain_divisor,
                    previous_unit_id=append.previous_unit_id,
                    fresh_slice_id=True,  # minted above for this roll only: no cross-unit check (shard-local)
                    expected_start=append.expected_start,
                    first_position=resolution.first_position,
                    trimmed_to=trimmed_to,
                    unsummarized=unsummarized,
                )
            except StaleIncrement:
                raise
            except (ConnectionFailure, ConnectionFailed, ConflictError) as exc:
                if attempt == APPEND_ATTEMPTS:
                    raise
                logger.warning(
                    "core %r: append of slice %r to unit %r failed (%s); sending it again",
                    append.core_id,
                    slice_id,
                    append.unit_id,
                    exc,
                )
        raise AssertionError("unreachable")  # pragma: no cover

    async def _trim(self, roll: _Roll, drop: int, finish: RollFinish, *, stored: str | None = None) -> None:
        """The roll's last write: drop the first ``drop`` messages of the window (fenced on the lease), give
        the lease back and set ``finish`` (an idle roll's new session), all at once; the window should still
        be the snapshot (no read unless it grew). ``stored`` is the slice this roll stored (for the log)."""
        held = roll.held
        after = "nothing new was stored" if stored is None else f"slice {stored!r} was stored"
        try:
            await self._cores.trim_window(
                held.core_id,
                drop,
                drop + 1,  # dropping exactly n is Partner's rule with a divisor past n: n - n // (n + 1) == n
                lease_owner=held.owner,
                window_size=roll.size,
                release=True,
                message_bytes=roll.sizes,
                finish=finish,
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
        held.released = True


def _settled(head: UnitHead) -> tuple[int, int | None, int | None]:
    """What a roll resolved against a unit's head rests on: its count, its mark and where it cuts."""
    return head.message_count, head.mark, head.trimmed_to


@dataclass(frozen=True)
class _Append:
    """What one roll appends: the increment's part, its summary, where, and the roll's parameters."""

    core_id: str
    unit_id: str
    increment: list[Message]
    summary: str
    created_at: datetime
    rolling_size: int
    previous_unit_id: str | None
    expected_start: int


__all__ = ["APPEND_ATTEMPTS", "RESOLVE_ATTEMPTS", "HeldLease", "LeasedRoll"]
