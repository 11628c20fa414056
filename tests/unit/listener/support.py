"""Shared builders for the listener tests: recording consumers, quick listeners, slices appended directly, and
a polling pass's scanner on its own."""

from __future__ import annotations

import asyncio
import itertools
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from partner_repo import (
    AfterRollingRegistry,
    Backoff,
    DeadLetterRepository,
    ListenerCheckpoints,
    MemorySlice,
    MemoryUnitRepository,
    Message,
    RollingListener,
    RollingResult,
)
from partner_repo.listener.delivery import DeliveryPipeline
from partner_repo.listener.stream._polling import UnitScanner

T0 = datetime(2024, 5, 1, 9, 0, tzinfo=UTC)
QUICK = Backoff(initial=0.001, multiplier=2.0, maximum=0.004, jitter=0.0)
_counter = itertools.count()


@dataclass
class Recorder:
    """An AfterRolling consumer that remembers every result, and can be told to fail."""

    name: str = "recorder"
    fail_times: int = 0
    fail_slices: set[str] = field(default_factory=set)
    results: list[RollingResult] = field(default_factory=list)
    attempts: list[str] = field(default_factory=list)
    gate: asyncio.Event | None = None

    async def consume(self, result: RollingResult) -> None:
        self.attempts.append(result.slice_id)
        if self.gate is not None:
            await self.gate.wait()
        if result.slice_id in self.fail_slices or self.fail_times > 0:
            self.fail_times = max(self.fail_times - 1, 0)
            raise RuntimeError(f"{self.name} refuses {result.slice_id}")
        self.results.append(result)

    @property
    def slice_ids(self) -> list[str]:
        return [r.slice_id for r in self.results]


def registry_of(*consumers: Any) -> AfterRollingRegistry:
    registry = AfterRollingRegistry()
    for consumer in consumers:
        registry.register(consumer)
    return registry


def quick_listener(database: Any, registry: AfterRollingRegistry, **options: Any) -> RollingListener:
    """A listener that polls every 10 ms and retries after a few ms, so tests stay fast."""
    options.setdefault("poll_interval", 0.01)
    options.setdefault("backoff", QUICK)
    options.setdefault("max_attempts", 3)
    return RollingListener(database, registry, **options)


def messages(count: int, label: str = "m") -> list[Message]:
    return [
        Message(role="user" if i % 2 == 0 else "assistant", content=f"{label}{next(_counter)}")
        for i in range(count)
    ]


async def append(
    units: MemoryUnitRepository,
    unit_id: str,
    *,
    count: int = 2,
    core_id: str = "core",
    at: datetime | None = None,
    minutes: int = 0,
    **options: Any,
) -> MemorySlice:
    """Append ``count`` messages and one slice directly through the repository."""
    created = at if at is not None else T0 + timedelta(minutes=minutes)
    return await units.append(
        unit_id, messages(count), f"summary {next(_counter)}", core_id=core_id, created_at=created, **options
    )


class CountingUnits(MemoryUnitRepository):
    """The units repository, counting the outlines it reads (one per unit a polling pass finds changed)."""

    outlined: int = 0

    async def outline(self, unit_id: object) -> Any:
        self.outlined += 1
        return await super().outline(unit_id)


def scanning(database: Any, units: MemoryUnitRepository) -> tuple[UnitScanner, DeliveryPipeline]:
    """A polling pass's scanner over ``units``, offering what it finds to a delivery pipeline of one
    :class:`Recorder` (one attempt each): start the pipeline before scanning, close it after."""
    checkpoints = ListenerCheckpoints(database, "default")
    pipeline = DeliveryPipeline(
        checkpoints,
        units,
        DeadLetterRepository(database),
        [Recorder()],
        max_attempts=1,
        backoff=Backoff(),
        max_pending=10,
    )
    return UnitScanner(units, checkpoints, pipeline), pipeline
