"""RollingService: Partner's ``DialogRolling`` for service processes that share one MongoDB.

A roll turns the start of a core's chat window into memory: the part of the window the current unit does not
hold yet (the increment) is summarized and appended to the unit as one slice, then the window is trimmed to
the context it keeps. Every process may roll any core: a lease on the core document makes a roll single-flight
(a roll that finds it held returns None at once), the lease is renewed while the summarizer runs and checked
again before the append, and the trim is fenced by it, so two rollers never store one increment twice. A
roller that crashed leaves a lease that simply expires.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import uuid
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, Literal

from pymongo.errors import ConnectionFailure

from partner_repo.clock import to_utc_ms, utc_now
from partner_repo.cores import DEFAULT_CORE_ID, MemoryCoreRepository
from partner_repo.database import MongoDatabase
from partner_repo.errors import ConflictError, InvalidInput, LeaseLost
from partner_repo.models import MemoryCore, MemorySlice, Message
from partner_repo.normalization import new_slice_id
from partner_repo.rolling.config import RollingConfig
from partner_repo.rolling.increment import resolve_chat_increment
from partner_repo.rolling.result import RollingResult
from partner_repo.rolling.summarizer import SUMMARY_ON_EMPTY, SUMMARY_ON_EXCEPTION, Summarizer
from partner_repo.storage import array_elements_size, slice_document
from partner_repo.units import MemoryUnitRepository
from partner_repo.validation import optional_datetime, parse_messages, require_id
from partner_repo.window import dropped_count

logger = logging.getLogger(__name__)

APPEND_ATTEMPTS = 3
"""How often a roll sends its append when the reply is lost; the same slice id makes a repeat a no-op."""

Clock = Callable[[], datetime]
"""Where the service reads the current time: leases always, ``now`` when the caller gives none."""

RolledCallback = Callable[[RollingResult], Any]
"""Called by the idle scheduler with each result; may be a coroutine function."""

Trigger = Literal["count", "idle"]


class RollingService:
    """Rolls chat windows into memory units; see the module docstring and ``docs/rolling.md``."""

    def __init__(
        self,
        database: MongoDatabase,
        summarizer: Summarizer,
        config: RollingConfig | None = None,
        *,
        clock: Clock = utc_now,
    ) -> None:
        if not callable(summarizer):
            raise InvalidInput(f"summarizer must be an async callable, got {type(summarizer).__name__}")
        if config is not None and not isinstance(config, RollingConfig):
            raise InvalidInput(f"config must be a RollingConfig, got {type(config).__name__}")
        if not callable(clock):
            raise InvalidInput(f"clock must be callable, got {type(clock).__name__}")
        self._cores = MemoryCoreRepository(database)
        self._units = MemoryUnitRepository(database)
        self._summarizer = summarizer
        self._config = config if config is not None else RollingConfig()
        self._clock = clock

    @property
    def config(self) -> RollingConfig:
        return self._config

    # -- triggers --------------------------------------------------------------------------------------------

    async def maybe_roll(
        self, core_id: str = DEFAULT_CORE_ID, now: datetime | None = None
    ) -> RollingResult | None:
        """Roll when a trigger holds: idle (roll, then a new session) beats count (roll, keep the session).

        Count: the window holds at least ``trigger_limit`` messages. Idle: ``now - last_interaction_at``
        exceeds ``idle_after``, the window holds more than one message, and no idle roll covered it yet.
        The trigger is decided on a plain read, then again on the snapshot taken with the lease.
        """
        core_id = require_id(core_id, "core_id")
        stamp = self._now(now)
        core = await self._cores.get(core_id)
        if core is None or self.trigger(core, stamp) is None:
            return None

        def decide(leased: MemoryCore) -> bool | None:
            trigger = self.trigger(leased, stamp)
            return None if trigger is None else trigger == "idle"

        return await self._leased_roll(core_id, stamp, decide)

    def trigger(self, core: MemoryCore, now: datetime) -> Trigger | None:
        """Which trigger holds for ``core`` at ``now``: ``"idle"``, ``"count"`` or None."""
        size = len(core.chat_messages)
        last = core.last_interaction_at
        if (
            size > 1
            and last is not None
            and not core.idle_rolled
            and to_utc_ms(now) - last > self._config.idle_after
        ):
            return "idle"
        if size >= self._config.trigger_limit:
            return "count"
        return None

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
        return await self._leased_roll(core_id, self._now(now), lambda _core: refresh_session)

    async def resolve_increment(self, core_id: str, snapshot: Sequence[Message]) -> list[Message]:
        """Partner's ``resolveChatIncrement``: what of ``snapshot`` the core's current unit does not end with.

        Reads only the unit's last ``len(snapshot)`` messages. No unit, or an empty one: the whole snapshot.
        """
        core_id = require_id(core_id, "core_id")
        messages = parse_messages(snapshot)
        core = await self._cores.get(core_id)
        if core is None:
            return messages
        return await self._increment(core.memory_session_id, messages)

    async def _leased_roll(
        self, core_id: str, stamp: datetime, decide: Callable[[MemoryCore], bool | None]
    ) -> RollingResult | None:
        owner = f"roll-{uuid.uuid4()}"
        core = await self._cores.acquire_lease(
            core_id, owner, duration=self._config.lease_duration, now=self._lease_clock()
        )
        if core is None:
            logger.debug("core %r: lease held by another roller (or no such core); not rolling", core_id)
            return None
        try:
            refresh = decide(core)
            if refresh is None:
                return None
            return await self._roll_leased(core, owner, refresh, stamp)
        finally:
            await self._release(core_id, owner)

    async def _roll_leased(
        self, core: MemoryCore, owner: str, refresh_session: bool, stamp: datetime
    ) -> RollingResult | None:
        snapshot = list(core.chat_messages)
        if len(snapshot) <= 1:
            return None
        divisor = self._config.retain_divisor
        increment = await self._increment(core.memory_session_id, snapshot)
        if not increment:
            if refresh_session:
                await self._cores.refresh_session(core.id, now=stamp)
                await self._cores.mark_idle_rolled(
                    core.id, window_size=len(snapshot), last_interaction_at=core.last_interaction_at
                )
            return None

        summary = await self._summarize_holding_lease(core.id, owner, increment)
        if not await self._cores.renew_lease(
            core.id, owner, duration=self._config.lease_duration, now=self._lease_clock()
        ):
            logger.warning("core %r: lease taken over while summarizing; this roll is abandoned", core.id)
            return None

        slice_id = new_slice_id()  # one id per roll attempt: a repeated append is a no-op
        unit_id, previous_unit_id = await self._target_unit(core.id, core.memory_session_id, increment, stamp)
        piece = await self._append(
            core.id,
            unit_id,
            increment,
            summary,
            slice_id=slice_id,
            created_at=stamp,
            rolling_size=len(snapshot),
            previous_unit_id=previous_unit_id,
        )
        try:
            await self._cores.trim_window(core.id, len(snapshot), divisor, lease_owner=owner)
        except LeaseLost:
            logger.warning(
                "core %r: lease taken over after slice %r was stored; the new roller trims the window",
                core.id,
                slice_id,
            )
        if refresh_session:
            await self._cores.refresh_session(core.id, now=stamp)
            kept = len(snapshot) - dropped_count(len(snapshot), len(snapshot), divisor)
            await self._cores.mark_idle_rolled(
                core.id, window_size=kept, last_interaction_at=core.last_interaction_at
            )
        return RollingResult.from_slice(unit_id, core.id, piece, increment)

    async def _increment(self, unit_id: str, snapshot: list[Message]) -> list[Message]:
        stored_tail = await self._units.tail_messages(unit_id, len(snapshot))
        return resolve_chat_increment(stored_tail, snapshot)

    async def _target_unit(
        self, core_id: str, unit_id: str, increment: list[Message], stamp: datetime
    ) -> tuple[str, str | None]:
        """The unit to append to, and the unit it continues when the current one would pass the soft limit."""
        head = await self._units.head(unit_id)
        if head is None or head.message_count == 0:
            return unit_id, None
        placeholder = MemorySlice(
            id=new_slice_id(),
            start_index=head.message_count,
            end_index=head.message_count + len(increment),
            summary="",
            created_at=stamp,
            rolling_size=0,
            retain_divisor=self._config.retain_divisor,
        )
        added = array_elements_size([m.model_dump() for m in increment], head.message_count)
        added += array_elements_size([slice_document(placeholder)], head.slice_count)
        if head.size_bytes + added <= self._config.unit_soft_limit_bytes:
            return unit_id, None
        continuation = await self._cores.refresh_session(core_id, now=stamp)
        logger.info(
            "core %r: unit %r would pass %d bytes; continuing in unit %r",
            core_id,
            unit_id,
            self._config.unit_soft_limit_bytes,
            continuation,
        )
        return continuation, unit_id

    async def _append(
        self,
        core_id: str,
        unit_id: str,
        increment: list[Message],
        summary: str,
        *,
        slice_id: str,
        created_at: datetime,
        rolling_size: int,
        previous_unit_id: str | None,
    ) -> MemorySlice:
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
                )
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

    # -- the summary -----------------------------------------------------------------------------------------

    async def _summarize_holding_lease(self, core_id: str, owner: str, increment: list[Message]) -> str:
        keeper = asyncio.create_task(self._keep_lease(core_id, owner))
        try:
            return await self._summarize(core_id, increment)
        finally:
            keeper.cancel()
            await asyncio.wait({keeper})

    async def _keep_lease(self, core_id: str, owner: str) -> None:
        """Renew the lease every third of its duration while a (possibly slow) summarizer runs."""
        interval = self._config.lease_duration.total_seconds() / 3
        while True:
            await asyncio.sleep(interval)
            try:
                if not await self._cores.renew_lease(
                    core_id, owner, duration=self._config.lease_duration, now=self._lease_clock()
                ):
                    return
            except Exception:
                logger.warning("core %r: could not renew the rolling lease", core_id, exc_info=True)

    async def _summarize(self, core_id: str, increment: list[Message]) -> str:
        """The summarizer's text; Partner's fixed texts when it raises or returns nothing."""
        try:
            summary: object = await self._summarizer(list(increment))
        except Exception:
            logger.exception(
                "core %r: the summarizer raised; storing the summary %r", core_id, SUMMARY_ON_EXCEPTION
            )
            return SUMMARY_ON_EXCEPTION
        if summary is None or (isinstance(summary, str) and not summary.strip()):
            return SUMMARY_ON_EMPTY
        if not isinstance(summary, str):
            logger.error(
                "core %r: the summarizer returned %s, not a string; storing the summary %r",
                core_id,
                type(summary).__name__,
                SUMMARY_ON_EXCEPTION,
            )
            return SUMMARY_ON_EXCEPTION
        return summary

    # -- the idle scheduler ----------------------------------------------------------------------------------

    async def roll_idle(self, now: datetime | None = None) -> list[RollingResult]:
        """One pass of the idle scheduler: roll (with session refresh) every core idle at ``now``."""
        return await self._idle_pass(self._now(now), None, None)

    async def run_idle_scheduler(
        self, stop_event: asyncio.Event, *, on_rolled: RolledCallback | None = None
    ) -> None:
        """Every ``check_interval``, roll each idle core; returns when ``stop_event`` is set.

        A failing core or pass is logged and the scheduler goes on. ``on_rolled`` (sync or async) receives
        every result. Several processes may run it at once: the lease gives each idle core to one of them.
        """
        interval = self._config.check_interval.total_seconds()
        while not stop_event.is_set():
            try:
                await self._idle_pass(self._now(None), stop_event, on_rolled)
            except Exception:
                logger.exception("idle scheduler: the pass failed; next pass in %ss", interval)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop_event.wait(), timeout=interval)

    async def _idle_pass(
        self, stamp: datetime, stop_event: asyncio.Event | None, on_rolled: RolledCallback | None
    ) -> list[RollingResult]:
        results: list[RollingResult] = []
        for core_id in await self._cores.idle_core_ids(stamp - self._config.idle_after):
            if stop_event is not None and stop_event.is_set():
                break
            try:
                result = await self.maybe_roll(core_id, now=stamp)
            except Exception:
                logger.exception("core %r: idle roll failed; it stays idle for the next pass", core_id)
                continue
            if result is None:
                continue
            results.append(result)
            if on_rolled is not None:
                await _notify(on_rolled, result)
        return results

    # -- helpers ---------------------------------------------------------------------------------------------

    def _now(self, now: datetime | None) -> datetime:
        return optional_datetime(now, "now") or to_utc_ms(self._clock())

    def _lease_clock(self) -> datetime:
        return to_utc_ms(self._clock())

    async def _release(self, core_id: str, owner: str) -> None:
        try:
            await self._cores.release_lease(core_id, owner)
        except Exception:
            logger.warning("core %r: could not release the lease; it will expire", core_id, exc_info=True)


async def _notify(callback: RolledCallback, result: RollingResult) -> None:
    try:
        outcome = callback(result)
        if inspect.isawaitable(outcome):
            await outcome
    except Exception:
        logger.exception("idle scheduler: on_rolled failed for slice %r", result.slice_id)


__all__ = ["APPEND_ATTEMPTS", "Clock", "RolledCallback", "RollingService", "Trigger"]
