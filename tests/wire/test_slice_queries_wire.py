"""What SliceQueries puts on the wire (real Motor driver, scripted mockupdb server): maxTimeMS on every
command, the index-friendly pipeline shape, and a ``$slice`` projection instead of the whole unit."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from mockupdb import MockupDB

from partner_repo import SliceQueries, to_utc_ms
from partner_repo.admin._windows import INITIAL_WIDTH
from tests.wire.wire_support import cursor, motor_client, plain, receive, server_fixture

pytestmark = pytest.mark.wire

T0 = datetime(2024, 3, 1, 9, 0, tzinfo=UTC)


server = server_fixture()


@pytest.fixture
async def queries(server: MockupDB) -> AsyncIterator[SliceQueries]:
    async with motor_client(server, quiet_for=0.05) as client:
        yield SliceQueries(client["partner"], max_time_ms=2500)


def unwound(count: int, newest: datetime) -> list[dict[str, Any]]:
    """``count`` unwound slices one minute apart, newest first, as the page aggregation returns them."""
    return [
        {
            "_id": "u",
            "core_id": "c",
            "slices": {
                "id": f"s{n:03d}",
                "start_index": 2 * n,
                "end_index": 2 * n + 2,
                "summary": "a.b",
                "created_at": newest - timedelta(minutes=n),
            },
        }
        for n in range(count)
    ]


async def test_a_first_page_asks_the_index_where_matching_slices_start(
    server: MockupDB, queries: SliceQueries
) -> None:
    call = asyncio.create_task(queries.find(core_id="c", created_from=T0, text="a.b", limit=10))

    anchor = await receive(server)
    assert anchor.doc["find"] == "memory_units" and anchor.doc["maxTimeMS"] == 2500
    assert plain(anchor.doc["sort"]) == {"slices.created_at": -1} and anchor.doc["limit"] == 1
    assert plain(anchor.doc["projection"]) == {"slices.created_at": 1}
    assert plain(anchor.doc["filter"]) == {"core_id": "c"}  # no slice condition: the index gives the order
    anchor.replies(cursor())

    everything = await receive(server)  # no unit in scope: one window, all time
    created = plain(everything.doc["pipeline"][0]["$match"])["slices"]["$elemMatch"]["created_at"]
    assert set(created) == {"$type", "$gte"} and to_utc_ms(created["$gte"]) == T0
    everything.replies(cursor())

    page = await call
    assert page.items == [] and page.next_cursor is None


async def test_a_page_aggregates_one_window_of_time_matching_units_before_unwinding(
    server: MockupDB, queries: SliceQueries
) -> None:
    newest = T0 + timedelta(days=2)
    call = asyncio.create_task(queries.find(core_id="c", created_from=T0, text="a.b", limit=10))
    anchor = await receive(server)
    anchor.replies(cursor({"_id": "u", "slices": [{"created_at": T0}, {"created_at": newest}]}))

    request = await receive(server)
    assert "aggregate" in request.doc and request.doc["maxTimeMS"] == 2500
    stages = [next(iter(stage)) for stage in request.doc["pipeline"]]
    assert stages == ["$match", "$project", "$unwind", "$addFields", "$match", "$sort", "$limit"]
    first = plain(request.doc["pipeline"][0]["$match"])
    assert first["core_id"] == "c"
    created = first["slices"]["$elemMatch"]["created_at"]
    assert (
        created["$type"] == "date"
        and to_utc_ms(created["$gte"]) == newest - INITIAL_WIDTH
        and "$lt" not in created
    )
    assert plain(request.doc["pipeline"][1]["$project"]) == {"core_id": 1, "slices": 1}
    sort = plain(request.doc["pipeline"][5]["$sort"])
    assert list(sort) == ["slices.created_at", "position", "start", "slices.id", "_id"]  # ties by position
    assert plain(request.doc["pipeline"][6]) == {"$limit": 11}
    request.replies(cursor(*unwound(11, newest)))

    page = await call
    assert [item.id for item in page.items] == [f"s{n:03d}" for n in range(10)]
    assert page.next_cursor is not None


async def test_a_window_too_sparse_for_the_page_is_followed_by_a_wider_one_where_it_ended(
    server: MockupDB, queries: SliceQueries
) -> None:
    newest = T0 + timedelta(days=30)
    call = asyncio.create_task(queries.find(core_id="c", created_from=T0, limit=10))
    anchor = await receive(server)
    anchor.replies(cursor({"_id": "u", "slices": [{"created_at": newest}]}))
    first = await receive(server)
    first.replies(cursor(*unwound(2, newest)))

    second = await receive(server)
    created = plain(second.doc["pipeline"][0]["$match"])["slices"]["$elemMatch"]["created_at"]
    assert to_utc_ms(created["$lt"]) == newest - INITIAL_WIDTH  # where the first window started
    assert (
        to_utc_ms(created["$gte"]) == newest - INITIAL_WIDTH - INITIAL_WIDTH * 9
    )  # 2 found, 9 more wanted: 9x wider
    assert plain(second.doc["pipeline"][6]) == {"$limit": 9}
    second.replies(cursor(*unwound(9, newest - timedelta(hours=2))))

    page = await call
    assert len(page.items) == 10 and page.next_cursor is not None


async def test_get_reads_the_slice_then_only_its_messages(server: MockupDB, queries: SliceQueries) -> None:
    call = asyncio.create_task(queries.get("s2"))

    locate = await receive(server)
    assert plain(locate.doc["filter"]) == {"slice_ids": "s2"} and locate.doc["maxTimeMS"] == 2500
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
