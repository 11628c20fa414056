"""The unit reads the rolling listener polls with, on the wire: what the driver sends for each.

mongomock ignores ``hint``; here the Motor driver talks to a scripted mockupdb server, so the commands can be
pinned: the fingerprint scan and the totals probe name the ``unit_fingerprint`` index (so a server answers
them from the index alone), and both fall back to an unhinted read when that index does not exist.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from mockupdb import MockupDB

from partner_repo import MemoryUnitRepository
from tests.wire.wire_support import UNITS_NS as NS
from tests.wire.wire_support import motor_client, receive, server_fixture

pytestmark = pytest.mark.wire

FINGERPRINT = {"_id": 1, "version": 1, "message_count": 1, "slice_count": 1, "size_bytes": 1}
NO_SUCH_INDEX = {
    "ok": 0,
    "code": 2,
    "codeName": "BadValue",
    "errmsg": "hint provided does not correspond to an existing index",
}


server = server_fixture()


@pytest.fixture
async def units(server: MockupDB) -> AsyncIterator[MemoryUnitRepository]:
    async with motor_client(server, quiet_for=0.05) as client:
        yield MemoryUnitRepository(client["partner"])


async def collect(units: MemoryUnitRepository) -> list[tuple[str, tuple[Any, ...]]]:
    return [pair async for pair in units.fingerprints()]


async def test_the_fingerprint_scan_is_hinted_to_the_fingerprint_index_in_id_order(
    server: MockupDB, units: MemoryUnitRepository
) -> None:
    pending = asyncio.ensure_future(collect(units))

    request = await receive(server)
    assert request.command_name == "find"
    assert (request.doc["filter"], request.doc["sort"], request.doc["hint"]) == (
        {},
        {"_id": 1},
        "unit_fingerprint",
    )
    assert request.doc["projection"] == FINGERPRINT
    request.replies(
        {
            "cursor": {
                "id": 0,
                "ns": NS,
                "firstBatch": [
                    {"_id": "a", "version": 3, "message_count": 6, "slice_count": 3, "size_bytes": 900},
                    {"_id": "b"},
                ],
            }
        }
    )

    assert await pending == [("a", (3, 6, 3, 900)), ("b", (None, None, None, None))]


async def test_without_the_fingerprint_index_the_scan_reads_without_a_hint(
    server: MockupDB, units: MemoryUnitRepository
) -> None:
    pending = asyncio.ensure_future(collect(units))

    (await receive(server)).replies(NO_SUCH_INDEX)
    retry = await receive(server)
    assert retry.command_name == "find" and "hint" not in retry.doc
    retry.replies({"cursor": {"id": 0, "ns": NS, "firstBatch": [{"_id": "a", "version": 1}]}})

    assert await pending == [("a", (1, None, None, None))]


async def test_the_totals_probe_is_one_hinted_group(server: MockupDB, units: MemoryUnitRepository) -> None:
    pending = asyncio.ensure_future(units.fingerprint_totals())

    request = await receive(server)
    assert request.command_name == "aggregate" and request.doc["hint"] == "unit_fingerprint"
    (stage,) = request.doc["pipeline"]
    assert stage["$group"]["_id"] is None and stage["$group"]["version"] == {"$sum": "$version"}
    request.replies(
        {
            "cursor": {
                "id": 0,
                "ns": NS,
                "firstBatch": [
                    {
                        "_id": None,
                        "units": 2,
                        "version": 4,
                        "message_count": 10,
                        "slice_count": 5,
                        "size_bytes": 2000,
                    }
                ],
            }
        }
    )

    assert await pending == (2, 4, 10, 5, 2000)


async def test_the_totals_probe_falls_back_too_and_counts_zero_on_an_empty_collection(
    server: MockupDB, units: MemoryUnitRepository
) -> None:
    pending = asyncio.ensure_future(units.fingerprint_totals())

    (await receive(server)).replies(NO_SUCH_INDEX)
    retry = await receive(server)
    assert retry.command_name == "aggregate" and "hint" not in retry.doc
    retry.replies({"cursor": {"id": 0, "ns": NS, "firstBatch": []}})

    assert await pending == (0, 0, 0, 0, 0)
