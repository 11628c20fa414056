"""A summary ``resummarize`` replaced is delivered again, as a revision of the same slice, to every listener
group at least once (polling on the in-memory backend: the unit's version moves, so it is read again);
consumers tell it from a first delivery by ``RollingResult.revision`` / ``is_revision``."""

from __future__ import annotations

from typing import Any

from partner_repo import (
    SUMMARY_ON_EXCEPTION,
    DeadLetterRepository,
    MemoryCoreRepository,
    Message,
    RollingConfig,
    RollingResult,
    RollingService,
    replay_dead_letters,
)
from partner_repo.listener.state import ListenerCheckpoints
from tests.erasure_support import T0
from tests.unit.listener.support import Recorder, quick_listener, registry_of

QUICK = RollingConfig(summarize_attempts=1, retain_divisor=0)


async def down(messages: list[Message]) -> str:
    raise RuntimeError("model down")


async def back(messages: list[Message]) -> str:
    return f"{len(messages)} messages, summarized at last"


async def failed_roll(database: Any, core_id: str = "agent") -> RollingResult:
    cores = MemoryCoreRepository(database)
    turn = [Message(role="user", content="hi"), Message(role="assistant", content="hello")]
    await cores.record(core_id, turn)
    result = await RollingService(database, down, QUICK).roll(core_id, now=T0)
    assert result is not None and result.unsummarized
    return result


async def resummarize(database: Any) -> None:
    report = await RollingService(database, back, QUICK).resummarize()
    assert len(report.replaced) == 1


async def test_every_group_hears_of_the_new_summary_as_a_revision_of_the_same_slice(memory_db: Any) -> None:
    rolled = await failed_roll(memory_db)
    search, profile = Recorder("search"), Recorder("profile")
    async with (
        quick_listener(memory_db, registry_of(search), group="search") as first,
        quick_listener(memory_db, registry_of(profile), group="profile") as second,
    ):
        await first.flush()
        await second.flush()
        await resummarize(memory_db)
        await first.flush()
        await second.flush()

    for recorder in (search, profile):
        placeholder, revision = recorder.results
        assert placeholder.slice_id == revision.slice_id == rolled.slice_id
        assert (placeholder.revision, placeholder.is_revision, placeholder.unsummarized) == (0, False, True)
        assert placeholder.summary == SUMMARY_ON_EXCEPTION
        assert (revision.revision, revision.is_revision, revision.unsummarized) == (1, True, False)
        assert revision.summary == "2 messages, summarized at last"
        assert revision.increment_messages == placeholder.increment_messages


async def test_a_revision_is_delivered_once_also_across_a_restart(memory_db: Any) -> None:
    await failed_roll(memory_db)
    recorder = Recorder()
    async with quick_listener(memory_db, registry_of(recorder)) as listener:
        await listener.flush()
        await resummarize(memory_db)
        await listener.flush()
        await listener.flush()
    async with quick_listener(memory_db, registry_of(recorder)) as listener:
        await listener.flush()

    assert [r.revision for r in recorder.results] == [0, 1]


async def test_a_group_that_was_down_hears_only_the_new_summary(memory_db: Any) -> None:
    rolled = await failed_roll(memory_db)
    await resummarize(memory_db)
    recorder = Recorder()

    async with quick_listener(memory_db, registry_of(recorder)) as listener:
        await listener.flush()

    [only] = recorder.results
    assert (only.slice_id, only.revision) == (rolled.slice_id, 1)
    assert only.summary == "2 messages, summarized at last"


async def test_a_group_starting_from_now_takes_revisions_stored_before_as_delivered(memory_db: Any) -> None:
    await failed_roll(memory_db)
    await resummarize(memory_db)
    recorder = Recorder()

    async with quick_listener(memory_db, registry_of(recorder), start_from="now") as listener:
        await listener.flush()

    assert recorder.results == []


async def test_a_revision_a_consumer_finished_before_a_crash_goes_only_to_the_others(memory_db: Any) -> None:
    rolled = await failed_roll(memory_db)
    first, second = Recorder("first"), Recorder("second")
    async with quick_listener(memory_db, registry_of(first, second)) as listener:
        await listener.flush()
    await resummarize(memory_db)
    unit_id = rolled.memory_unit.id
    checkpoints = ListenerCheckpoints(memory_db, "default")
    # the first consumer finished the revision, then the listener crashed
    await checkpoints.mark_consumer_done(unit_id, "agent", rolled.slice_id, "first", revision=1)

    async with quick_listener(memory_db, registry_of(first, second)) as listener:
        await listener.flush()

    assert [r.revision for r in first.results] == [0]
    assert [r.revision for r in second.results] == [0, 1]
    progress = await checkpoints.unit(unit_id)
    assert progress.has_delivered((rolled.slice_id, 1)) and progress.partial == {}


async def test_a_dead_lettered_revision_is_a_letter_of_its_own_and_is_replayed(memory_db: Any) -> None:
    rolled = await failed_roll(memory_db)
    recorder = Recorder()
    async with quick_listener(memory_db, registry_of(recorder)) as listener:
        await listener.flush()
        recorder.fail_slices.add(rolled.slice_id)  # the index is down when the revision comes
        await resummarize(memory_db)
        await listener.flush()

    [letter] = await DeadLetterRepository(memory_db).list()
    assert (letter.slice_id, letter.revision) == (rolled.slice_id, 1)
    recorder.fail_slices.clear()
    report = await replay_dead_letters(memory_db, registry_of(recorder))

    assert [x.revision for x in report.delivered] == [1]
    assert [r.revision for r in recorder.results] == [0, 1]
    assert await DeadLetterRepository(memory_db).list() == []


async def test_a_placeholder_and_its_revision_both_dead_lettered_are_two_letters(memory_db: Any) -> None:
    rolled = await failed_roll(memory_db)
    recorder = Recorder(fail_slices=set())
    async with quick_listener(memory_db, registry_of(recorder)) as listener:
        recorder.fail_slices.add(rolled.slice_id)
        await listener.flush()
        await resummarize(memory_db)
        await listener.flush()

    letters = await DeadLetterRepository(memory_db).list()
    assert sorted((x.slice_id, x.revision) for x in letters) == [(rolled.slice_id, 0), (rolled.slice_id, 1)]
