"""Recall on a real server (``MONGODB_URI``; SecantusDB in CI): English and Chinese recall through the public
API, a listener on the change stream feeding ``RecallIndexer``, erasure, and the cost claim: a recall sends
the same reads (finds and aggregations) whatever the history's size, an index write three commands, and
what they bring back does not grow with the history."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

import pytest
from bson import encode
from pymongo import monitoring

from partner_repo import (
    AfterRollingRegistry,
    Backoff,
    MemoryEraser,
    MemoryUnitRepository,
    Message,
    RollingListener,
    RollingResult,
    close_database,
    init_repository,
)
from partner_repo.recall import MemoryRecall, RecallIndexer
from tests import conftest
from tests.conftest import real_database
from tests.recall_support import (
    BREAD,
    CONVERSATION,
    HIKE,
    NOW,
    PROJECT,
    TRAVEL,
    History,
    assert_counters_derive_from_slices,
    contents,
    index_state,
)

pytestmark = pytest.mark.integration

until = partial(conftest.until, within=15.0)  # a real replica set may take longer to deliver than the fakes
QUICK = Backoff(initial=0.01, maximum=0.05, jitter=0)


class Commands(monitoring.CommandListener):
    """Every command the client sends, and the size of each reply."""

    def __init__(self) -> None:
        self.sent: list[str] = []
        self.reply_bytes: list[int] = []

    def started(self, event: monitoring.CommandStartedEvent) -> None:
        self.sent.append(event.command_name)

    def succeeded(self, event: monitoring.CommandSucceededEvent) -> None:
        self.reply_bytes.append(len(encode(event.reply)))

    def failed(self, event: monitoring.CommandFailedEvent) -> None:
        self.reply_bytes.append(0)

    def clear(self) -> None:
        self.sent.clear()
        self.reply_bytes.clear()


@pytest.fixture
async def watched() -> AsyncIterator[tuple[Any, Commands]]:
    """A fresh database on the server through a client that records its commands."""
    commands = Commands()
    database = await real_database(event_listeners=[commands])
    await init_repository(database)
    try:
        yield database, commands
    finally:
        await database.client.drop_database(database.name)
        await close_database(database)


@pytest.fixture
def server_db(watched: tuple[Any, Commands]) -> Any:
    return watched[0]


async def test_english_and_chinese_queries_find_their_slices_and_raw_messages(server_db: Any) -> None:
    history = History(server_db)
    await history.rolls("agent", CONVERSATION)
    recall = history.recall()

    [hike, *_] = await recall.recall("agent", "Which whales did we see near the lighthouse?")
    [project, *_] = await recall.recall("agent", "项目的记忆模块是怎么讨论的？")  # noqa: RUF001
    [travel, *_] = await recall.recall("agent", "杭州 high-speed 高铁")
    [yesterday, *_] = await recall.recall("agent", "我们昨天聊了什么？")  # noqa: RUF001

    assert hike.summary == HIKE.summary and contents(hike.messages) == [c for _, c in HIKE.lines]
    assert project.summary == PROJECT.summary and contents(project.messages) == [c for _, c in PROJECT.lines]
    assert travel.summary == TRAVEL.summary
    assert yesterday.summary == PROJECT.summary and "date" in yesterday.sources
    await assert_counters_derive_from_slices(server_db)


async def test_the_window_filters_before_ranking_on_the_server(server_db: Any) -> None:
    history = History(server_db)
    await history.rolls("agent", CONVERSATION)
    since, until_ = BREAD.day, BREAD.day + timedelta(days=1)

    found = await history.recall().recall("agent", "lighthouse whales sourdough", since=since, until=until_)

    assert [piece.summary for piece in found] == [BREAD.summary]


async def test_a_listener_on_the_change_stream_feeds_the_recall_index(server_db: Any) -> None:
    history = History(server_db)
    indexer = RecallIndexer(server_db)
    registry = AfterRollingRegistry([indexer])
    async with RollingListener(server_db, registry, backoff=QUICK, poll_interval=0.05) as listener:
        for piece in (HIKE, BREAD, PROJECT):
            await history.roll("agent", piece, index=False)
        await until(lambda: _indexed(server_db, 3))
        await listener.flush()

        [found, *_] = await history.recall().recall("agent", "sourdough starter")
        assert found.summary == BREAD.summary

        await history.roll("other", HIKE, index=False)
        await until(lambda: _indexed(server_db, 4))
        await MemoryEraser(server_db).forget("agent")
        assert await history.recall().recall("agent", "sourdough starter") == []  # before the index is told
        await until(lambda: _indexed(server_db, 1))
        await listener.flush()

    counters, slices = await index_state(server_db)
    assert {row["core_id"] for row in slices} == {"other"} and {core for core, _, _ in counters} == {"other"}
    await assert_counters_derive_from_slices(server_db)


async def _indexed(database: Any, count: int) -> bool:
    return bool(await database["recall_index"].count_documents({"kind": "slice"}) == count)


# -- the round-trip claim ----------------------------------------------------------------------------------


async def build(database: Any, core_id: str, slices: int, commands: Commands) -> list[list[str]]:
    """``slices`` days at the orchard, each with a souvenir of its own: a unit each (appended directly, as an
    import would: a unit holding hundreds of slices makes every roll slower on SecantusDB, and rolling is not
    what this measures), delivered to the indexer; the commands each index write sent."""
    units, indexer = MemoryUnitRepository(database), RecallIndexer(database)
    writes = []
    for n in range(slices):
        day = datetime(2025, 1, 1, 9, 0, tzinfo=UTC) + timedelta(days=n)
        said = [
            Message(role="user", content=text, at=day + timedelta(minutes=minute))
            for minute, text in enumerate(("the orchard", f"souvenir{n}", "rain"))
        ]
        piece = await units.append(
            f"{core_id}-{n}", said, f"orchard souvenir{n}", core_id=core_id, created_at=day
        )
        commands.clear()
        await indexer.consume(RollingResult.from_slice(f"{core_id}-{n}", core_id, piece, said))
        writes.append(list(commands.sent))
    return writes


QUERIES = ("what did we buy at the orchard? souvenir7", "the orchard on 2025-01-08", "rain", "")


async def test_an_index_write_is_four_commands_whatever_the_history(watched: tuple[Any, Commands]) -> None:
    """The slice and its core, the core's recent slices, the ordered bulk, then the unit's erasure tombstone
    (the fence against an erasure that ran meanwhile: docs/protocol.md)."""
    database, commands = watched

    writes = await build(database, "large", 60, commands)

    assert writes[0] == ["find", "update", "find"]  # an empty core: no recent slices to read
    assert {tuple(sent) for sent in writes[1:]} == {("find", "aggregate", "update", "find")}


async def test_a_recall_sends_the_same_reads_and_its_replies_stay_flat_as_the_history_grows(
    watched: tuple[Any, Commands],
) -> None:
    """Every slice of both cores matches every query, so the small core already fills each channel's
    quota: what the large one adds is history, not matches."""
    database, commands = watched
    await build(database, "small", 10, commands)
    await build(database, "large", 100, commands)
    recall = MemoryRecall(database, clock=lambda: NOW)
    await recall.recall("small", "anything")  # the one MongoDB Search probe this MemoryRecall makes

    for query in QUERIES:
        sent: dict[str, list[str]] = {}
        replied: dict[str, list[int]] = {}
        for core_id in ("small", "large"):
            commands.clear()
            found = await recall.recall(core_id, query, limit=10, max_messages=40)
            assert len(found) == 10 and set(commands.sent) <= {"find", "aggregate"}, (core_id, query)
            sent[core_id], replied[core_id] = sorted(commands.sent), list(commands.reply_bytes)
        assert sent["small"] == sent["large"], query
        assert sum(replied["large"]) <= 2 * sum(replied["small"]), (query, replied)

    commands.clear()
    await recall.recall("large", QUERIES[0])
    probed_before = sorted(commands.sent)
    commands.clear()
    await MemoryRecall(database, search=False).recall("large", QUERIES[0])  # told: no probe, even the first
    assert sorted(commands.sent) == probed_before
