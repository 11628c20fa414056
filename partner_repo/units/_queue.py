"""Appends to one unit through one repository take turns: :class:`UnitQueue`."""

from __future__ import annotations

import asyncio


class UnitQueue:
    """Appends to one unit through one repository go one at a time; other units are not held up.

    Tasks of one process sharing a repository would otherwise race each other over the network: all but one
    push lose and go again, and under sustained contention one unlucky task can lose every time. Queued, each
    append finds the head the previous one left (one round trip) and only other processes can make it retry.
    An entry lives only while some append to its unit is running or waiting.
    """

    def __init__(self) -> None:
        self._turns: dict[str, _Turn] = {}

    def hold(self, unit_id: str) -> _Turn:
        """``async with queue.hold(unit_id):`` waits for the unit's earlier appends, then holds it."""
        turn = self._turns.get(unit_id)
        if turn is None:
            turn = self._turns[unit_id] = _Turn(self._turns, unit_id)
        return turn


class _Turn:
    """One unit's queue: a lock, and how many appends hold or wait for it (the entry goes with the last)."""

    __slots__ = ("_lock", "_turns", "_unit_id", "_users")

    def __init__(self, turns: dict[str, _Turn], unit_id: str) -> None:
        self._turns = turns
        self._unit_id = unit_id
        self._lock = asyncio.Lock()
        self._users = 0

    async def __aenter__(self) -> None:
        self._users += 1
        try:
            await self._lock.acquire()
        except BaseException:  # cancelled while waiting: never held
            self._leave()
            raise

    async def __aexit__(self, *exc_info: object) -> None:
        self._lock.release()
        self._leave()

    def _leave(self) -> None:
        self._users -= 1
        if not self._users:
            del self._turns[self._unit_id]


__all__ = ["UnitQueue"]
