"""An erasure cut short anywhere is finished by running it again: nothing is left, nothing announced twice."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from partner_repo import ErasureLog, MemoryCoreRepository, MemoryEraser, Message
from partner_repo.mongo import CORES, ERASURE_REQUESTS, ERASURES, UNITS
from tests.erasure_support import T0, Crash, CrashingDatabase, remember, rolling, unit_ids_of

CRASH_POINTS = [
    pytest.param(ERASURE_REQUESTS, "update_one", 2, id="while-recording-targets"),
    pytest.param(UNITS, "delete_many", 1, id="deleting-units"),
    pytest.param(CORES, "find_one_and_delete", 1, id="deleting-the-core"),
    pytest.param(ERASURES, "insert_one", 1, id="logging"),
    pytest.param(ERASURE_REQUESTS, "delete_many", 1, id="dropping-targets"),
]


async def crash_forget(database: Any, collection: str, method: str, after: int) -> None:
    with pytest.raises(Crash):
        await MemoryEraser(CrashingDatabase(database, collection, method, after)).forget("alice")


@pytest.mark.parametrize(("collection", "method", "after"), CRASH_POINTS)
async def test_a_rerun_after_a_crash_finishes_the_erasure(
    memory_db: Any, collection: str, method: str, after: int
) -> None:
    results = await remember(memory_db, "alice", turns=3, refresh=True)
    await crash_forget(memory_db, collection, method, after)

    await MemoryEraser(memory_db).forget("alice")

    assert await MemoryCoreRepository(memory_db).get("alice") is None
    assert await unit_ids_of(memory_db, "alice") == set()
    [erasure] = await ErasureLog(memory_db).after(0)
    assert set(erasure.slice_ids) == {r.slice_id for r in results}
    assert await MemoryEraser(memory_db).unfinished() == []


@pytest.mark.parametrize(("collection", "method", "after"), CRASH_POINTS[:4])
async def test_the_rerun_continues_the_erasure_the_crash_left_and_says_so(
    memory_db: Any, collection: str, method: str, after: int
) -> None:
    await remember(memory_db, "alice", turns=3, refresh=True)
    await crash_forget(memory_db, collection, method, after)
    [left] = await MemoryEraser(memory_db).unfinished("alice")

    report = await MemoryEraser(memory_db).forget("alice")

    assert report.resumed and report.erasure_id == left.erasure_id
    assert (report.units, report.slices, report.core_removed) == (3, 3, True)
    assert await memory_db[ERASURE_REQUESTS].count_documents({"kind": "request"}) == 1


async def test_a_part_logged_before_a_crash_is_not_logged_again(
    memory_db: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("partner_repo.listener.state._erasure_log.PART_UNITS", 1)
    await remember(memory_db, "alice", turns=3, refresh=True)
    await crash_forget(memory_db, ERASURES, "insert_one", 2)  # part 0 logged, part 1 not

    await MemoryEraser(memory_db).forget("alice")

    parts = await ErasureLog(memory_db).after(0)
    assert [(p.seq, p.part) for p in parts] == [(1, 0), (2, 1), (3, 2)]


async def test_an_unfinished_erasure_keeps_rolls_off_the_core(memory_db: Any) -> None:
    """Its window is not rolled into new memory before the erasure is run again."""
    await remember(memory_db, "alice", turns=1)
    await crash_forget(memory_db, UNITS, "delete_many", 1)
    cores = MemoryCoreRepository(memory_db)
    window = [Message(role="user", content=f"more {n}") for n in range(6)]
    await cores.record("alice", window, at=T0 + timedelta(hours=1))
    before = await unit_ids_of(memory_db, "alice")

    assert await rolling(memory_db).roll("alice", now=T0 + timedelta(hours=1)) is None
    assert await unit_ids_of(memory_db, "alice") == before


async def test_finish_pending_finishes_the_unfinished_erasures_of_every_core(memory_db: Any) -> None:
    for core_id in ("alice", "bob"):
        await remember(memory_db, core_id, turns=1)
        with pytest.raises(Crash):
            await MemoryEraser(CrashingDatabase(memory_db, UNITS, "delete_many")).forget(core_id)

    reports = await MemoryEraser(memory_db).finish_pending()

    assert sorted(r.core_id for r in reports) == ["alice", "bob"] and all(r.resumed for r in reports)
    assert await unit_ids_of(memory_db, "alice") == await unit_ids_of(memory_db, "bob") == set()


async def test_a_rerun_also_erases_what_was_recorded_into_the_core_before_it_finished(memory_db: Any) -> None:
    """A core being forgotten is forgotten as it is when the erasure finishes."""
    await remember(memory_db, "alice", turns=1)
    await crash_forget(memory_db, UNITS, "delete_many", 1)
    await MemoryCoreRepository(memory_db).record("alice", [{"role": "user", "content": "meanwhile"}])

    report = await MemoryEraser(memory_db).forget("alice")

    assert report.window_messages == 1 and await MemoryCoreRepository(memory_db).get("alice") is None
