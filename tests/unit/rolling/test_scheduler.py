"""The idle scheduler: every check_interval, roll (and refresh the session of) each idle window."""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta
from typing import Any

import pytest

from partner_repo import (
    MemoryCoreRepository,
    MemoryUnit,
    MemoryUnitRepository,
    RollingConfig,
    RollingResult,
    RollingService,
)
from tests.unit.rolling.support import T0, Clock, RecordingSummarizer, numbered

IDLE = timedelta(hours=1)
FAST = RollingConfig(idle_after=IDLE, check_interval=timedelta(milliseconds=10))


@pytest.fixture
def clock() -> Clock:
    return Clock(T0 + 2 * IDLE)


@pytest.fixture
def service(memory_db: Any, clock: Clock) -> RollingService:
    return RollingService(memory_db, RecordingSummarizer(), FAST, clock=clock)


async def test_one_pass_rolls_the_idle_windows_and_refreshes_their_sessions(
    cores: MemoryCoreRepository, service: RollingService
) -> None:
    idle = await cores.record("idle", numbered(0, 4), at=T0)
    await cores.record("busy", numbered(0, 4), at=T0 + 2 * IDLE - timedelta(minutes=1))
    await cores.record("single", numbered(0, 1), at=T0)

    results = await service.roll_idle()

    assert [r.memory_unit.core_id for r in results] == ["idle"]
    assert results[0].memory_unit.id == idle.memory_session_id
    assert await cores.session_id("idle") != idle.memory_session_id
    assert await cores.snapshot("busy") == numbered(0, 4)
    assert await cores.snapshot("single") == numbered(0, 1)


async def test_an_idle_window_is_rolled_by_one_pass_only(
    cores: MemoryCoreRepository, service: RollingService, clock: Clock
) -> None:
    await cores.record("idle", numbered(0, 12), at=T0)
    assert len(await service.roll_idle()) == 1
    clock.advance(IDLE)
    assert await service.roll_idle() == []


async def test_a_pass_takes_its_time_from_now_when_given(
    cores: MemoryCoreRepository, service: RollingService
) -> None:
    await cores.record("idle", numbered(0, 4), at=T0)
    assert await service.roll_idle(now=T0 + IDLE) == []
    assert len(await service.roll_idle(now=T0 + IDLE + timedelta(seconds=1))) == 1


async def test_the_scheduler_rolls_idle_cores_and_returns_when_stopped(
    cores: MemoryCoreRepository, service: RollingService
) -> None:
    await cores.record("first", numbered(0, 4), at=T0)
    await cores.record("second", numbered(0, 6), at=T0)
    stop = asyncio.Event()
    rolled: list[RollingResult] = []

    def on_rolled(result: RollingResult) -> None:
        rolled.append(result)
        if len(rolled) == 2:
            stop.set()

    await asyncio.wait_for(service.run_idle_scheduler(stop, on_rolled=on_rolled), timeout=5)

    assert sorted(r.memory_unit.core_id for r in rolled) == ["first", "second"]


async def test_the_scheduler_picks_up_cores_that_become_idle_later(
    cores: MemoryCoreRepository, service: RollingService, clock: Clock
) -> None:
    await cores.record("later", numbered(0, 4), at=clock.now)
    stop = asyncio.Event()
    rolled: list[RollingResult] = []

    async def on_rolled(result: RollingResult) -> None:
        rolled.append(result)
        stop.set()

    running = asyncio.create_task(service.run_idle_scheduler(stop, on_rolled=on_rolled))
    await asyncio.sleep(0.05)
    assert rolled == []
    clock.advance(IDLE + timedelta(seconds=1))
    await asyncio.wait_for(running, timeout=5)
    assert [r.memory_unit.core_id for r in rolled] == ["later"]


async def test_a_scheduler_stopped_while_waiting_returns_at_once(memory_db: Any) -> None:
    slow = RollingConfig(check_interval=timedelta(hours=1))
    service = RollingService(memory_db, RecordingSummarizer(), slow)
    stop = asyncio.Event()
    running = asyncio.create_task(service.run_idle_scheduler(stop))
    await asyncio.sleep(0.01)
    stop.set()
    await asyncio.wait_for(running, timeout=5)


async def test_a_scheduler_stopped_before_it_starts_does_nothing(
    cores: MemoryCoreRepository, service: RollingService
) -> None:
    await cores.record("idle", numbered(0, 4), at=T0)
    stop = asyncio.Event()
    stop.set()
    await asyncio.wait_for(service.run_idle_scheduler(stop), timeout=5)
    assert await cores.snapshot("idle") == numbered(0, 4)


async def test_a_core_that_fails_to_roll_is_logged_and_the_others_still_roll(
    memory_db: Any, cores: MemoryCoreRepository, service: RollingService, caplog: pytest.LogCaptureFixture
) -> None:
    broken = await cores.record("broken", numbered(0, 4), at=T0 - timedelta(minutes=1))
    await cores.record("fine", numbered(0, 4), at=T0)
    foreign = MemoryUnit(id=broken.memory_session_id, core_id="someone else")  # the session id is taken
    await MemoryUnitRepository(memory_db).save(foreign)

    with caplog.at_level(logging.ERROR, logger="partner_repo"):
        results = await service.roll_idle()

    assert [r.memory_unit.core_id for r in results] == ["fine"]
    assert any("broken" in r.getMessage() for r in caplog.records)
    assert await cores.snapshot("broken") == numbered(0, 4)


async def test_a_failing_callback_does_not_stop_the_scheduler(
    cores: MemoryCoreRepository, service: RollingService, caplog: pytest.LogCaptureFixture
) -> None:
    await cores.record("first", numbered(0, 4), at=T0)
    await cores.record("second", numbered(0, 4), at=T0 + timedelta(seconds=1))
    stop = asyncio.Event()
    seen: list[str] = []

    def on_rolled(result: RollingResult) -> None:
        seen.append(result.memory_unit.core_id)
        if len(seen) == 2:
            stop.set()
        raise RuntimeError("consumer bug")

    with caplog.at_level(logging.ERROR, logger="partner_repo"):
        await asyncio.wait_for(service.run_idle_scheduler(stop, on_rolled=on_rolled), timeout=5)
    assert seen == ["first", "second"]
    assert any("on_rolled" in r.getMessage() for r in caplog.records)


async def test_schedulers_in_two_processes_roll_each_idle_core_once(racy_db: Any, clock: Clock) -> None:
    racy = racy_db
    cores, units = MemoryCoreRepository(racy), MemoryUnitRepository(racy)
    sessions = [(await cores.record(f"core-{n}", numbered(0, 6), at=T0)).memory_session_id for n in range(6)]
    processes = [RollingService(racy, RecordingSummarizer(), FAST, clock=clock) for _ in range(2)]

    passes = await asyncio.gather(*(p.roll_idle() for p in processes))

    assert sum(len(results) for results in passes) == 6
    for session in sessions:
        unit = await units.get(session)
        assert unit is not None and len(unit.slices) == 1 and unit.conversation_messages == numbered(0, 6)
