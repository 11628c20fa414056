"""The rolling contract, kept by every backend: in-memory always, real MongoDB when MONGODB_URI is set.

On a real server the concurrent cases interleave over the network, so single flight, the guarded trim and
the atomic ``record`` are exercised against MongoDB's own semantics, not the fake's.
"""

from __future__ import annotations

import asyncio
import contextlib
from datetime import timedelta
from typing import Any

from partner_repo import (
    SUMMARY_ON_EXCEPTION,
    MemoryCoreRepository,
    MemoryUnitRepository,
    Message,
    RollingConfig,
    RollingResult,
    RollingService,
    resolve_chat_increment,
)
from partner_repo.cores import CoreLease
from partner_repo.mongo import CORES
from tests.contract.rolling_contract_support import T0, assert_tiles, numbered, summarize

IDLE = timedelta(hours=1)


async def test_recorded_messages_form_the_window_in_order(database: Any) -> None:
    cores = MemoryCoreRepository(database)
    await cores.record("agent", numbered(0, 3), at=T0)
    core = await cores.record("agent", numbered(3, 5), at=T0 + timedelta(seconds=1))
    assert core.window_size == 5
    assert core.last_interaction_at == T0 + timedelta(seconds=1)
    assert await cores.snapshot("agent") == numbered(0, 5)


async def test_concurrent_first_records_of_new_cores_lose_no_message(database: Any) -> None:
    """Forty records at once into a core none of them finds (their inserts race to create it), thirty times:
    every core holds all forty, and every record is answered (thirty rounds, so that a race a server answers
    oddly, tests/emulator_gaps.py, shows on every run)."""
    cores = MemoryCoreRepository(database)
    for round_ in range(30):
        core_id = f"agent-{round_}"
        await asyncio.gather(*(cores.record(core_id, numbered(n, n + 1)) for n in range(40)))
        assert sorted(m.content for m in await cores.snapshot(core_id)) == sorted(
            m.content for m in numbered(0, 40)
        )


async def test_concurrent_records_into_an_existing_core_lose_no_message(database: Any) -> None:
    """The same into a core that exists."""
    cores = MemoryCoreRepository(database)
    await cores.get_or_create("agent")
    await asyncio.gather(*(cores.record("agent", numbered(n, n + 1)) for n in range(40)))
    assert sorted(m.content for m in await cores.snapshot("agent")) == sorted(
        m.content for m in numbered(0, 40)
    )


async def test_concurrent_records_into_a_core_stored_before_the_window_count_store_each_message_once(
    database: Any,
) -> None:
    """A core of 0.2's shape (a window, no ``window_size``): five records at once, each answered with its
    state, never a ``TypeError`` (SecantusDB answered the upserts this used to send with no document after
    updating the core: tests/emulator_gaps.py), and every message stored once, twenty times over."""
    cores = MemoryCoreRepository(database)
    for round_ in range(20):
        core_id = f"old-{round_}"
        stored = {"_id": core_id, "memory_session_id": f"s{round_}", "session_started_at": T0}
        await database[CORES].insert_one(
            {**stored, "chat_messages": [m.model_dump() for m in numbered(0, 1)]}
        )

        states = await asyncio.gather(*(cores.record(core_id, numbered(n, n + 1)) for n in range(1, 6)))

        assert sorted(state.window_size for state in states)[-1] == 6
        assert sorted(m.content for m in await cores.snapshot(core_id)) == sorted(
            m.content for m in numbered(0, 6)
        )


async def test_a_trim_keeps_what_was_recorded_after_the_snapshot(database: Any) -> None:
    cores = MemoryCoreRepository(database)
    await cores.record("agent", numbered(0, 36))
    await cores.record("agent", numbered(36, 40))
    assert await cores.trim_window("agent", 36, 6) == 30
    assert await cores.snapshot("agent") == numbered(30, 40)
    assert await cores.trim_window("agent", 10, 0) == 0  # a divisor of 0 keeps like 1: everything
    assert await cores.trim_window("agent", 10, 10) == 9
    assert await cores.snapshot("agent") == numbered(39, 40)


