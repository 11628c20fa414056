"""What SliceQueries puts on the wire (real Motor driver, scripted mockupdb server): maxTimeMS on every
command, the index-friendly pipeline shape, and a ``$slice`` projection instead of the whole unit."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest
from mockupdb import MockupDB
from wire_support import cursor, motor_client, plain, receive, server_fixture

from partner_repo import SliceQueries

pytestmark = pytest.mark.wire

T0 = datetime(2024, 3, 1, 9, 0, tzinfo=UTC)


server = server_fixture()


@pytest.fixture
async def queries(server: MockupDB) -> AsyncIterator[SliceQueries]:
    async with motor_client(server, quiet_for=0.05) as client:
        yield SliceQueries(client["partner"], max_time_ms=2500)


async def test_find_sends_one_aggregate_matching_units_before_unwinding(
    server: MockupDB, queries: SliceQueries
) -> None:
    call = asyncio.create_task(queries.find(core_id="c", created_from=T0, text="a.b", limit=10))

    request = await receive(server)
    assert "aggregate" in request.doc and request.doc["maxTimeMS"] == 2500
    stages = [next(iter(stage)) for stage in request.doc["pipeline"]]
    assert stages == ["$match", "$project", "$unwind", "$match", "$sort", "$limit"]
    first = plain(request.doc["pipeline"][0]["$match"])
    assert first["core_id"] == "c"
    created = first["slices"]["$elemMatch"]["created_at"]
    assert created["$type"] == "date" and "$gte" in created
    assert plain(request.doc["pipeline"][1]["$project"]) == {"core_id": 1, "slices": 1}
    assert plain(request.doc["pipeline"][5]) == {"$limit": 11}
    request.replies(cursor())

    page = await call
    assert page.items == [] and page.next_cursor is None


async def test_get_reads_the_slice_then_only_its_messages(server: MockupDB, queries: SliceQueries) -> None:
    call = asyncio.create_task(queries.get("s2"))

    locate = await receive(server)
    assert plain(locate.doc["filter"]) == {"slices.id": "s2"} and locate.doc["maxTimeMS"] == 2500
    assert "conversation_messages" not in plain(locate.doc["projection"])
    locate.replies(
        cursor(
            {
                "_id": "u",
                "core_id": "c",
                "slices": [
                    {"id": "s2", "start_index": 40, "end_index": 42, "summary": "two", "created_at": T0}
                ],
            }
        )
    )

    fetch = await receive(server)
    assert plain(fetch.doc["filter"]) == {"_id": "u"} and fetch.doc["maxTimeMS"] == 2500
    assert plain(fetch.doc["projection"])["conversation_messages"] == {"$slice": [40, 2]}
    fetch.replies(
        cursor(
            {
                "_id": "u",
                "conversation_messages": [
                    {"role": "user", "content": "q"},
                    {"role": "assistant", "content": "a"},
                ],
            }
        )
    )

    detail = await call
    assert [m.content for m in detail.messages] == ["q", "a"] and detail.unit_id == "u"


async def test_count_and_stats_carry_max_time_ms(server: MockupDB, queries: SliceQueries) -> None:
    count = asyncio.create_task(queries.count(unit_id="u"))
    request = await receive(server)
    assert request.doc["maxTimeMS"] == 2500 and request.doc["pipeline"][-1] == {"$count": "slices"}
    request.replies(cursor({"slices": 3}))
    assert await count == 3

    stats = asyncio.create_task(queries.stats("c", now=T0))
    for _ in range(3):
        request = await receive(server)
        assert "aggregate" in request.doc and request.doc["maxTimeMS"] == 2500
        assert plain(request.doc["pipeline"][0]["$match"])["core_id"] == "c"
        request.replies(cursor())
    result = await stats
    assert result.units == 0 and len(result.slices_per_day) == 30
