"""RollingService: Partner's ``DialogRolling`` for service processes that share one MongoDB.

A roll turns the start of a core's chat window into memory: the part of the window the current unit does not
hold yet (the increment) is summarized and appended to the unit as one slice, then the window is trimmed to
the context it keeps. Every process may roll any core. A lease on the core makes a roll single-flight (a roll
that finds it held returns None at once) without comparing clocks (:mod:`partner_repo.cores._lease`); it is
renewed while the summarizer runs. The lease only saves work: every write of the roll is fenced on its own
(:mod:`partner_repo.rolling._leased_roll`), so one increment is stored once whatever the timing; a crashed
roller's lease is taken over once another roller has watched it stay silent for its ttl."""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable, Sequence
from datetime import datetime, timedelta
from typing import Any

from partner_repo.clock import to_utc_ms, utc_now
from partner_repo.cores import DEFAULT_CORE_ID, CoreLease, MemoryCoreRepository, WindowState
from partner_repo.errors import InvalidInput, WindowTooLarge
from partner_repo.events import RollingResult
from partner_repo.leases import SilenceWatch
from partner_repo.models import MemoryCore, Message
from partner_repo.mongo import MongoDatabase, driver, library_logger
from partner_repo.rolling._background import BackgroundRolls, FailedCallback, RolledCallback, idle_pass
from partner_repo.rolling._config import RollingConfig
from partner_repo.rolling._leased_roll import HeldLease, LeasedRoll
from partner_repo.rolling._positions import stored_overlap
from partner_repo.rolling._resummarize import DEFAULT_RESUMMARIZE_LIMIT, ResummarizeReport, resummarize
from partner_repo.rolling._summarizer import Summarizer, as_async_summarizer
from partner_repo.rolling._summarizing import Summary, SummaryAttempts
from partner_repo.rolling._triggers import Trigger, due_query, trigger
from partner_repo.units import MemoryUnitRepository, UnitSummaries
from partner_repo.validation import Turn, optional_recorded_time, parse_messages, require_id

logger = library_logger("partner_repo.rolling.service")


class LeaseTaking:
    """Takes cores' leases for one service's rolls: at once when free, or once its holder stayed silent for
    its ttl.

    A held lease is watched on this process's monotonic clock (:class:`partner_repo.leases.SilenceWatch`): its
    holder and beat must stay unchanged for the holder's ttl before a compare-and-set on exactly them takes it
    over. No clocks are compared across processes.
    """

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


POLL_S = 0.05
"""How often a turn waiting for another process's roll to make room looks at the core's lease again."""

Roll = Callable[[], Awaitable[RollingResult | None]]
"""A roll of the core that makes room (None: nothing stored, or the lease is held by another roller)."""


class RoomForTurn:
    """Records one turn the window cannot take (:class:`~partner_repo.errors.WindowTooLarge`: past 16 MiB)
    once rolls made room for it.

    Each roll stores what is new (a one-message window included: every message fits in a unit, ``record``
    refuses any other) and, once nothing is new, drops what is stored from the window, retained context
    included (the turn matters more than the context). A roll of another process holding the lease is waited
    for: it gives the lease back, or its lease is taken over once silent for its ttl. Only after ``wait`` is
    the turn refused, and then nothing of it was written.
    """

    def __init__(
        self, cores: MemoryCoreRepository, roll: Roll, monotonic: Callable[[], float], wait: timedelta
    ) -> None:
        self._cores = cores
        self._roll = roll
        self._monotonic = monotonic
        self._wait = wait.total_seconds()

    async def record(self, turn: Turn) -> tuple[WindowState, RollingResult | None]:
        """The state ``record`` answered once the turn fitted, and the last roll that stored something."""
        deadline = self._monotonic() + self._wait
        rolled: RollingResult | None = None
        while True:
            result = await self._roll()
            rolled = result or rolled
            try:
                return await self._cores.record_turn(turn), rolled
            except WindowTooLarge:
                if self._monotonic() >= deadline:
                    raise
            if result is None:
                await asyncio.sleep(POLL_S)  # the lease is held: look again shortly


