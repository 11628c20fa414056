"""Page walks are causally consistent on the wire: each page is read in a causally consistent session, and the
next page asks for ``readConcern: {afterClusterTime}`` at the ``operationTime`` the previous page's reply
carried (gossiping its ``$clusterTime``), even from another client, as a new CLI process would be.

Real Motor driver, scripted mockupdb servers: one that reports cluster times (a replica-set member), one with
sessions but no times (a standalone server), one without sessions.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from bson import Int64, Timestamp
from mockupdb import MockupDB, Request
from pymongo import ReadPreference

from partner_repo import SliceQueries
from tests.wire.wire_support import HELLO, cursor, motor_client, plain, receive, scripted_server

pytestmark = pytest.mark.wire

T0 = datetime(2024, 3, 1, 9, 0, tzinfo=UTC)
FIRST_READ = Timestamp(1_709_283_600, 7)
CLUSTER_TIME = {
    "clusterTime": Timestamp(1_709_283_600, 9),
    "signature": {"hash": b"\x5a" * 20, "keyId": Int64(7_300_000_000_000_000_001)},
}
WITH_SESSIONS = {**HELLO, "logicalSessionTimeoutMinutes": 30}


def ends_sessions(request: Request) -> bool:
    """Clients end their sessions when they close: answer that, it is not what these tests look at."""
    return bool(request.command_name == "endSessions" and request.ok())


@pytest.fixture(scope="module")
def member() -> Iterator[MockupDB]:
    with scripted_server(hello=WITH_SESSIONS, autoresponder=ends_sessions) as mock:
        yield mock


@pytest.fixture(scope="module")
def sessionless() -> Iterator[MockupDB]:
    with scripted_server(autoresponder=ends_sessions) as mock:
        yield mock


def three_slices() -> list[dict[str, Any]]:
    return [
        {
            "_id": "u",
            "core_id": "c",
            "slices": {
                "id": f"s{n}",
                "start_index": n,
                "end_index": n + 1,
                "summary": "x",
                "created_at": T0 - timedelta(minutes=n),
            },
        }
        for n in range(3)
    ]


def admin_queries(client: Any) -> SliceQueries:
    return SliceQueries(client.get_database("partner", read_preference=ReadPreference.SECONDARY_PREFERRED))


async def first_page(server: MockupDB, reply: dict[str, Any]) -> tuple[Request, str]:
    """Page one of unit ``u`` (two slices of three), answered with ``reply`` added to the cursor."""
    async with motor_client(server, quiet_for=0.05) as client:
        call = asyncio.create_task(admin_queries(client).find(unit_id="u", limit=2))
        request = await receive(server)
        request.replies({**cursor(*three_slices()), **reply})
        page = await call
    assert page.next_cursor is not None
    return request, page.next_cursor


async def second_page(server: MockupDB, after: str) -> Request:
    """Page two, from a client of its own (as the next ``partner-repo slices list --after`` would be)."""
    async with motor_client(server, quiet_for=0.05) as client:
        call = asyncio.create_task(admin_queries(client).find(unit_id="u", limit=2, after=after))
        request = await receive(server)
        request.replies(cursor(three_slices()[2]))
        page = await call
    assert [item.id for item in page.items] == ["s2"] and page.next_cursor is None
    return request


async def test_the_next_page_reads_after_the_cluster_time_of_the_page_before(member: MockupDB) -> None:
    first, after = await first_page(member, {"operationTime": FIRST_READ, "$clusterTime": CLUSTER_TIME})

    second = await second_page(member, after)

    assert "aggregate" in first.doc and "lsid" in first.doc and "readConcern" not in first.doc
    assert "aggregate" in second.doc and "lsid" in second.doc
    assert plain(second.doc["readConcern"]) == {"afterClusterTime": FIRST_READ}
    assert plain(second.doc["$clusterTime"]) == CLUSTER_TIME  # gossiped: any member accepts that time


async def test_a_server_reporting_no_cluster_time_pages_without_read_concern(member: MockupDB) -> None:
    _, after = await first_page(member, {})  # a standalone server: sessions, but no operationTime

    second = await second_page(member, after)

    assert "lsid" in second.doc and "readConcern" not in second.doc


async def test_a_server_without_sessions_pages_without_them(sessionless: MockupDB) -> None:
    first, after = await first_page(sessionless, {"operationTime": FIRST_READ})

    second = await second_page(sessionless, after)

    assert "lsid" not in first.doc and "lsid" not in second.doc and "readConcern" not in second.doc