async def test_a_trim_racing_records_loses_nothing(database: Any) -> None:
    cores = MemoryCoreRepository(database)
    await cores.record("agent", numbered(0, 36))

    async def stream() -> None:
        for n in range(36, 56):
            await cores.record("agent", numbered(n, n + 1))

    await asyncio.gather(stream(), cores.trim_window("agent", 36, 6))
    assert await cores.snapshot("agent") == numbered(30, 56)


async def test_a_trim_to_nothing_empties_the_window(database: Any) -> None:
    cores = MemoryCoreRepository(database)
    await cores.record("agent", numbered(0, 5))
    assert await cores.trim_window("agent", 5, 6) == 5
    assert await cores.snapshot("agent") == []


async def test_the_lease_has_one_holder_and_is_taken_over_only_from_the_state_watched(database: Any) -> None:
    await MemoryCoreRepository(database).record("agent", numbered(0, 2), at=T0)
    lease, minute = CoreLease(database), timedelta(minutes=1)
    won = await asyncio.gather(*(lease.acquire("agent", f"r{n}", duration=minute) for n in range(8)))
    assert sum(core is not None for core in won) == 1
    assert await lease.acquire("agent", "late", duration=minute) is None
    watched = await lease.state("agent")
    assert watched is not None and watched.holder is not None
    assert await lease.renew("agent", watched.holder, duration=minute)  # it beat: the watched state is gone
    assert await lease.acquire("agent", "late", duration=minute, silent=watched) is None
    silent = await lease.state("agent")
    assert await lease.acquire("agent", "late", duration=minute, silent=silent) is not None
    assert await lease.release("agent", "late")
    assert await lease.acquire("agent", "next", duration=minute) is not None


async def test_idle_core_ids_find_the_idle_unrolled_windows(database: Any) -> None:
    cores = MemoryCoreRepository(database)
    await cores.record("idle", numbered(0, 2), at=T0)
    await cores.record("single", numbered(0, 1), at=T0)
    await cores.record("busy", numbered(0, 2), at=T0 + 2 * IDLE)
    await cores.record("rolled", numbered(0, 2), at=T0)
    assert await cores.mark_idle_rolled("rolled", window_size=2, last_interaction_at=T0)
    assert await cores.idle_core_ids(T0 + IDLE) == ["idle"]


async def test_count_roll_keeps_the_session_and_idle_roll_refreshes_it(database: Any) -> None:
    cores, units = MemoryCoreRepository(database), MemoryUnitRepository(database)
    service = RollingService(database, summarize, RollingConfig(trigger_limit=4, idle_after=IDLE))
    core = await cores.record("agent", numbered(0, 4), at=T0)

    counted = await service.maybe_roll("agent", now=T0 + timedelta(minutes=1))
    assert counted is not None and await cores.session_id("agent") == core.memory_session_id
    await cores.record("agent", numbered(4, 6), at=T0 + timedelta(minutes=2))
    idle = await service.maybe_roll("agent", now=T0 + 2 * IDLE)

    assert idle is not None and idle.memory_unit.id == core.memory_session_id
    assert await cores.session_id("agent") != core.memory_session_id
    assert await service.maybe_roll("agent", now=T0 + 5 * IDLE) is None
    unit = await units.get(core.memory_session_id)
    assert unit is not None and unit.conversation_messages == numbered(0, 6)
    assert_tiles(unit)
    assert [(p.rolling_size, p.retain_divisor) for p in unit.complete_slices()] == [(4, 6), (2, 6)]


