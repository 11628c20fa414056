"""The chat window on MemoryCore: ``record`` appends atomically, ``snapshot`` reads, ``trim_window`` rolls."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest

from partner_repo import InvalidInput, LeaseLost, MemoryCoreRepository, NotFound, WindowState
from partner_repo.clock import utc_now
from partner_repo.cores import CoreLease
from partner_repo.mongo import CORES
from tests.unit.rolling.support import T0, message, numbered


async def test_record_appends_messages_in_order_and_marks_the_interaction(
    cores: MemoryCoreRepository,
) -> None:
    await cores.record("agent", numbered(0, 2), at=T0)
    recorded = await cores.record("agent", numbered(2, 5), at=T0 + timedelta(minutes=1))
    core = await cores.get("agent")

    assert core is not None and core.chat_messages == numbered(0, 5)
    assert core.last_interaction_at == T0 + timedelta(minutes=1)
    assert recorded == WindowState.of(core)
    assert await cores.snapshot("agent") == numbered(0, 5)


async def test_record_creates_a_missing_core_with_a_fresh_session(cores: MemoryCoreRepository) -> None:
    recorded = await cores.record("new", [message(0)], at=T0)
    core = await cores.get("new")

    assert core is not None and core.memory_session_id
    assert core.session_started_at == T0
    assert core.lease_owner is None and core.idle_rolled is False
    assert recorded == WindowState.of(core)


async def test_record_keeps_the_existing_session(cores: MemoryCoreRepository) -> None:
    session = await cores.session_id("agent")
    core = await cores.record("agent", [message(0)])
    assert core.memory_session_id == session


async def test_record_without_a_time_stamps_the_current_time(cores: MemoryCoreRepository) -> None:
    before = utc_now()
    core = await cores.record("agent", [message(0)])
    assert core.last_interaction_at is not None and before <= core.last_interaction_at <= utc_now()


async def test_record_accepts_message_mappings(cores: MemoryCoreRepository) -> None:
    await cores.record("agent", [{"role": "assistant", "content": "hi"}])
    assert (await cores.snapshot("agent"))[0].role == "assistant"


async def test_record_of_no_messages_only_marks_the_interaction(cores: MemoryCoreRepository) -> None:
    await cores.record("agent", [message(0)], at=T0)
    recorded = await cores.record("agent", [], at=T0 + timedelta(hours=1))
    assert await cores.snapshot("agent") == [message(0)]
    assert recorded.window_size == 1 and recorded.last_interaction_at == T0 + timedelta(hours=1)


@pytest.mark.parametrize(
    "messages",
    [
        [{"role": "robot", "content": "x"}],
        [None],
        "hello",
        [{"role": "user"}],
        [{"role": "user", "content": 3}],
    ],
)
async def test_record_of_a_bad_message_writes_nothing(cores: MemoryCoreRepository, messages: Any) -> None:
    await cores.record("agent", [message(0)], at=T0)
    with pytest.raises(InvalidInput):
        await cores.record("agent", [message(1), *messages] if isinstance(messages, list) else messages)
    core = await cores.get("agent")
    assert core is not None and core.chat_messages == [message(0)] and core.last_interaction_at == T0


@pytest.mark.parametrize("core_id", ["", "  ", None, 7])
async def test_record_refuses_a_bad_core_id(cores: MemoryCoreRepository, core_id: Any) -> None:
    with pytest.raises(InvalidInput):
        await cores.record(core_id, [message(0)])


async def test_record_refuses_a_time_that_is_not_a_datetime(cores: MemoryCoreRepository) -> None:
    with pytest.raises(InvalidInput):
        await cores.record("agent", [message(0)], at="yesterday")  # type: ignore[arg-type]


async def test_record_is_one_write_and_no_read(memory_db: Any) -> None:
    calls: list[str] = []
    collection = memory_db[CORES]

    class Spy:
        def __getitem__(self, name: str) -> Any:
            return SpyCollection() if name == CORES else memory_db[name]

    class SpyCollection:
        def __getattr__(self, name: str) -> Any:
            calls.append(name)
            return getattr(collection, name)

    await MemoryCoreRepository(Spy()).record("agent", [message(0)])
    assert calls == ["find_one_and_update", "find_one", "insert_one"]  # a new core: update, look, insert
    calls.clear()

    await MemoryCoreRepository(Spy()).record("agent", [message(1)])
    assert calls == ["find_one_and_update"]  # every later turn: one write, no read


async def test_concurrent_records_never_lose_a_message(racy_db: Any) -> None:
    cores = MemoryCoreRepository(racy_db)

    async def writer(number: int) -> None:
        for step in range(5):
            await cores.record("agent", [message(number * 100 + step)])

    await asyncio.gather(*(writer(n) for n in range(10)))
    window = await cores.snapshot("agent")
    assert sorted(m.content for m in window) == sorted(
        f"message {n * 100 + s}" for n in range(10) for s in range(5)
    )
    for number in range(10):  # each writer's messages keep their order
        mine = [m for m in window if int(m.content.split()[1]) // 100 == number]
        assert mine == [message(number * 100 + s) for s in range(5)]


async def test_record_clears_the_idle_rolled_mark(cores: MemoryCoreRepository) -> None:
    await cores.record("agent", numbered(0, 3), at=T0)
    assert await cores.mark_idle_rolled("agent", window_size=3, last_interaction_at=T0)
    core = await cores.record("agent", [message(3)], at=T0 + timedelta(hours=2))
    assert core.idle_rolled is False


async def test_snapshot_of_a_missing_core_is_empty_and_creates_nothing(cores: MemoryCoreRepository) -> None:
    assert await cores.snapshot("nobody") == []
    assert await cores.get("nobody") is None


async def test_trim_keeps_messages_recorded_after_the_snapshot(cores: MemoryCoreRepository) -> None:
    await cores.record("agent", numbered(0, 36))
    snapshot = await cores.snapshot("agent")
    await cores.record("agent", numbered(36, 40))

    dropped = await cores.trim_window("agent", len(snapshot), 6)

    assert dropped == 30
    assert await cores.snapshot("agent") == numbered(30, 40)


async def test_trim_of_a_zero_snapshot_changes_nothing(cores: MemoryCoreRepository) -> None:
    core = await cores.record("agent", numbered(0, 5))
    assert await cores.trim_window("agent", 0, 6) == 0
    after = await cores.get("agent")
    assert after is not None and after.chat_messages == numbered(0, 5) and after.version == core.version


async def test_trim_racing_a_record_stream_loses_nothing(racy_db: Any) -> None:
    cores = MemoryCoreRepository(racy_db)
    await cores.record("agent", numbered(0, 36))

    async def stream() -> None:
        for number in range(36, 60):
            await cores.record("agent", numbered(number, number + 1))

    await asyncio.gather(stream(), cores.trim_window("agent", 36, 6))
    assert await cores.snapshot("agent") == numbered(30, 60)


async def test_trim_of_a_missing_core_is_not_found(cores: MemoryCoreRepository) -> None:
    with pytest.raises(NotFound):
        await cores.trim_window("nobody", 3, 6)


@pytest.mark.parametrize(("snapshot_size", "divisor"), [(3.0, 6), ("3", 6), (3, None), (False, 6)])
async def test_trim_refuses_non_integer_arguments_before_writing(
    cores: MemoryCoreRepository, snapshot_size: Any, divisor: Any
) -> None:
    await cores.record("agent", numbered(0, 5))
    with pytest.raises(InvalidInput):
        await cores.trim_window("agent", snapshot_size, divisor)
    assert await cores.snapshot("agent") == numbered(0, 5)


async def test_a_fenced_trim_by_a_roller_that_lost_its_lease_writes_nothing(
    cores: MemoryCoreRepository,
) -> None:
    await cores.record("agent", numbered(0, 10), at=T0)
    lease = CoreLease(cores._database)
    await lease.acquire("agent", "slow", duration=timedelta(seconds=1))
    await lease.acquire("agent", "other", duration=timedelta(seconds=1), silent=await lease.state("agent"))

    with pytest.raises(LeaseLost):
        await cores.trim_window("agent", 10, 6, lease_owner="slow")
    assert await cores.snapshot("agent") == numbered(0, 10)
    assert await cores.trim_window("agent", 10, 6, lease_owner="other") == 9


async def test_mark_idle_rolled_is_refused_when_a_message_came_in(cores: MemoryCoreRepository) -> None:
    await cores.record("agent", numbered(0, 3), at=T0)
    await cores.record("agent", [message(3)], at=T0)  # same instant: only the window size tells
    assert not await cores.mark_idle_rolled("agent", window_size=3, last_interaction_at=T0)
    assert await cores.mark_idle_rolled("agent", window_size=4, last_interaction_at=T0)


async def test_idle_core_ids_are_the_idle_unrolled_windows_of_two_or_more_longest_idle_first(
    cores: MemoryCoreRepository,
) -> None:
    await cores.record("recent", numbered(0, 5), at=T0 + timedelta(hours=2))
    await cores.record("older", numbered(0, 2), at=T0 - timedelta(hours=1))
    await cores.record("old", numbered(0, 2), at=T0)
    await cores.record("single", numbered(0, 1), at=T0)
    await cores.record("rolled", numbered(0, 4), at=T0)
    await cores.mark_idle_rolled("rolled", window_size=4, last_interaction_at=T0)
    await cores.get_or_create("silent")

    assert await cores.idle_core_ids(T0 + timedelta(hours=1)) == ["older", "old"]
