"""The chat window and the rolling lease on the wire: the Motor driver against a scripted mockupdb server.

These pin what mongomock cannot vouch for: ``record`` is one upsert with no read, the trim only drops the
front of the array under a version guard (and retries when the guard misses), and the lease is one
conditional ``findAndModify``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from mockupdb import MockupDB

from partner_repo import MemoryCoreRepository, Message, WindowTooLarge
from partner_repo.cores import CoreLease
from partner_repo.leases import LeaseState
from partner_repo.mongo import messages_bytes
from tests.wire.wire_support import motor_client, receive, server_fixture

pytestmark = pytest.mark.wire

T0 = datetime(2024, 3, 1, 10, 0, tzinfo=UTC)
NS = "partner.memory_cores"
HELLO = Message(role="user", content="hello")
HELLO_BYTES = messages_bytes([HELLO.model_dump()])


def window(size: int) -> list[dict[str, str]]:
    return [{"role": "user", "content": f"m{n}"} for n in range(size)]


server = server_fixture()


@pytest.fixture
async def cores(server: MockupDB) -> AsyncIterator[MemoryCoreRepository]:
    async with motor_client(server, quiet_for=0.1) as client:
        yield MemoryCoreRepository(client["partner"])


def core_document(**fields: Any) -> dict[str, Any]:
    return {"_id": "agent", "memory_session_id": "s1", "session_started_at": T0, **fields}


async def test_record_is_one_update_that_pushes_stamps_counts_and_answers_without_the_window(
    server: MockupDB, cores: MemoryCoreRepository
) -> None:
    pending = asyncio.ensure_future(cores.record("agent", [HELLO], at=T0))

    request = await receive(server)
    assert request.command_name == "findAndModify"
    assert request.doc["query"] == {"_id": "agent", "window_size": {"$type": "number"}}
    assert not request.doc.get("upsert")
    assert request.doc["fields"] == {"chat_messages": 0, "last_unit_id": 0, "last_unit_version": 0}
    update = request.doc["update"]
    stamp = T0.replace(tzinfo=None)  # the message carries the turn's time as its own
    assert update["$push"] == {
        "chat_messages": {"$each": [{"role": "user", "content": "hello", "at": stamp}]}
    }
    assert update["$set"] == {"last_interaction_at": stamp, "idle_rolled": False}
    assert update["$inc"] == {
        "version": 1,
        "window_size": 1,
        "window_bytes": messages_bytes([{"role": "user", "content": "hello", "at": stamp}]),
    }
    assert "$setOnInsert" not in update  # a new core's fields travel only when there is no core
    request.ok(
        value=core_document(window_size=1, window_bytes=HELLO_BYTES, last_interaction_at=T0, version=1)
    )

    recorded = await pending
    assert recorded.window_size == 1 and recorded.memory_session_id == "s1"


async def test_the_first_record_of_a_core_inserts_it_whole_with_a_fresh_session(
    server: MockupDB, cores: MemoryCoreRepository
) -> None:
    """Not a findAndModify upsert: an update that matches nothing, a look for a core without its count, then
    the core inserted whole (every answer of these says what happened)."""
    pending = asyncio.ensure_future(cores.record("agent", [HELLO], at=T0))

    update = await receive(server)
    assert update.command_name == "findAndModify" and not update.doc.get("upsert")
    assert update.doc["query"] == {"_id": "agent", "window_size": {"$type": "number"}}
    update.ok(value=None)  # no core yet
    look = await receive(server)
    assert look.command_name == "find" and look.doc["filter"] == {"_id": "agent"}
    look.ok(cursor={"id": 0, "firstBatch": [], "ns": NS})
    insert = await receive(server)
    assert insert.command_name == "insert"
    [core] = insert.doc["documents"]
    assert core["_id"] == "agent" and core["memory_session_id"] and core["window_size"] == 1
    assert [message["content"] for message in core["chat_messages"]] == [HELLO.content]
    assert core["window_bytes"] == messages_bytes([HELLO.model_dump() | {"at": T0}])
    insert.ok(n=1)

    assert (await pending).window_size == 1


async def test_a_first_record_that_loses_the_race_to_create_the_core_records_into_it(
    server: MockupDB, cores: MemoryCoreRepository
) -> None:
    pending = asyncio.ensure_future(cores.record("agent", [HELLO], at=T0))

    (await receive(server)).ok(value=None)
    (await receive(server)).ok(cursor={"id": 0, "firstBatch": [], "ns": NS})
    insert = await receive(server)
    insert.command_err(code=11000, errmsg="E11000 duplicate key error collection: partner.memory_cores")
    again = await receive(server)
    assert again.command_name == "findAndModify" and not again.doc.get("upsert")
    again.ok(value=core_document(window_size=2, version=2))

    assert (await pending).window_size == 2


async def test_record_counts_a_core_written_before_the_window_count_once_then_records(
    server: MockupDB, cores: MemoryCoreRepository
) -> None:
    pending = asyncio.ensure_future(cores.record("agent", [HELLO], at=T0))

    (await receive(server)).ok(value=None)  # the core has no count: the update matches nothing
    count = await receive(server)
    assert count.command_name == "find"
    assert count.doc["projection"] == {"chat_messages": 1, "window_size": 1, "window_bytes": 1}
    count.ok(cursor={"id": 0, "firstBatch": [core_document(chat_messages=window(3))], "ns": NS})
    store = await receive(server)
    [statement] = store.doc["updates"]
    assert statement["q"] == {
        "_id": "agent",
        "chat_messages": {"$size": 3},
        "window_size": {"$exists": False},
        "window_bytes": {"$exists": False},
    }
    assert statement["u"] == {"$set": {"window_size": 3, "window_bytes": messages_bytes(window(3))}}
    store.ok(n=1, nModified=1)
    again = await receive(server)
    assert again.command_name == "findAndModify" and again.doc["update"]["$inc"]["window_size"] == 1
    again.ok(value=core_document(window_size=4, version=1))

    assert (await pending).window_size == 4


async def test_a_roller_trims_moves_the_window_start_and_releases_its_lease_in_one_write(
    server: MockupDB, cores: MemoryCoreRepository
) -> None:
    pending = asyncio.ensure_future(
        cores.trim_window(
            "agent", 12, 6, lease_owner="me", window_size=12, release=True, message_bytes=[30] * 12
        )
    )

    write = await receive(server)
    assert write.command_name == "update"
    [statement] = write.doc["updates"]
    assert statement["q"] == {"_id": "agent", "lease_owner": "me", "chat_messages": {"$size": 12}}
    assert statement["u"] == {
        "$set": {"lease_owner": None, "window_size": 2, "window_bytes": 60},
        "$inc": {"lease_beat": 1, "version": 1, "window_start": 10},  # each kept message keeps its position
        "$push": {"chat_messages": {"$each": [], "$slice": -2}},
    }
    write.ok(n=1, nModified=1)

    assert await pending == 10


async def test_a_trim_drops_the_front_under_a_version_guard_and_retries_when_it_misses(
    server: MockupDB, cores: MemoryCoreRepository
) -> None:
    pending = asyncio.ensure_future(cores.trim_window("agent", 12, 6))

    read = await receive(server)
    assert read.command_name == "find"
    read.ok(cursor={"id": 0, "firstBatch": [core_document(chat_messages=window(12), version=7)], "ns": NS})
    write = await receive(server)
    assert write.command_name == "update"
    [statement] = write.doc["updates"]
    assert statement["q"] == {"_id": "agent", "version": 7}
    assert statement["u"] == {
        "$set": {"window_size": 2, "window_bytes": messages_bytes(window(12)[10:])},
        "$inc": {"version": 1, "window_start": 10},
        "$push": {"chat_messages": {"$each": [], "$slice": -2}},
    }
    write.ok(n=0, nModified=0)  # a record landed in between

    read_again = await receive(server)
    read_again.ok(
        cursor={"id": 0, "firstBatch": [core_document(chat_messages=window(13), version=8)], "ns": NS}
    )
    retry = await receive(server)
    [statement] = retry.doc["updates"]
    assert statement["q"] == {"_id": "agent", "version": 8}
    assert statement["u"]["$push"]["chat_messages"]["$slice"] == -3  # the late message is kept
    retry.ok(n=1, nModified=1)

    assert await pending == 10


async def test_acquiring_the_lease_is_one_conditional_find_and_modify_with_no_time_in_it(
    server: MockupDB, cores: MemoryCoreRepository
) -> None:
    lease = CoreLease(cores._database)
    pending = asyncio.ensure_future(lease.acquire("agent", "me", duration=timedelta(minutes=1)))

    request = await receive(server)
    assert request.command_name == "findAndModify"
    assert request.doc["query"] == {"_id": "agent", "$or": [{"lease_owner": None}]}
    assert request.doc["update"]["$set"] == {"lease_owner": "me", "lease_ttl_ms": 60_000}
    assert request.doc["update"]["$inc"] == {"lease_beat": 1, "version": 1}
    assert not request.doc.get("upsert")
    request.ok(value=None)

    assert await pending is None


async def test_taking_over_a_silent_lease_compares_and_sets_exactly_the_holder_and_beat_watched(
    server: MockupDB, cores: MemoryCoreRepository
) -> None:
    lease = CoreLease(cores._database)
    watched = LeaseState(holder="crashed", beat=41, ttl_s=60.0)
    pending = asyncio.ensure_future(
        lease.acquire("agent", "me", duration=timedelta(minutes=1), silent=watched)
    )

    request = await receive(server)
    assert request.doc["query"] == {
        "_id": "agent",
        "$or": [{"lease_owner": None}, {"lease_owner": "crashed", "lease_beat": 41}],
    }
    request.ok(value=None)

    assert await pending is None


async def test_a_window_the_server_cannot_grow_is_a_clear_error_and_nothing_is_recorded(
    server: MockupDB, cores: MemoryCoreRepository
) -> None:
    pending = asyncio.ensure_future(cores.record("agent", [Message(role="user", content="one more")]))

    request = await receive(server)
    assert request.command_name == "findAndModify"
    request.command_err(code=17419, errmsg="Resulting document after update is larger than 16777216")

    with pytest.raises(WindowTooLarge, match="roll the window"):
        await pending
