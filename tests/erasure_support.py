"""Shared builders for the erasure tests: cores with rolled memory, listener progress naming it, and a
database that fails one call (a crash in the middle of an erasure)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from partner_repo import (
    DeadLetterRepository,
    ListenerCheckpoints,
    MemoryCoreRepository,
    MemoryUnitRepository,
    Message,
    RollingConfig,
    RollingResult,
    RollingService,
)

T0 = datetime(2024, 3, 1, 9, 0, tzinfo=UTC)


async def short_summary(messages: list[Message]) -> str:
    return f"{len(messages)} messages"


def rolling(database: Any, **config: Any) -> RollingService:
    return RollingService(database, short_summary, RollingConfig(**{"trigger_limit": 4, **config}))


async def remember(
    database: Any, core_id: str, turns: int = 2, *, at: datetime = T0, refresh: bool = False
) -> list[RollingResult]:
    """Record ``turns`` turns on the core and roll after each: one slice per turn (a new unit when
    ``refresh``)."""
    cores, service = MemoryCoreRepository(database), rolling(database)
    results = []
    for number in range(turns):
        stamp = at + timedelta(minutes=number)
        turn = [
            Message(role="user", content=f"{core_id} secret {number}"),
            Message(role="assistant", content=f"{core_id} answer {number}"),
        ]
        await cores.record(core_id, turn, at=stamp)
        result = await service.roll(core_id, now=stamp, refresh_session=refresh)
        assert result is not None
        results.append(result)
    return results


async def unit_ids_of(database: Any, core_id: str) -> set[str]:
    return await MemoryUnitRepository(database).unit_ids(core_id)


async def progress_on(database: Any, result: RollingResult, group: str = "default") -> None:
    """The group delivered the result's slice (a checkpoint document names its unit)."""
    unit = result.memory_unit
    await ListenerCheckpoints(database, group).mark_delivered(unit.id, unit.core_id, result.slice_id)


async def letter_on(database: Any, result: RollingResult, group: str = "default") -> None:
    """A consumer of the group gave up on the result's slice."""
    unit = result.memory_unit
    await DeadLetterRepository(database).record(
        group=group,
        consumer="indexer",
        unit_id=unit.id,
        core_id=unit.core_id,
        slice_id=result.slice_id,
        error=RuntimeError("index down"),
        attempts=5,
    )


class Crash(Exception):
    """The process died here (injected)."""


@dataclass
class CrashingDatabase:
    """The database, except that call number ``after`` (from 1) of ``method`` on ``collection`` raises
    :class:`Crash` instead of running: the erasure stops there, as if the process had been killed. Either may
    be a set of names: the calls of every such method on every such collection are counted together."""

    database: Any
    collection: str | frozenset[str]
    method: str | frozenset[str]
    after: int = 1
    calls: list[str] = field(default_factory=list)

    def __getitem__(self, name: str) -> Any:
        collection = self.database[name]
        return _Crashing(collection, self) if _named(name, self.collection) else collection

    def __getattr__(self, name: str) -> Any:
        return getattr(self.database, name)


@dataclass
class _Crashing:
    collection: Any
    owner: CrashingDatabase

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self.collection, name)
        if not _named(name, self.owner.method):
            return attribute

        def call(*args: Any, **kwargs: Any) -> Any:
            self.owner.calls.append(name)
            if len(self.owner.calls) == self.owner.after:
                raise Crash(f"killed at {self.owner.collection}.{name} #{self.owner.after}")
            return attribute(*args, **kwargs)

        return call


def _named(name: str, wanted: str | frozenset[str]) -> bool:
    return name == wanted if isinstance(wanted, str) else name in wanted
