"""MemoryEraser.forget_before: the units of a core that ended before a date go; the rest of the core stays."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest

from partner_repo import (
    DeadLetterRepository,
    ErasureLog,
    InvalidInput,
    ListenerCheckpoints,
    MemoryCoreRepository,
    MemoryEraser,
    Message,
    RollingService,
)
from tests.erasure_support import T0, letter_on, progress_on, remember, rolling, unit_ids_of

ONE_DAY = timedelta(days=1)


async def three_days(database: Any) -> list[Any]:
    """One unit per day (each roll refreshes the session): units ending at T0, T0 + 1 day, T0 + 2 days."""
    results = []
    for day in range(3):
        results += await remember(database, "alice", turns=1, at=T0 + day * ONE_DAY, refresh=True)
    return results


async def test_the_units_that_ended_before_the_date_go_and_the_later_ones_stay(memory_db: Any) -> None:
    *_, day2 = await three_days(memory_db)

    report = await MemoryEraser(memory_db).forget_before("alice", T0 + ONE_DAY + timedelta(hours=1))

    assert report.scope == "before" and report.units == 2
    assert await unit_ids_of(memory_db, "alice") == {day2.memory_unit.id}


async def test_a_unit_that_ended_after_the_date_stays_although_it_began_before(memory_db: Any) -> None:
    """``updated_at`` (its last slice), not its first: a unit goes only once all of it is older."""
    results = await remember(memory_db, "alice", turns=2, at=T0)  # one unit: slices at T0 and T0 + 1 min
    await rolling(memory_db).roll("alice", now=T0 + ONE_DAY, refresh_session=True)  # unit now old and closed

    report = await MemoryEraser(memory_db).forget_before("alice", T0 + timedelta(seconds=30))

    assert report.units == 0 and await unit_ids_of(memory_db, "alice") == {results[0].memory_unit.id}


async def test_the_window_and_the_core_stay(memory_db: Any) -> None:
    await three_days(memory_db)
    cores = MemoryCoreRepository(memory_db)
    await cores.record("alice", [{"role": "user", "content": "live"}], at=T0 + 3 * ONE_DAY)
    before = await cores.get("alice")

    await MemoryEraser(memory_db).forget_before("alice", T0 + 10 * ONE_DAY)

    after = await cores.get("alice")
    assert after is not None and before is not None
    assert (after.chat_messages, after.memory_session_id) == (before.chat_messages, before.memory_session_id)
    assert after.lease_owner is None  # the erasure gave the lease back


async def test_the_current_sessions_unit_is_kept_however_old(memory_db: Any) -> None:
    """The next roll resolves its increment against it; erasing it would store the window again."""
    [current] = await remember(memory_db, "alice", turns=1, at=T0)

    report = await MemoryEraser(memory_db).forget_before("alice", T0 + 10 * ONE_DAY)

    assert report.kept_units == (current.memory_unit.id,) and report.units == 0
    assert await unit_ids_of(memory_db, "alice") == {current.memory_unit.id}


async def test_the_unit_the_current_session_continues_is_kept_too(memory_db: Any) -> None:
    cores = MemoryCoreRepository(memory_db)
    service = RollingService(memory_db, lambda m: "s", rolling(memory_db).config)
    small = RollingService(
        memory_db, lambda m: "s", type(service.config)(trigger_limit=4, unit_soft_limit_bytes=1)
    )
    await cores.record("alice", [Message(role="user", content=f"a{n}") for n in range(4)], at=T0)
    first = await service.roll("alice", now=T0)
    await cores.record("alice", [Message(role="user", content=f"b{n}") for n in range(4)], at=T0)
    second = await small.roll("alice", now=T0)  # the first unit is "full": the roll continues in a new one
    assert first is not None and second is not None and second.memory_unit.id != first.memory_unit.id

    report = await MemoryEraser(memory_db).forget_before("alice", T0 + ONE_DAY)

    assert set(report.kept_units) == {first.memory_unit.id, second.memory_unit.id}
    assert await unit_ids_of(memory_db, "alice") == {first.memory_unit.id, second.memory_unit.id}


async def test_progress_and_dead_letters_of_the_erased_units_go_and_the_erasure_is_announced(
    memory_db: Any,
) -> None:
    day0, _, day2 = await three_days(memory_db)
    for result in (day0, day2):
        await progress_on(memory_db, result)
        await letter_on(memory_db, result)

    report = await MemoryEraser(memory_db).forget_before("alice", T0 + timedelta(hours=1))

    assert (report.units, report.checkpoints, report.dead_letters) == (1, 1, 1)
    checkpoints = ListenerCheckpoints(memory_db, "default")
    assert (await checkpoints.unit(day0.memory_unit.id)).delivered == set()
    assert (await checkpoints.unit(day2.memory_unit.id)).delivered == {day2.slice_id}
    assert [x.slice_id for x in await DeadLetterRepository(memory_db).list()] == [day2.slice_id]
    [erasure] = await ErasureLog(memory_db).after(0)
    assert (erasure.scope, erasure.unit_ids, erasure.slice_ids) == (
        "before",
        (day0.memory_unit.id,),
        (day0.slice_id,),
    )


async def test_nothing_before_the_date_means_nothing_recorded(memory_db: Any) -> None:
    await three_days(memory_db)

    report = await MemoryEraser(memory_db).forget_before("alice", T0 - ONE_DAY)

    assert report.erasure_id is None and await ErasureLog(memory_db).last_seq() == 0


@pytest.mark.parametrize("before", [None, "2024-01-01", 1700000000])
async def test_a_date_that_is_not_a_datetime_is_refused(memory_db: Any, before: Any) -> None:
    with pytest.raises(InvalidInput):
        await MemoryEraser(memory_db).forget_before("alice", before)


async def test_a_naive_date_is_taken_as_utc(memory_db: Any) -> None:
    day0, _, _ = await three_days(memory_db)

    await MemoryEraser(memory_db).forget_before("alice", datetime(2024, 3, 1, 10, 0))  # T0 + 1 h, no tzinfo

    assert day0.memory_unit.id not in await unit_ids_of(memory_db, "alice")
