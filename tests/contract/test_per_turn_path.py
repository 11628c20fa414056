"""The per-turn path: ``record`` answers the window's size (not the window), ``record_and_roll`` rolls when
due, the lease is taken only while the stored window is due, and a roll stores what follows the unit's mark.

Run on the embedded backend and, with ``MONGODB_URI``, on a real server (the guards are server queries).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from partner_repo import (
    InvalidInput,
    MemoryCoreRepository,
    MemoryUnitRepository,
    Message,
    RollingConfig,
    RollingService,
)
from partner_repo.cores import CoreLease
from partner_repo.mongo import CORES
from tests.contract.rolling_contract_support import T0, assert_tiles, numbered, summarize

CONFIG = RollingConfig(trigger_limit=8, retain_divisor=4)


def turn(number: int) -> list[Message]:
    return numbered(2 * number, 2 * number + 2)


def service(database: Any) -> RollingService:
    return RollingService(database, summarize, CONFIG)


async def test_record_answers_the_window_size_and_session_without_the_window(database: Any) -> None:
    cores = MemoryCoreRepository(database)
    await cores.record("agent", numbered(0, 3), at=T0)
    recorded = await cores.record("agent", numbered(3, 5), at=T0 + timedelta(seconds=1))

    assert recorded.core_id == "agent" and recorded.window_size == 5
    assert recorded.memory_session_id == await cores.session_id("agent")
    assert recorded.last_interaction_at == T0 + timedelta(seconds=1) and not recorded.idle_rolled
    assert recorded.lease.holder is None
    assert recorded == await cores.window_state("agent")


async def test_a_core_stored_without_a_window_count_is_counted_once_and_then_recorded(database: Any) -> None:
    await database[CORES].insert_one(
        {"_id": "old", "memory_session_id": "s-old", "session_started_at": T0, "chat_messages": []}
    )
    await database[CORES].update_one(
        {"_id": "old"}, {"$push": {"chat_messages": {"$each": [m.model_dump() for m in numbered(0, 3)]}}}
    )
    cores = MemoryCoreRepository(database)

    recorded = await cores.record("old", numbered(3, 4), at=T0)

    assert recorded.window_size == 4 and recorded.memory_session_id == "s-old"
    assert await cores.snapshot("old") == numbered(0, 4)


async def test_record_and_roll_records_every_turn_and_rolls_once_the_window_reaches_the_limit(
    database: Any,
) -> None:
    cores, units = MemoryCoreRepository(database), MemoryUnitRepository(database)
    rolling = service(database)
    results = [
        await rolling.record_and_roll("agent", turn(n), at=T0 + timedelta(seconds=n)) for n in range(4)
    ]

    assert results[:3] == [None, None, None]  # 2, 4, 6 messages: below the limit of 8
    rolled = results[3]
    assert rolled is not None and list(rolled.increment_messages) == numbered(0, 8)
    unit = await units.get(await cores.session_id("agent"))
    assert unit is not None and unit.conversation_messages == numbered(0, 8)
    assert await cores.snapshot("agent") == numbered(6, 8)  # the last quarter is kept as context


async def test_maybe_roll_decides_on_what_record_returned(database: Any) -> None:
    cores = MemoryCoreRepository(database)
    rolling = service(database)
    below = await cores.record("agent", numbered(0, 6), at=T0)
    assert await rolling.maybe_roll("agent", T0, recorded=below) is None
    due = await cores.record("agent", numbered(6, 8), at=T0)

    result = await rolling.maybe_roll("agent", T0, recorded=due)

    assert result is not None and list(result.increment_messages) == numbered(0, 8)


async def test_maybe_roll_refuses_the_window_state_of_another_core(database: Any) -> None:
    cores = MemoryCoreRepository(database)
    other = await cores.record("other", numbered(0, 8), at=T0)
    with pytest.raises(InvalidInput, match="recorded"):
        await service(database).maybe_roll("agent", T0, recorded=other)
    assert await cores.get("agent") is None


async def test_the_lease_is_not_taken_once_the_stored_window_is_no_longer_due(database: Any) -> None:
    cores = MemoryCoreRepository(database)
    rolling = service(database)
    stale = await cores.record("agent", numbered(0, 8), at=T0)
    assert await rolling.maybe_roll("agent", T0) is not None  # another process rolled it meanwhile

    assert await rolling.maybe_roll("agent", T0, recorded=stale) is None

    core = await cores.get("agent")
    assert core is not None and core.lease_owner is None and core.chat_messages == numbered(6, 8)


async def test_acquiring_with_a_condition_the_core_does_not_meet_takes_nothing(database: Any) -> None:
    cores = MemoryCoreRepository(database)
    await cores.record("agent", numbered(0, 3), at=T0)
    lease = CoreLease(database)

    taken = await lease.acquire(
        "agent", "me", duration=timedelta(minutes=1), when={"chat_messages.7": {"$exists": True}}
    )

    assert taken is None
    state = await lease.state("agent")
    assert state is not None and state.holder is None


async def test_a_roll_marks_the_positions_it_stored_and_the_next_roll_stores_only_what_follows(
    database: Any,
) -> None:
    cores, units = MemoryCoreRepository(database), MemoryUnitRepository(database)
    rolling = service(database)
    await cores.record("agent", numbered(0, 8), at=T0)
    await rolling.roll("agent", now=T0)
    session = await cores.session_id("agent")

    head = await units.head(session)
    state = await cores.window_state("agent")
    assert head is not None and head.mark == 8  # positions 0..7 are stored
    assert state is not None and (state.window_start, state.window_end) == (6, 8)  # 6 and 7 kept as context

    await cores.record("agent", numbered(8, 14), at=T0)
    result = await rolling.roll("agent", now=T0)

    assert result is not None and list(result.increment_messages) == numbered(8, 14)
    unit = await units.get(session)
    assert unit is not None and unit.conversation_messages == numbered(0, 14)
    assert_tiles(unit)


async def test_a_unit_rewritten_without_its_mark_is_resolved_by_its_stored_tail_once(database: Any) -> None:
    cores, units = MemoryCoreRepository(database), MemoryUnitRepository(database)
    rolling = service(database)
    await cores.record("agent", numbered(0, 8), at=T0)
    await rolling.roll("agent", now=T0)
    session = await cores.session_id("agent")
    # another writer (an import, a 0.3 process) stored messages 8..10 of the window's future meanwhile,
    # rewriting the unit without the positions mark
    unit = await units.get(session)
    assert unit is not None
    unit.conversation_messages.extend(numbered(8, 10))
    await units.save(unit)
    await cores.record("agent", numbered(8, 14), at=T0)

    result = await rolling.roll("agent", now=T0)

    assert result is not None and list(result.increment_messages) == numbered(10, 14)
    unit = await units.get(session)
    assert unit is not None and unit.conversation_messages == numbered(0, 14)  # each message once
    head = await units.head(session)
    assert head is not None and head.mark == 14  # from now on, positions decide


async def test_a_trim_that_is_not_a_roll_moves_the_window_start_with_what_it_drops(database: Any) -> None:
    cores = MemoryCoreRepository(database)
    await cores.record("agent", numbered(0, 8), at=T0)
    await service(database).roll("agent", now=T0)
    await cores.record("agent", numbered(8, 12), at=T0)

    await cores.trim_window("agent", 4, 2)

    core = await cores.get("agent")
    assert core is not None and core.window_start == 8  # each kept message keeps its position
    assert core.chat_messages == numbered(8, 12)


async def test_a_core_whose_window_is_stored_as_null_takes_turns(database: Any) -> None:
    """Issue 19, finding 5's variant: a window another tool stored as null (with a count) reads as empty, and
    the first record stores it as the empty array it is."""
    await database[CORES].insert_one(
        {
            "_id": "odd",
            "memory_session_id": "s",
            "session_started_at": T0,
            "chat_messages": None,
            "window_size": 0,
        }
    )
    cores = MemoryCoreRepository(database)

    recorded = await cores.record("odd", numbered(0, 2), at=T0)

    assert recorded.window_size == 2 and await cores.snapshot("odd") == numbered(0, 2)
