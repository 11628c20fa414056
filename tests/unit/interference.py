"""Another writer getting in first, for the tests of guarded and optimistic writes: a collection whose first
call of one method lets an interloper run just before it, and a database handing out such a collection."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from partner_repo.mongo import UNITS

Interloper = Callable[[], Awaitable[object]]


class InterruptedCollection:
    """``collection``, whose first ``method`` call (``update_one`` unless told) runs ``interloper()`` just
    before it is sent, so the write (or read) meets what the interloper did; ``interfered`` says it ran."""

    def __init__(self, collection: Any, interloper: Interloper, *, method: str = "update_one") -> None:
        self._collection = collection
        self._interloper = interloper
        self._method = method
        self.interfered = False

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._collection, name)
        if name != self._method:
            return attribute

        async def interloper_first(*args: Any, **kwargs: Any) -> Any:
            if not self.interfered:
                self.interfered = True
                await self._interloper()
            return await attribute(*args, **kwargs)

        return interloper_first


class SwappedDatabase:
    """``database``, its collection ``name`` (``memory_units`` unless told) replaced by ``collection``."""

    def __init__(self, database: Any, collection: Any, *, name: str = UNITS) -> None:
        self._database = database
        self._collection = collection
        self._name = name

    def __getitem__(self, name: str) -> Any:
        return self._collection if name == self._name else self._database[name]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._database, name)


def interrupted_units(database: Any, interloper: Interloper) -> SwappedDatabase:
    """``database``, whose first update of a unit lets ``interloper()`` run just before it is sent."""
    return SwappedDatabase(database, InterruptedCollection(database[UNITS], interloper))
