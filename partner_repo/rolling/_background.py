"""Rolls in the background: a service records a turn, answers the user at once, and the roll (which waits
for the summarizer) runs later, at most ``concurrency`` at a time; and the idle scheduler's pass.

One roll per core at a time: a turn recorded while its core's roll is pending or running only refreshes what
that roll decides on, and the roll is tried again once the running one ends (so no turn's trigger is lost and
no core is rolled twice at once by this process). Every error is logged with the core's id, never lost. At
shutdown :meth:`BackgroundRolls.drain` waits for what is pending, up to a timeout; what it cancels after that
loses nothing: the messages stay in the window, the lease of a cancelled roll is given back (or expires), and
the next roller, here or in another process, rolls them.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from typing import Any

from partner_repo.cores import WindowState
from partner_repo.errors import InvalidInput, PartnerRepoError
from partner_repo.events import RollingResult
from partner_repo.mongo import library_logger

logger = library_logger("partner_repo.rolling.background")

Roll = Callable[[str, datetime | None, WindowState | None], Awaitable[RollingResult | None]]
"""``(core_id, at, recorded) -> result``: the service's ``maybe_roll`` (``recorded`` None: read the state)."""

RolledCallback = Callable[[RollingResult], Any]
"""Called with every background roll's result; may be a coroutine function."""


class BackgroundRolls:
    """The background rolls of one service; see the module docstring."""

    def __init__(self, roll: Roll, *, concurrency: int, on_rolled: RolledCallback | None = None) -> None:
        if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
            raise InvalidInput(f"concurrency must be a positive integer, got {concurrency!r}")
        if on_rolled is not None and not callable(on_rolled):
            raise InvalidInput(f"on_rolled must be callable, got {type(on_rolled).__name__}")
        self._roll = roll
        self._on_rolled = on_rolled
        self._slots = asyncio.Semaphore(concurrency)
        self._due: dict[str, tuple[datetime | None, WindowState]] = {}
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._closed = False

    @property
    def closed(self) -> bool:
        """Whether :meth:`drain` began: no roll is taken any more."""
        return self._closed

    @property
    def pending(self) -> int:
        """How many cores have a roll waiting or running."""
        return len(self._tasks)

    def schedule(self, core_id: str, at: datetime | None, recorded: WindowState) -> None:
        """Roll ``core_id`` in the background, deciding on ``recorded`` (what its turn's ``record`` said)."""
        if self._closed:
            raise InvalidInput("the background rolls are closed: the service is shutting down")
        self._due[core_id] = (at, recorded)
        if core_id not in self._tasks:
            self._tasks[core_id] = asyncio.create_task(self._run(core_id), name=f"roll {core_id}")

    async def drain(self, grace: timedelta) -> int:
        """Stop taking rolls, wait up to ``grace`` for those pending, cancel the rest; how many were
        cancelled (their messages stay in the window for the next roller)."""
        self._closed = True
        tasks = list(self._tasks.values())
        if not tasks:
            return 0
        _, left = await asyncio.wait(tasks, timeout=max(grace.total_seconds(), 0))
        for task in left:
            task.cancel()
        if left:
            await asyncio.wait(left)
            logger.warning(
                "background rolls: %d left at shutdown; their messages wait in the window for the next roll",
                len(left),
            )
        return len(left)

    async def _run(self, core_id: str) -> None:
        again = False
        try:
            while core_id in self._due:
                at, recorded = self._due.pop(core_id)
                async with self._slots:
                    # a turn recorded while this core rolled saw that roll's lease: decide on a fresh read
                    await self._roll_once(core_id, at, None if again else recorded)
                again = True
        finally:
            self._tasks.pop(core_id, None)

    async def _roll_once(self, core_id: str, at: datetime | None, recorded: WindowState | None) -> None:
        try:
            result = await self._roll(core_id, at, recorded)
        except Exception:
            logger.exception("core %r: background roll failed; the window waits for the next roll", core_id)
            return
        if result is not None and self._on_rolled is not None:
            await notify(self._on_rolled, result)


FailedCallback = Callable[[str, Exception], Any]
"""Told of every core whose idle roll failed (the core id and the error)."""


async def idle_pass(
    core_ids: list[str],
    roll: Callable[[str], Awaitable[RollingResult | None]],
    stop_event: asyncio.Event | None,
    on_rolled: RolledCallback | None,
    on_failed: FailedCallback | None = None,
) -> list[RollingResult]:
    """One pass of the idle scheduler over ``core_ids`` (the idle cores, longest idle first): each rolled in
    turn, a failing one logged (one line for the library's own errors, a traceback for anything else), told
    to ``on_failed`` and left idle for the next pass; stops early once ``stop_event`` is set."""
    results: list[RollingResult] = []
    for core_id in core_ids:
        if stop_event is not None and stop_event.is_set():
            break
        try:
            result = await roll(core_id)
        except Exception as exc:
            expected = isinstance(exc, PartnerRepoError)
            logger.error(
                "core %r: idle roll failed (%s); it stays idle for the next pass",
                core_id,
                exc,
                exc_info=not expected,
            )
            if on_failed is not None:
                on_failed(core_id, exc)
            continue
        if result is None:
            continue
        results.append(result)
        if on_rolled is not None:
            await notify(on_rolled, result)
    return results


async def notify(callback: RolledCallback, result: RollingResult) -> None:
    """Hand ``result`` to ``callback`` (sync or async); what it raises is logged, never passed on."""
    try:
        outcome = callback(result)
        if inspect.isawaitable(outcome):
            await outcome
    except Exception:
        logger.exception("on_rolled failed for slice %r of core %r", result.slice_id, result.core_id)


__all__ = ["BackgroundRolls", "FailedCallback", "RolledCallback", "idle_pass", "notify"]