async def test_the_result_can_be_rebuilt_from_the_database(database: Any) -> None:
    cores, units = MemoryCoreRepository(database), MemoryUnitRepository(database)
    await cores.record("agent", numbered(0, 7), at=T0)
    result = await RollingService(database, summarize).roll("agent", now=T0 + timedelta(minutes=1))
    assert result is not None and result.memory_slice.created_at == T0 + timedelta(minutes=1)
    piece = await units.get_slice(result.memory_unit.id, result.slice_id)
    assert piece is not None
    messages = await units.slice_messages(result.memory_unit.id, result.slice_id)
    assert RollingResult.from_slice(result.memory_unit.id, "agent", piece, messages) == result


async def test_the_increment_follows_the_overlap_with_the_stored_tail(database: Any) -> None:
    cores, units = MemoryCoreRepository(database), MemoryUnitRepository(database)
    session = await cores.session_id("agent")
    await units.append(session, numbered(0, 10), "stored", core_id="agent")
    service = RollingService(database, summarize)
    assert await service.resolve_increment("agent", numbered(7, 13)) == numbered(10, 13)
    assert await service.resolve_increment("agent", numbered(20, 22)) == numbered(20, 22)


async def test_a_failing_summarizer_still_rolls(database: Any) -> None:
    async def broken(messages: list[Message]) -> str:
        raise RuntimeError("down")

    await MemoryCoreRepository(database).record("agent", numbered(0, 3), at=T0)
    result = await RollingService(database, broken).roll("agent", now=T0)
    assert result is not None and result.summary == SUMMARY_ON_EXCEPTION


async def test_a_full_unit_continues_in_a_new_one(database: Any) -> None:
    cores, units = MemoryCoreRepository(database), MemoryUnitRepository(database)
    service = RollingService(database, summarize, RollingConfig(unit_soft_limit_bytes=1500))
    first = await cores.record("agent", numbered(0, 12), at=T0)
    await service.roll("agent", now=T0)
    await cores.record("agent", numbered(12, 24), at=T0)
    result = await service.roll("agent", now=T0 + timedelta(seconds=1))
    assert result is not None and result.memory_unit.id != first.memory_session_id
    continuation = await units.get(result.memory_unit.id)
    assert continuation is not None and continuation.previous_unit_id == first.memory_session_id
    assert continuation.conversation_messages == numbered(12, 24)


async def test_two_processes_and_a_record_stream_store_every_message_once(database: Any) -> None:
    cores, units = MemoryCoreRepository(database), MemoryUnitRepository(database)
    session = await cores.session_id("agent")
    config = RollingConfig(trigger_limit=6, retain_divisor=3)
    processes = [RollingService(database, summarize, config) for _ in range(2)]
    recorded = numbered(0, 80)
    finished = asyncio.Event()

    async def conversation() -> None:
        for start in range(0, len(recorded), 2):
            await cores.record("agent", recorded[start : start + 2], at=T0)
            await asyncio.sleep(0)
        finished.set()

    async def roller(service: RollingService) -> None:
        while not finished.is_set():
            await service.maybe_roll("agent", now=T0)
            await asyncio.sleep(0)

    await asyncio.gather(conversation(), *(roller(p) for p in processes))
    await processes[0].roll("agent", now=T0)

    unit = await units.get(session)
    assert unit is not None and unit.conversation_messages == recorded
    assert_tiles(unit)
    assert resolve_chat_increment(recorded, await cores.snapshot("agent")) == []


async def test_a_hundred_messages_in_turns_tile_the_unit(database: Any) -> None:
    cores, units = MemoryCoreRepository(database), MemoryUnitRepository(database)
    config = RollingConfig()
    service = RollingService(database, summarize, config)
    recorded = numbered(0, 100)
    session = await cores.session_id("agent")
    for start in range(0, 100, 2):
        await cores.record("agent", recorded[start : start + 2], at=T0 + timedelta(seconds=start))
        await service.maybe_roll("agent", now=T0 + timedelta(seconds=start))
        assert len(await cores.snapshot("agent")) <= config.trigger_limit + 2
    unit = await units.get(session)
    assert unit is not None and unit.conversation_messages == recorded[: len(unit.conversation_messages)]
    assert_tiles(unit)


