"""Page walks on a real server are causally consistent: each cursor carries the cluster time its page was read
at, the next page is sent with ``readConcern.afterClusterTime`` at that time, and the server serves it.

The walk itself is a contract of both backends (the embedded one has no sessions and reads plainly).
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from click.testing import CliRunner
from pymongo import ReadPreference, monitoring

from partner_repo import MemoryUnitRepository, Message, SliceQueries, init_repository
from partner_repo.admin._cursor import CursorCodec
from partner_repo.admin._filters import SliceFilter
from partner_repo.cli import main
from partner_repo.mongo import driver
from tests.conftest import requires_mongodb

T0 = datetime(2024, 5, 1, 9, 0, tzinfo=UTC)
SLICES = 7


class Aggregates(monitoring.CommandListener):
    """Every aggregate command the client sends."""

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []

    def started(self, event: monitoring.CommandStartedEvent) -> None:
        if event.command_name == "aggregate":
            self.sent.append(dict(event.command))

    def succeeded(self, event: monitoring.CommandSucceededEvent) -> None:
        pass

    def failed(self, event: monitoring.CommandFailedEvent) -> None:
        pass


async def seed(database: Any) -> None:
    units = MemoryUnitRepository(database)
    for n in range(SLICES):
        message = [Message(role="user", content=f"m{n}")]
        await units.append(f"u{n % 3}", message, f"s{n}", core_id="c", created_at=T0 + timedelta(minutes=n))


async def walk(queries: SliceQueries, limit: int) -> tuple[list[str], list[str]]:
    summaries, cursors, after = [], [], None
    while True:
        page = await queries.find(core_id="c", limit=limit, after=after)
        summaries += [item.summary for item in page.items]
        if page.next_cursor is None:
            return summaries, cursors
        cursors.append(after := page.next_cursor)


async def test_a_walk_on_the_admin_read_preference_returns_every_slice_once(database: Any) -> None:
    await seed(database)
    admin = database.client.get_database(database.name, read_preference=ReadPreference.SECONDARY_PREFERRED)

    summaries, cursors = await walk(SliceQueries(admin), limit=2)

    assert summaries == [f"s{n}" for n in reversed(range(SLICES))] and len(cursors) == 3


@pytest.fixture
async def watched() -> AsyncIterator[tuple[Any, Aggregates]]:
    """A database on the server through a client that records its aggregate commands."""
    aggregates = Aggregates()
    client: Any = driver.new_client(requires_mongodb(), tz_aware=True, event_listeners=[aggregates])
    database = client.get_database(
        f"partner_repo_test_{uuid.uuid4().hex[:12]}", read_preference=ReadPreference.SECONDARY_PREFERRED
    )
    await init_repository(database)
    try:
        yield database, aggregates
    finally:
        await client.drop_database(database.name)
        await driver.close_client(client)


@pytest.mark.integration
async def test_each_page_on_the_server_reads_after_the_cluster_time_of_the_page_before(
    watched: tuple[Any, Aggregates],
) -> None:
    database, aggregates = watched
    await seed(database)
    queries, codec = SliceQueries(database), CursorCodec(database.name)
    fingerprint = SliceFilter.of("c", None, None, None, None).fingerprint
    checked: list[tuple[Any, list[dict[str, Any]]]] = []  # (the cursor's time, the next page's aggregates)
    summaries, after, expected = [], None, None
    while True:
        first = len(aggregates.sent)
        page = await queries.find(core_id="c", limit=2, after=after)
        if expected is not None:
            checked.append((expected, aggregates.sent[first:]))
        summaries += [item.summary for item in page.items]
        if page.next_cursor is None:
            break
        read_at = codec.decode(page.next_cursor, fingerprint).read_at
        assert read_at is not None  # the server reported when the page was read
        expected, after = read_at.operation_time, page.next_cursor

    assert summaries == [f"s{n}" for n in reversed(range(SLICES))] and len(checked) == 3
    for moment, sent in checked:
        assert sent and all("lsid" in command for command in sent)
        assert sent[0]["readConcern"]["afterClusterTime"] == moment


async def on_server(uri: str, name: str, work: Callable[[Any], Awaitable[Any]]) -> None:
    client: Any = driver.new_client(uri, tz_aware=True)
    try:
        await work(client[name])
    finally:
        await driver.close_client(client)


async def seeded(database: Any) -> None:
    await init_repository(database)
    await seed(database)


async def dropped(database: Any) -> None:
    await database.client.drop_database(database.name)


@pytest.mark.integration
def test_the_cli_walks_every_page_on_the_server() -> None:
    uri, name = requires_mongodb(), f"partner_repo_test_{uuid.uuid4().hex[:12]}"
    asyncio.run(on_server(uri, name, seeded))
    try:
        arguments = [
            "--uri",
            uri,
            "--db",
            name,
            "slices",
            "list",
            "--all",
            "--json",
            "--core",
            "c",
            "--limit",
            "2",
        ]
        result = CliRunner().invoke(main, arguments, catch_exceptions=False)
    finally:
        asyncio.run(on_server(uri, name, dropped))

    assert result.exit_code == 0, result.output
    walked = [item["summary"] for item in json.loads(result.stdout)["items"]]
    assert walked == [f"s{n}" for n in reversed(range(SLICES))]
