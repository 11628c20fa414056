"""UnitLanes: one consumer's deliveries, in slice order per unit, several units at once.

Each unit has a *lane*: its deliveries in the order they were offered (slice order). A lane is either waiting
(in a heap keyed by the offer number of its first delivery) or held by exactly one worker, which delivers
that one delivery and puts the lane back if more wait in it. So two deliveries of one unit never overlap in
a consumer and are never reordered, while up to ``concurrency`` workers deliver different units at once.
The oldest offered delivery of a unit no worker holds always goes first: with ``concurrency=1`` that is the
plain offer order, one at a time, and a lane that stays busy (a slow or retried slice) never starves others.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Generic, Protocol, TypeVar


class _InUnit(Protocol):
    @property
    def unit_id(self) -> str: ...


D = TypeVar("D", bound=_InUnit)


class UnitLanes(Generic[D]):
    """Deliveries of one consumer, handled by ``concurrency`` workers; see the module docstring."""

    def __init__(self, name: str, concurrency: int, handle: Callable[[D], Awaitable[None]]) -> None:
        self.name = name
        self.concurrency = concurrency
        self._handle = handle
        self._lanes: dict[str, deque[tuple[int, D]]] = {}
        self._waiting: list[tuple[int, str]] = []  # (offer number of the lane's first delivery, unit id)
        self._available = asyncio.Semaphore(0)  # its value is len(self._waiting)
        self._numbers = itertools.count()
        self._tasks: list[asyncio.Task[None]] = []
        self.busy = 0
        """Deliveries being handled right now (at most ``concurrency``)."""

    def start(self) -> None:
        for number in range(self.concurrency):
            self._tasks.append(asyncio.create_task(self._work(), name=f"consume:{self.name}:{number}"))

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks.clear()

    def put(self, delivery: D) -> None:
        """Queue ``delivery`` behind the unit's earlier ones (never waits)."""
        entry = (next(self._numbers), delivery)
        lane = self._lanes.get(delivery.unit_id)
        if lane is not None:
            lane.append(entry)
            return
        self._lanes[delivery.unit_id] = deque([entry])
        self._wait(entry[0], delivery.unit_id)

    def _wait(self, number: int, unit_id: str) -> None:
        heapq.heappush(self._waiting, (number, unit_id))
        self._available.release()

    async def _work(self) -> None:
        while True:
            await self._available.acquire()
            _, unit_id = heapq.heappop(self._waiting)
            lane = self._lanes[unit_id]
            self.busy += 1
            try:
                await self._handle(lane[0][1])
            finally:
                self.busy -= 1
                lane.popleft()
                if lane:
                    self._wait(lane[0][0], unit_id)
                else:
                    del self._lanes[unit_id]


__all__: list[str] = []  # internal to the listener: nothing here is public API