async def test_one_idle_pass_rolls_each_idle_core_once(database: Any) -> None:
    cores = MemoryCoreRepository(database)
    for n in range(3):
        await cores.record(f"core-{n}", numbered(0, 4), at=T0)
    processes = [RollingService(database, summarize, clock=lambda: T0 + 2 * IDLE) for _ in range(2)]
    passes = await asyncio.gather(*(p.roll_idle() for p in processes))
    assert sorted(r.memory_unit.core_id for results in passes for r in results) == [
        "core-0",
        "core-1",
        "core-2",
    ]
    assert await processes[0].roll_idle() == []


# -- the append is the fence: correctness never waits on the lease ------------------------------------------


class Ticks:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def take_over_and_roll(database: Any, config: RollingConfig) -> RollingResult | None:
    """Another process: it watches the stalled roller's lease stay silent for its ttl, then rolls."""
    ticks = Ticks()
    other = RollingService(database, summarize, config, monotonic=ticks)
    assert await other.roll("agent", now=T0) is None  # held: the first look starts the count
    ticks.now += config.lease_duration.total_seconds()
    return await other.roll("agent", now=T0)


async def test_a_roller_whose_append_is_delayed_past_its_lease_stores_nothing_twice(database: Any) -> None:
    cores, units = MemoryCoreRepository(database), MemoryUnitRepository(database)
    config = RollingConfig(lease_duration=timedelta(seconds=30))
    core = await cores.record("agent", numbered(0, 8), at=T0)
    stalled = RollingService(database, summarize, config)
    taken_over: list[RollingResult | None] = []
    real_append = stalled._units.append

    async def delayed(*args: Any, **kwargs: Any) -> Any:
        if not taken_over:  # the lease check passed; before the append lands, another roller takes over
            taken_over.append(await take_over_and_roll(database, config))
        return await real_append(*args, **kwargs)

    stalled._units.append = delayed  # type: ignore[method-assign]

    assert await stalled.roll("agent", now=T0) is None
    assert taken_over[0] is not None and list(taken_over[0].increment_messages) == numbered(0, 8)
    unit = await units.get(core.memory_session_id)
    assert unit is not None and unit.conversation_messages == numbered(0, 8)
    assert len(unit.complete_slices()) == 1


async def test_a_continuation_opened_by_a_roller_that_died_before_appending_is_filled_once(
    database: Any,
) -> None:
    cores, units = MemoryCoreRepository(database), MemoryUnitRepository(database)
    config = RollingConfig(
        unit_soft_limit_bytes=2_000, lease_duration=timedelta(seconds=30), retain_divisor=2
    )
    first = await cores.record("agent", numbered(0, 8), at=T0)
    assert await RollingService(database, summarize, config).roll("agent", now=T0) is not None
    await cores.record("agent", numbered(8, 40), at=T0)  # the next roll passes the soft limit
    dying = RollingService(database, summarize, config)

    async def dies(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("killed after the session switch, before the append")

    async def never(*args: Any, **kwargs: Any) -> bool:
        return False  # killed: its lease is never given back

    dying._units.append = dies  # type: ignore[method-assign]
    dying._lease.release = never  # type: ignore[method-assign]
    with contextlib.suppress(RuntimeError):
        await dying.roll("agent", now=T0)
    switched = await cores.get("agent")
    assert switched is not None and switched.memory_session_id != first.memory_session_id
    assert switched.session_continues == first.memory_session_id

    result = await take_over_and_roll(database, config)

    assert result is not None and list(result.increment_messages) == numbered(8, 40)
    full, continuation = await units.get(first.memory_session_id), await units.get(switched.memory_session_id)
    assert full is not None and continuation is not None
    assert continuation.previous_unit_id == full.id
    assert full.conversation_messages + continuation.conversation_messages == numbered(0, 40)
