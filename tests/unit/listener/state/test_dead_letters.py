"""Dead letters: one per consumer and slice, listed oldest first, replayed to the registered consumers."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from partner_repo import DeadLetterRepository, MemoryUnitRepository, replay_dead_letters
from tests.unit.listener.support import T0, Recorder, append, registry_of


async def letter_for(
    database: Any,
    consumer: str,
    slice_id: str,
    *,
    group: str = "default",
    minutes: int = 0,
    unit_id: str = "u1",
) -> None:
    await DeadLetterRepository(database).record(
        group=group,
        consumer=consumer,
        unit_id=unit_id,
        core_id="core",
        slice_id=slice_id,
        error=RuntimeError("down"),
        attempts=5,
        at=T0 + timedelta(minutes=minutes),
    )


async def test_failing_the_same_slice_again_updates_its_letter(memory_db: Any) -> None:
    letters = DeadLetterRepository(memory_db)
    await letter_for(memory_db, "indexer", "s1", minutes=0)
    await letters.record(
        group="default",
        consumer="indexer",
        unit_id="u1",
        core_id="core",
        slice_id="s1",
        error=ValueError("still down"),
        attempts=1,
        replay=True,
        at=T0 + timedelta(minutes=9),
    )

    (letter,) = await letters.list()
    assert (letter.attempts, letter.replays, letter.error) == (6, 1, "ValueError: still down")
    assert (letter.first_failed_at, letter.failed_at) == (T0, T0 + timedelta(minutes=9))


async def test_one_slice_id_in_two_units_gets_a_letter_per_unit(memory_db: Any) -> None:
    await letter_for(memory_db, "indexer", "s1", unit_id="u1")
    await letter_for(memory_db, "indexer", "s1", unit_id="u2", minutes=1)
    letters = DeadLetterRepository(memory_db)

    assert [(x.unit_id, x.slice_id) for x in await letters.list()] == [("u1", "s1"), ("u2", "s1")]
    assert await letters.remove((await letters.list())[0]) and len(await letters.list()) == 1


async def test_letters_are_listed_oldest_first_and_filtered_by_group_and_consumer(memory_db: Any) -> None:
    await letter_for(memory_db, "b", "s2", minutes=2)
    await letter_for(memory_db, "a", "s1", minutes=1)
    await letter_for(memory_db, "a", "s3", minutes=3, group="other")
    letters = DeadLetterRepository(memory_db)

    assert [x.slice_id for x in await letters.list()] == ["s1", "s2", "s3"]
    assert [x.slice_id for x in await letters.list(group="default")] == ["s1", "s2"]
    assert [x.slice_id for x in await letters.list(consumer="a")] == ["s1", "s3"]
    assert await letters.count(group="default", consumer="b") == 1


async def test_replay_delivers_removes_and_reports_each_letter(memory_db: Any) -> None:
    units = MemoryUnitRepository(memory_db)
    works, fails = Recorder("works"), Recorder("fails", fail_times=99)
    first, second = await append(units, "u1"), await append(units, "u1")
    await letter_for(memory_db, "works", first.id or "")
    await letter_for(memory_db, "fails", second.id or "", minutes=1)
    await letter_for(memory_db, "absent", second.id or "", minutes=2)
    await letter_for(memory_db, "works", "deleted-slice", minutes=3)

    report = await replay_dead_letters(memory_db, registry_of(works, fails))

    assert [x.slice_id for x in report.delivered] == [first.id]
    assert works.slice_ids == [first.id]
    assert [(x.consumer, x.attempts, x.replays) for x in report.failed] == [("fails", 6, 1)]
    assert [x.consumer for x in report.no_consumer] == ["absent"]
    assert [x.slice_id for x in report.slice_gone] == ["deleted-slice"]
    remaining = await DeadLetterRepository(memory_db).list()
    assert sorted(x.consumer for x in remaining) == ["absent", "fails", "works"]


async def test_replay_can_be_limited_to_one_consumer_and_one_group(memory_db: Any) -> None:
    units = MemoryUnitRepository(memory_db)
    a, b = Recorder("a"), Recorder("b")
    piece = await append(units, "u1")
    await letter_for(memory_db, "a", piece.id or "")
    await letter_for(memory_db, "b", piece.id or "")
    await letter_for(memory_db, "a", piece.id or "", group="elsewhere")

    report = await replay_dead_letters(memory_db, registry_of(a, b), consumer="a")

    assert [(x.group, x.consumer) for x in report.delivered] == [("default", "a")]
    assert a.slice_ids == [piece.id] and b.results == []
    assert len(await DeadLetterRepository(memory_db).list()) == 2
