"""The recall index fed end to end by a :class:`~partner_repo.RollingListener` (polling, in memory): rolls
are delivered to ``RecallIndexer``, erasures and new summaries too, and a new group from the beginning
backfills."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from partner_repo import (
    SUMMARY_ON_EXCEPTION,
    MemoryCoreRepository,
    MemoryEraser,
    Message,
    RollingConfig,
    RollingService,
)
from partner_repo.recall import RecallIndexer
from tests.recall_support import (
    BREAD,
    HIKE,
    PROJECT,
    T0,
    History,
    assert_counters_derive_from_slices,
    contents,
    index_state,
)
from tests.unit.listener.support import Recorder, quick_listener, registry_of

ONE_ATTEMPT = RollingConfig(summarize_attempts=1, summarize_backoff=timedelta(0))


async def deliver(database: Any, consumer: Any, **options: Any) -> None:
    """A listener (of group ``default`` unless told) delivers everything there is to ``consumer`` (rolls and
    erasures), then stops."""
    async with quick_listener(database, registry_of(consumer), **options) as listener:
        await listener.flush()


async def test_a_listener_delivers_every_roll_to_the_recall_index(memory_db: Any) -> None:
    history = History(memory_db)
    for session in (HIKE, BREAD, PROJECT):
        await history.roll("agent", session, index=False)  # rolled by a service; nobody indexes

    await deliver(memory_db, RecallIndexer(memory_db))

    recall = history.recall()
    for query, session in (("lighthouse whales", HIKE), ("sourdough starter", BREAD), ("记忆模块", PROJECT)):
        [found, *_] = await recall.recall("agent", query)
        assert found.summary == session.summary
        assert contents(found.messages) == [content for _, content in session.lines]
    await assert_counters_derive_from_slices(memory_db)


async def test_a_listener_running_again_delivers_nothing_twice(memory_db: Any) -> None:
    history = History(memory_db)
    await history.roll("agent", HIKE, index=False)
    indexer = RecallIndexer(memory_db)
    await deliver(memory_db, indexer)
    before = await index_state(memory_db)

    await deliver(memory_db, indexer, group="second")  # another group delivers the same roll again

    assert await index_state(memory_db) == before


async def test_an_erasure_reaches_the_recall_index_through_the_listener(memory_db: Any) -> None:
    history = History(memory_db)
    await history.roll("agent", HIKE, index=False)
    await history.roll("other", BREAD, index=False)
    indexer = RecallIndexer(memory_db)
    await deliver(memory_db, indexer)

    await MemoryEraser(memory_db).forget("agent")
    await deliver(memory_db, indexer)

    counters, slices = await index_state(memory_db)
    assert {row["core_id"] for row in slices} == {"other"}
    assert {core for core, _, _ in counters} == {"other"}
    assert await history.recall().recall("agent", "lighthouse") == []


async def test_a_resummarized_slice_is_delivered_again_and_indexed_under_its_new_summary(
    memory_db: Any,
) -> None:
    async def down(messages: list[Message]) -> str:
        raise RuntimeError("model down")

    async def back(messages: list[Message]) -> str:
        return "baking rye bread with caraway"

    await MemoryCoreRepository(memory_db).record("agent", [Message(role="user", content="bake rye")], at=T0)
    await MemoryCoreRepository(memory_db).record("agent", [Message(role="user", content="caraway?")], at=T0)
    placeholder = await RollingService(memory_db, down, ONE_ATTEMPT).roll(
        "agent", now=T0 + timedelta(hours=1)
    )
    assert placeholder is not None and placeholder.summary == SUMMARY_ON_EXCEPTION
    indexer = RecallIndexer(memory_db)
    await deliver(memory_db, indexer)

    report = await RollingService(memory_db, back, ONE_ATTEMPT).resummarize("agent")
    await deliver(memory_db, indexer)

    assert [item.slice_id for item in report.replaced] == [placeholder.slice_id]
    [found] = await History(memory_db).recall().recall("agent", "bread caraway")
    assert found.slice_id == placeholder.slice_id and found.summary == "baking rye bread with caraway"
    _, slices = await index_state(memory_db)
    assert [row["terms"] for row in slices if "except" in row["terms"]] == []  # the placeholder's words
    await assert_counters_derive_from_slices(memory_db)


async def test_a_group_started_from_the_beginning_indexes_what_was_rolled_before_it(memory_db: Any) -> None:
    """Backfill is just a new group: the slices other groups delivered long ago are indexed too."""
    history = History(memory_db)
    await history.roll("agent", HIKE, index=False)
    await deliver(memory_db, Recorder(), group="services")
    assert await history.recall().recall("agent", "whales") == []

    await deliver(memory_db, RecallIndexer(memory_db), group="recall", start_from="beginning")

    [found] = await history.recall().recall("agent", "whales")
    assert found.summary == HIKE.summary
