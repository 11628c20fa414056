"""Making room for a turn the window cannot take (:class:`~partner_repo.errors.WindowTooLarge`: past 16 MiB).

The turn is recorded once rolls made room for it: each roll stores what is new (a one-message window
included: every message fits in a unit, ``record`` refuses any other) and, once nothing is new, drops what is
stored from the window, retained context included (the turn matters more than the context). A roll of
another process holding the lease is waited for: it gives the lease back, or its lease is taken over once
silent for its ttl. Only after ``wait`` is the turn refused, and then nothing of it was written.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import timedelta

from partner_repo.cores import MemoryCoreRepository, WindowState
from partner_repo.errors import WindowTooLarge
from partner_repo.events import RollingResult
from partner_repo.validation import Turn

POLL_S = 0.05
"""How often a turn waiting for another process's roll to make room looks at the core's lease again."""

Roll = Callable[[], Awaitable[RollingResult | None]]
"""A roll of the core that makes room (None: nothing stored, or the lease is held by another roller)."""


class RoomForTurn:
    """Records one turn after rolls made room for it; see the module docstring."""

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


__all__ = ["POLL_S", "RoomForTurn"]