Clock = Callable[[], datetime]
"""Where the service reads the current time for ``now`` when the caller gives none."""

Monotonic = Callable[[], float]
"""Where the service measures how long a held lease has stayed silent (never compared across processes)."""


@driver.timeouts_surface_as_project_errors
class RollingService:
    """Rolls chat windows into memory units; see the module docstring and ``docs/rolling.md``."""

    def __init__(
        self,
        database: MongoDatabase,
        summarizer: Summarizer,
        config: RollingConfig | None = None,
        *,
        clock: Clock = utc_now,
        monotonic: Monotonic = time.monotonic,
        background_concurrency: int = 4,
        on_rolled: RolledCallback | None = None,
    ) -> None:
        summarize = as_async_summarizer(summarizer)  # async or sync, decided once: see summarizer.py
        if config is not None and not isinstance(config, RollingConfig):
            raise InvalidInput(f"config must be a RollingConfig, got {type(config).__name__}")
        for name, value in (("clock", clock), ("monotonic", monotonic)):
            if not callable(value):
                raise InvalidInput(f"{name} must be callable, got {type(value).__name__}")
        self._cores = MemoryCoreRepository(database)
        self._units = MemoryUnitRepository(database)
        self._summaries = UnitSummaries(database)
        self._lease = CoreLease(database)
        self._config = config if config is not None else RollingConfig()
        self._summarizer = SummaryAttempts(summarize, self._config)  # timeout, attempts: see summarizing.py
        self._clock = clock
        self._monotonic = monotonic
        self._taking = LeaseTaking(self._lease, SilenceWatch(monotonic), self._config.lease_duration)
        self._roll = LeasedRoll(self._cores, self._units, self._lease, self._config, self._summarize_leased)
        self._background = BackgroundRolls(
            lambda core_id, at, recorded: self.maybe_roll(core_id, at, recorded=recorded),
            concurrency=background_concurrency,
            on_rolled=on_rolled,
        )

    @property
    def config(self) -> RollingConfig:
        return self._config

    # -- the per-turn path -----------------------------------------------------------------------------------

    async def record_and_roll(
        self,
        core_id: str,
        messages: Iterable[Message | dict[str, Any]],
        *,
        at: datetime | None = None,
    ) -> RollingResult | None:
        """Record a turn, then roll when a trigger holds: the per-turn call for a service.

        Equal to ``maybe_roll(core_id, at, recorded=await cores.record(core_id, messages, at=at))``: one
        command for the turn (its answer is the window's size, not the window), and a roll (three commands
        in the common case) only when due. A turn the window cannot take (:class:`WindowTooLarge`: it would
        pass 16 MiB) rolls the window first and is recorded then, so a core never stops taking turns.
        Returns the roll's result, or None when nothing rolled. The roll waits for the summarizer: a service
        that answers the user first uses :meth:`record_and_roll_later` instead.
        """
        turn = Turn.checked(core_id, messages, at)
        recorded, rolled = await self._record(turn)
        result = await self._maybe_roll(turn.core_id, self._stamp(turn.at), recorded)
        return rolled or result

    async def record_and_roll_later(
        self,
        core_id: str,
        messages: Iterable[Message | dict[str, Any]],
        *,
        at: datetime | None = None,
    ) -> WindowState:
        """Record a turn and answer at once; the roll, when due, runs in the background.

        Use the service as an async context manager (``async with RollingService(...) as rolling:``, e.g. in
        a FastAPI lifespan): leaving it drains the pending rolls (:mod:`partner_repo.rolling._background`:
        at most ``background_concurrency`` at a time, one per core, errors logged; what shutdown cancels stays
        in the window for the next roller). Returns what ``record`` answered.
        """
        if self._background.closed:  # refused before the turn is written: InvalidInput writes nothing
            raise InvalidInput("the background rolls are closed: the service is shutting down")
        turn = Turn.checked(core_id, messages, at)
        recorded, _ = await self._record(turn)
        if self.trigger(recorded, self._stamp(turn.at)) is not None:
            self._background.schedule(recorded.core_id, turn.at, recorded)
        return recorded

    async def __aenter__(self) -> RollingService:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self, *, grace: timedelta = timedelta(seconds=30)) -> int:
        """Stop taking background rolls and drain them: wait up to ``grace``, then cancel the rest (their
        messages stay in the window for the next roller). How many were cancelled."""
        return await self._background.drain(grace)

    async def _record(self, turn: Turn) -> tuple[WindowState, RollingResult | None]:
        """Record a checked turn; one the window cannot take (:class:`WindowTooLarge`) is recorded once rolls
        made room for it (:mod:`partner_repo.rolling._service`). The roll's result, when one was needed."""
        try:
            return await self._cores.record_turn(turn), None
        except WindowTooLarge:
            stamp = self._stamp(turn.at)
            core_id = turn.core_id
            roll = lambda: self._leased_roll(core_id, stamp, _keep_session, seen=None, due=None, single=True)  # noqa: E731
            room = RoomForTurn(self._cores, roll, self._monotonic, self._config.room_wait)
            return await room.record(turn)

    # -- triggers --------------------------------------------------------------------------------------------

    async def maybe_roll(
        self,
        core_id: str = DEFAULT_CORE_ID,
        now: datetime | None = None,
        *,
        recorded: WindowState | None = None,
    ) -> RollingResult | None:
        """Roll when a trigger holds (:mod:`partner_repo.rolling._triggers`: idle, then a new session, beats
        count and bytes), decided on ``recorded`` (what ``record`` returned) or else on a read of the core's
        :class:`WindowState` (never the window), then by the server as the lease is taken."""
        core_id = require_id(core_id, "core_id")
        stamp = self._now(now)
        if recorded is not None and (not isinstance(recorded, WindowState) or recorded.core_id != core_id):
            raise InvalidInput(f"recorded must be the WindowState record() returned for core {core_id!r}")
        return await self._maybe_roll(core_id, stamp, recorded)

    async def _maybe_roll(
        self, core_id: str, stamp: datetime, recorded: WindowState | None
    ) -> RollingResult | None:
        """:meth:`maybe_roll` with checked arguments (``recorded`` None: the core's state is read)."""
        state = recorded if recorded is not None else await self._cores.window_state(core_id)
        holds = None if state is None else self.trigger(state, stamp)
        if state is None or holds is None:
            return None

        def decide(leased: MemoryCore, skipped: int) -> bool | None:
            size = skipped + len(leased.chat_messages) if skipped else None
            trigger = self.trigger(WindowState.of(leased, size), stamp)
            return None if trigger is None else trigger == "idle"

        due = due_query(stamp, self._config, holds)  # only the trigger that holds: a shorter command
        # a count roll leaves out of its snapshot what this process knows is stored (the retained context)
        skip = self._known_stored(state) if holds == "count" else 0
        return await self._leased_roll(core_id, stamp, decide, seen=state, due=due, skip=skip)

    def trigger(self, core: MemoryCore | WindowState, now: datetime) -> Trigger | None:
        """Which trigger holds for ``core`` at ``now``: ``"idle"``, ``"count"``, ``"bytes"`` or None."""
        return trigger(core, now, self._config)

    # -- rolling ---------------------------------------------------------------------------------------------

    async def roll(
        self, core_id: str = DEFAULT_CORE_ID, *, refresh_session: bool = False, now: datetime | None = None
    ) -> RollingResult | None:
        """Partner's ``triggerRolling``: roll the window now; None when there was nothing to store.

        A window of at most one message does nothing; an empty increment only refreshes the session when
        asked. Otherwise: summarize, append the increment with one slice (``created_at = now``) to the unit
        of the core's current session (a continuation unit when it would pass ``unit_soft_limit_bytes``),
        trim the window, refresh the session if asked. None as well when another roller holds the lease.
        """
        core_id = require_id(core_id, "core_id")
        if not isinstance(refresh_session, bool):
            raise InvalidInput(f"refresh_session must be a bool, got {type(refresh_session).__name__}")
        return await self._leased_roll(
            core_id, self._now(now), lambda _core, _skipped: refresh_session, seen=None, due=None
        )

    async def resolve_increment(self, core_id: str, snapshot: Sequence[Message]) -> list[Message]:
        """Partner's ``resolveChatIncrement``, by content as Partner has it (rolls resolve by position,
        :mod:`partner_repo.rolling._positions`): what of ``snapshot`` the core's current unit (or, holding
        fewer, with the one it continues) does not end with; reads only their last messages."""
        core_id = require_id(core_id, "core_id")
        messages = parse_messages(snapshot)
        core = await self._cores.get(core_id)
        if core is None:
            return messages
        session, continues = core.memory_session_id, core.session_continues
        return messages[await stored_overlap(self._units, session, continues, messages) :]

    async def _leased_roll(
        self,
        core_id: str,
        stamp: datetime,
        decide: Callable[[MemoryCore, int], bool | None],
        *,
        seen: WindowState | None,
        due: dict[str, Any] | None,
        single: bool = False,
        skip: int = 0,
    ) -> RollingResult | None:
        held = HeldLease(core_id, f"roll-{uuid.uuid4()}")
        core = await self._taking.take(core_id, held.owner, seen, due, skip)
        if core is None:
            return None
        try:
            if skip and seen is not None and _moved(core, seen):  # what was skipped is not known stored
                core, skip = await self._cores.get(core_id), 0
                if core is None:
                    return None
            refresh = decide(core, skip)
            if refresh is None:
                return None
            return await self._roll.run(core, held, refresh, stamp, single=single, skipped=skip)
        finally:
            if not held.released:
                await self._release(core_id, held.owner)

    def _known_stored(self, state: WindowState) -> int:
        """How many of the window's first messages this process knows its session's unit has taken (the
        mark of the head it last saw): the lease's snapshot can leave them out. A stale head only means the
        roll reads them after all (the window moved) or its append's fence fails once."""
        head = self._units.known_head(state.memory_session_id)
        mark = None if head is None else head.mark
        return 0 if mark is None else min(max(mark - state.window_start, 0), state.window_size)

    # -- the summary -----------------------------------------------------------------------------------------

    async def _summarize_leased(self, core_id: str, owner: str, increment: list[Message]) -> Summary | None:
        """The summary, the lease renewed while a slow summarizer runs; None when another roller holds the
        lease by the end of a slow one.

        A summary back within a third of the lease costs no command: no other roller can have watched the
        lease stay silent for its ttl by then. A slower one is followed by one more beat, which also tells
        whether the lease was taken over meanwhile (the roll is then abandoned before it writes). Either way
        the writes that follow are fenced on their own, so a stall past this point stores nothing twice.
        """
        keeper = asyncio.create_task(self._lease.keep(core_id, owner, duration=self._config.lease_duration))
        started = self._monotonic()
        try:
            summary = await self._summarizer(f"core {core_id!r}", increment)
        finally:
            keeper.cancel()
            await asyncio.wait({keeper})
        if self._monotonic() - started < self._config.lease_duration.total_seconds() / 3:
            return summary
        if not await self._lease.renew(core_id, owner, duration=self._config.lease_duration):
            logger.warning("core %r: lease taken over while summarizing; this roll is abandoned", core_id)
            return None
        return summary

    # -- summaries that failed ------------------------------------------------------------------------------

    async def resummarize(
        self,
        core_id: str | None = None,
        *,
        summarizer: Summarizer | None = None,
        limit: int = DEFAULT_RESUMMARIZE_LIMIT,
    ) -> ResummarizeReport:
        """Summarize again the slices stored ``unsummarized`` (every attempt of their roll failed), of one
        core or of all; at most ``limit`` of them per call.

        Each gets its raw messages summarized with ``summarizer`` (default: this service's), with the
        config's timeout and attempts, and its placeholder replaced only while it is still there (one
        conditional update), so runs at once never both replace a slice. A replaced slice's ``revision`` goes
        up, which the listener delivers again to every group. A slice whose summary fails again keeps its
        placeholder and stays marked. The report lists each slice tried, replaced, failed or skipped.
        """
        core_id = None if core_id is None else require_id(core_id, "core_id")
        summarize = self._summarizer
        if summarizer is not None:
            summarize = SummaryAttempts(as_async_summarizer(summarizer), self._config)
        return await resummarize(self._units, self._summaries, summarize, core_id=core_id, limit=limit)

    # -- the idle scheduler ----------------------------------------------------------------------------------

    async def roll_idle(
        self,
        now: datetime | None = None,
        *,
        on_rolled: RolledCallback | None = None,
        on_failed: FailedCallback | None = None,
    ) -> list[RollingResult]:
        """One pass of the idle scheduler: roll (with session refresh) every core idle at ``now``; a core
        whose roll fails is logged, told to ``on_failed`` and left for the next pass."""
        return await self._idle_pass(self._now(now), None, on_rolled, on_failed)

    async def run_idle_scheduler(
        self, stop_event: asyncio.Event, *, on_rolled: RolledCallback | None = None
    ) -> None:
        """Every ``check_interval``, roll each idle core; returns when ``stop_event`` is set.

        A failing core or pass is logged and the scheduler goes on. ``on_rolled`` (sync or async) receives
        every result (as ``roll_idle``'s does). Several processes may run it at once: the lease gives each
        idle core to one of them."""
        interval = self._config.check_interval.total_seconds()
        while not stop_event.is_set():
            try:
                await self._idle_pass(self._now(None), stop_event, on_rolled)
            except Exception:
                logger.exception("idle scheduler: the pass failed; next pass in %ss", interval)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop_event.wait(), timeout=interval)

    async def _idle_pass(
        self,
        stamp: datetime,
        stop_event: asyncio.Event | None,
        on_rolled: RolledCallback | None,
        on_failed: FailedCallback | None = None,
    ) -> list[RollingResult]:
        idle = await self._cores.idle_core_ids(stamp - self._config.idle_after)
        roll = lambda core_id: self.maybe_roll(core_id, now=stamp)  # noqa: E731
        return await idle_pass(idle, roll, stop_event, on_rolled, on_failed)

    # -- helpers ---------------------------------------------------------------------------------------------

    def _now(self, now: datetime | None) -> datetime:
        """``now`` as a caller gave it (checked), or the service's clock."""
        return self._stamp(optional_recorded_time(now, "now"))

    def _stamp(self, now: datetime | None) -> datetime:
        """A time already checked, or the service's clock."""
        return now or to_utc_ms(self._clock())

    async def _release(self, core_id: str, owner: str) -> None:
        try:
            await self._lease.release(core_id, owner)
        except Exception:
            logger.warning("core %r: could not release the lease; it will expire", core_id, exc_info=True)


def _moved(core: MemoryCore, seen: WindowState) -> bool:
    """Whether the window moved (trimmed, cleared, another session) since ``seen`` was read."""
    return (core.window_start, core.memory_session_id) != (seen.window_start, seen.memory_session_id)


def _keep_session(_core: MemoryCore, _skipped: int) -> bool:
    return False  # a roll that keeps the session (the one a turn the window cannot take makes first)


__all__ = [
    "Clock",
    "LeaseTaking",
    "POLL_S",
    "RollingService",
    "RoomForTurn",
]
