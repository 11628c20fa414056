"""MemoryEraser.forget: a core's window, units, listener progress and dead letters go; nothing else does."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from partner_repo import (
    DeadLetterRepository,
    ErasureLog,
    ListenerCheckpoints,
    MemoryCoreRepository,
    MemoryEraser,
)
from partner_repo.mongo import ERASURE_REQUESTS
from tests.erasure_support import letter_on, progress_on, remember, unit_ids_of


async def test_forget_removes_the_cores_window_and_every_unit_of_it(memory_db: Any) -> None:
    await remember(memory_db, "alice", turns=2, refresh=True)  # two sessions: two units
    await MemoryCoreRepository(memory_db).record("alice", [{"role": "user", "content": "still live"}])
    assert len(await unit_ids_of(memory_db, "alice")) == 2

    await MemoryEraser(memory_db).forget("alice")

    assert await MemoryCoreRepository(memory_db).get("alice") is None
    assert await unit_ids_of(memory_db, "alice") == set()


async def test_forget_leaves_other_cores_untouched(memory_db: Any) -> None:
    await remember(memory_db, "alice")
    [bob] = await remember(memory_db, "bob", turns=1)
    before = await MemoryCoreRepository(memory_db).get("bob")

    await MemoryEraser(memory_db).forget("alice")

    assert await MemoryCoreRepository(memory_db).get("bob") == before
    assert await unit_ids_of(memory_db, "bob") == {bob.memory_unit.id}


async def test_forget_removes_every_groups_progress_on_the_erased_units(memory_db: Any) -> None:
    [erased] = await remember(memory_db, "alice", turns=1)
    [kept] = await remember(memory_db, "bob", turns=1)
    for group in ("search", "topics"):
        await progress_on(memory_db, erased, group)
        await progress_on(memory_db, kept, group)

    await MemoryEraser(memory_db).forget("alice")

    for group in ("search", "topics"):
        checkpoints = ListenerCheckpoints(memory_db, group)
        assert (await checkpoints.unit(erased.memory_unit.id)).delivered == set()
        assert (await checkpoints.unit(kept.memory_unit.id)).delivered == {kept.slice_id}


async def test_forget_removes_the_dead_letters_of_the_erased_slices(memory_db: Any) -> None:
    [erased] = await remember(memory_db, "alice", turns=1)
    [kept] = await remember(memory_db, "bob", turns=1)
    await letter_on(memory_db, erased)
    await letter_on(memory_db, kept)

    await MemoryEraser(memory_db).forget("alice")

    assert [letter.slice_id for letter in await DeadLetterRepository(memory_db).list()] == [kept.slice_id]


async def test_forget_reports_what_it_removed(memory_db: Any) -> None:
    results = await remember(memory_db, "alice", turns=3, refresh=True)
    await progress_on(memory_db, results[0], "search")
    await letter_on(memory_db, results[1])
    window = len(await MemoryCoreRepository(memory_db).snapshot("alice"))

    report = await MemoryEraser(memory_db).forget("alice")

    assert report.erasure_id is not None and not report.resumed
    assert (report.core_removed, report.window_messages) == (True, window)
    assert (report.units, report.slices, report.checkpoints, report.dead_letters) == (3, 3, 1, 1)
    assert report.log_parts == 1


async def test_forgetting_again_removes_nothing_and_records_no_erasure(memory_db: Any) -> None:
    await remember(memory_db, "alice")
    eraser = MemoryEraser(memory_db)
    await eraser.forget("alice")

    again = await eraser.forget("alice")

    assert again.erasure_id is None and (again.units, again.slices, again.core_removed) == (0, 0, False)
    assert await ErasureLog(memory_db).last_seq() == 1


async def test_forgetting_a_core_that_never_existed_writes_nothing(memory_db: Any) -> None:
    report = await MemoryEraser(memory_db).forget("nobody")

    assert report.erasure_id is None
    assert await memory_db[ERASURE_REQUESTS].count_documents({}) == 0


async def test_forget_logs_the_erased_ids_and_nothing_with_content(memory_db: Any) -> None:
    results = await remember(memory_db, "alice", turns=2)

    report = await MemoryEraser(memory_db).forget("alice")

    [erasure] = await ErasureLog(memory_db).after(0)
    assert (erasure.erasure_id, erasure.core_id, erasure.scope) == (report.erasure_id, "alice", "core")
    assert erasure.unit_ids == (results[0].memory_unit.id,)
    assert set(erasure.slice_ids) == {r.slice_id for r in results}
    stored = await memory_db["erasures"].find_one({})
    assert "secret" not in repr(stored) and "answer" not in repr(stored)


async def test_the_erasure_record_keeps_ids_and_counts_only(memory_db: Any) -> None:
    await remember(memory_db, "alice", turns=2)

    await MemoryEraser(memory_db).forget("alice")

    stored = [document async for document in memory_db[ERASURE_REQUESTS].find({})]
    assert [document["state"] for document in stored] == ["done"]  # its targets are dropped once logged
    assert "secret" not in repr(stored) and "summary" not in repr(stored)


async def test_a_whole_core_without_units_is_still_announced(memory_db: Any) -> None:
    """A consumer may keep state per core; the window alone never reached it, but it hears of the core."""
    await MemoryCoreRepository(memory_db).record("alice", [{"role": "user", "content": "hello"}])

    report = await MemoryEraser(memory_db).forget("alice")

    [erasure] = await ErasureLog(memory_db).after(0)
    assert report.window_messages == 1 and (erasure.core_id, erasure.unit_ids) == ("alice", ())


async def test_a_large_core_is_erased_in_batches_and_logged_in_parts(
    memory_db: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("partner_repo.erasure._eraser.BATCH", 2)
    monkeypatch.setattr("partner_repo.listener.state._erasure_log.PART_UNITS", 2)
    results = await remember(memory_db, "alice", turns=5, refresh=True)

    report = await MemoryEraser(memory_db).forget("alice")

    parts = await ErasureLog(memory_db).after(0)
    assert report.units == 5 and report.log_parts == 3 == len(parts)
    assert [p.part for p in parts] == [0, 1, 2]
    assert {u for p in parts for u in p.unit_ids} == {r.memory_unit.id for r in results}
    assert await unit_ids_of(memory_db, "alice") == set()


@pytest.mark.parametrize("core_id", ["", "   ", 7])
async def test_a_bad_core_id_is_refused(memory_db: Any, core_id: Any) -> None:
    with pytest.raises(ValueError):
        await MemoryEraser(memory_db).forget(core_id)


async def test_erasures_finishing_at_once_take_distinct_positions_in_the_log(racy_db: Any) -> None:
    """Each takes ``last + 1``; the loser of a race for a position takes the next, so none is skipped."""
    log = ErasureLog(racy_db)

    await asyncio.gather(*(log.append(f"e{n}", f"core{n}", "core", [(f"u{n}", [f"s{n}"])]) for n in range(5)))

    parts = await log.after(0)
    assert [p.seq for p in parts] == [1, 2, 3, 4, 5]
    assert sorted(p.erasure_id for p in parts) == [f"e{n}" for n in range(5)]


async def test_logging_the_same_erasure_twice_logs_each_part_once(racy_db: Any) -> None:
    log = ErasureLog(racy_db)
    targets = [("u1", ["s1"])]

    await asyncio.gather(log.append("e", "core", "core", targets), log.append("e", "core", "core", targets))

    assert [(p.seq, p.erasure_id, p.part) for p in await log.after(0)] == [(1, "e", 0)]
