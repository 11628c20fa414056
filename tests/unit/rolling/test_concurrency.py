"""Rolling shared by processes: one slice per increment, no message lost or doubled, order kept.

``racy_db`` makes every database call yield to the event loop, so concurrent rollers and writers interleave
between each read and write as they would over a network. Two ``RollingService`` instances stand for two
service processes: they share nothing but the database.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest

from partner_repo import (
    MemoryCoreRepository,
    MemoryUnitRepository,
    RollingConfig,
    RollingResult,
    RollingService,
    resolve_chat_increment,
)
from partner_repo.cores import CoreLease
from tests.unit.rolling.support import T0, Clock, RecordingSummarizer, Ticks, assert_slices_tile, numbered

CONFIG = RollingConfig(trigger_limit=6, retain_divisor=3)


async def test_two_rolls_of_one_core_at_once_store_one_slice(racy_db: Any) -> None:
    cores, units = MemoryCoreRepository(racy_db), MemoryUnitRepository(racy_db)
    core = await cores.record("agent", numbered(0, 8), at=T0)
    service = RollingService(racy_db, RecordingSummarizer())

    results = await asyncio.gather(service.roll("agent", now=T0), service.roll("agent", now=T0))

    assert sum(r is not None for r in results) == 1
    unit = await units.get(core.memory_session_id)
    assert unit is not None and len(unit.slices) == 1 and unit.conversation_messages == numbered(0, 8)


async def test_two_processes_rolling_one_core_at_once_store_one_slice(racy_db: Any) -> None:
    cores, units = MemoryCoreRepository(racy_db), MemoryUnitRepository(racy_db)
    core = await cores.record("agent", numbered(0, 8), at=T0)
    first = RollingService(racy_db, RecordingSummarizer())
    second = RollingService(racy_db, RecordingSummarizer())

    results = await asyncio.gather(*(s.roll("agent", now=T0) for s in (first, second, first, second)))

    assert sum(r is not None for r in results) == 1
    unit = await units.get(core.memory_session_id)
    assert unit is not None and len(unit.slices) == 1


async def test_rollers_in_two_processes_and_a_record_stream_store_every_message_once_in_order(
    racy_db: Any,
) -> None:
    cores, units = MemoryCoreRepository(racy_db), MemoryUnitRepository(racy_db)
    session = await cores.session_id("agent")
    processes = [RollingService(racy_db, RecordingSummarizer(), CONFIG) for _ in range(2)]
    recorded = numbered(0, 120)
    finished = asyncio.Event()
    results: list[RollingResult] = []

    async def conversation() -> None:
        for start in range(0, len(recorded), 2):
            await cores.record("agent", recorded[start : start + 2], at=T0)
        finished.set()

    async def roller(service: RollingService) -> None:
        while not finished.is_set():
            result = await service.maybe_roll("agent", now=T0)
            if result is not None:
                results.append(result)
            await asyncio.sleep(0)

    await asyncio.gather(conversation(), *(roller(s) for s in processes), roller(processes[0]))
    last = await processes[1].roll("agent", now=T0)
    results.extend([last] if last is not None else [])

    unit = await units.get(session)
    assert unit is not None
    assert unit.conversation_messages == recorded  # every message once, in recorded order
    assert_slices_tile(unit)  # one slice per increment: no overlap, no gap
    assert sorted(r.slice_id for r in results) == sorted(p.id or "" for p in unit.complete_slices())
    for result in results:
        piece = result.memory_slice
        assert list(result.increment_messages) == recorded[piece.start_index or 0 : piece.end_index or 0]
    window = await cores.snapshot("agent")
    assert resolve_chat_increment(unit.conversation_messages, window) == []  # the window is all stored
    assert window == recorded[len(recorded) - len(window) :]


async def test_concurrent_idle_and_count_rollers_lose_nothing_across_sessions(racy_db: Any) -> None:
    cores, units = MemoryCoreRepository(racy_db), MemoryUnitRepository(racy_db)
    processes = [RollingService(racy_db, RecordingSummarizer(), CONFIG) for _ in range(2)]
    recorded = numbered(0, 60)
    sessions: list[str] = []

    for start in range(0, len(recorded), 2):
        core = await cores.record("agent", recorded[start : start + 2], at=T0 + timedelta(minutes=start))
        if core.memory_session_id not in sessions:
            sessions.append(core.memory_session_id)
        idle_now = T0 + timedelta(minutes=start) + CONFIG.idle_after * (2 if start % 10 == 8 else 0)
        await asyncio.gather(*(s.maybe_roll("agent", now=idle_now) for s in processes))

    stored = []
    for session in sessions:
        unit = await units.get(session)
        if unit is not None:
            assert_slices_tile(unit)
            stored.append(unit.conversation_messages)
    # each session's unit holds a run of the conversation; a new session repeats the retained context first
    flattened = stored[0]
    for messages in stored[1:]:
        flattened = flattened + resolve_chat_increment(flattened, messages)
    assert flattened == recorded[: len(flattened)]
    window = await cores.snapshot("agent")
    assert flattened + resolve_chat_increment(flattened, window) == recorded


async def test_a_roll_that_finds_the_lease_held_returns_none_without_waiting(memory_db: Any) -> None:
    cores = MemoryCoreRepository(memory_db)
    await cores.record("agent", numbered(0, 8), at=T0)
    await CoreLease(memory_db).acquire("agent", "someone else", duration=timedelta(hours=1))

    result = await asyncio.wait_for(RollingService(memory_db, RecordingSummarizer()).roll("agent"), timeout=5)

    assert result is None
    assert await cores.snapshot("agent") == numbered(0, 8)


async def test_the_lease_of_a_crashed_roller_is_taken_over_once_watched_silent_for_its_ttl(
    memory_db: Any,
) -> None:
    cores = MemoryCoreRepository(memory_db)
    watch = Ticks()
    service = RollingService(memory_db, RecordingSummarizer(), monotonic=watch)
    await cores.record("agent", numbered(0, 8), at=T0)
    await CoreLease(memory_db).acquire("agent", "crashed roller", duration=timedelta(seconds=30))

    assert await service.roll("agent") is None  # first look: the count starts
    watch.now += 29.999
    assert await service.roll("agent") is None
    watch.now += 0.001
    result = await service.roll("agent")

    assert result is not None and list(result.increment_messages) == numbered(0, 8)
    core = await cores.get("agent")
    assert core is not None and core.lease_owner is None


async def test_a_holder_whose_clock_is_hours_off_is_not_taken_over_while_it_beats(memory_db: Any) -> None:
    """Nothing a holder writes is a time, so no clock skew can make its lease look expired: a taker only
    counts, on its own clock, how long the holder's beat has not moved."""
    cores = MemoryCoreRepository(memory_db)
    await cores.record("agent", numbered(0, 8), at=T0)
    lease = CoreLease(memory_db)
    await lease.acquire("agent", "holder", duration=timedelta(seconds=30))
    watch = Ticks()
    taker = RollingService(
        memory_db, RecordingSummarizer(), clock=Clock(T0 + timedelta(hours=5)), monotonic=watch
    )

    for _ in range(10):
        assert await taker.roll("agent") is None
        watch.now += 20  # longer than the ttl in all, but the holder beats in between
        assert await lease.renew("agent", "holder", duration=timedelta(seconds=30))

    core = await cores.get("agent")
    assert core is not None and core.lease_owner == "holder"


@pytest.mark.parametrize("rollers", [2, 5])
async def test_many_rollers_of_many_cores_store_each_window_once(racy_db: Any, rollers: int) -> None:
    cores, units = MemoryCoreRepository(racy_db), MemoryUnitRepository(racy_db)
    sessions = {}
    for number in range(4):
        core = await cores.record(f"core-{number}", numbered(0, 10), at=T0)
        sessions[core.core_id] = core.memory_session_id
    processes = [RollingService(racy_db, RecordingSummarizer()) for _ in range(rollers)]

    await asyncio.gather(*(p.roll(core_id, now=T0) for p in processes for core_id in sessions))

    for core_id, session in sessions.items():
        unit = await units.get(session)
        assert unit is not None and unit.conversation_messages == numbered(0, 10), core_id
        assert len(unit.slices) == 1
