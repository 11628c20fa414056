"""The listener reads what it delivers with ``readConcern: majority``, on the wire.

A change stream only ever returns majority-committed changes; the scanner (each polling pass, the catch-up
scan) and the loading of a delivery's messages must not be weaker, or a delivery could hand out a write that
a failover later rolls back. Here ``memory_units`` is the mock server's (the driver's real commands are
checked), and checkpoints and dead letters are in memory.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import pytest
from mockupdb import MockupDB

from partner_repo import (
    AfterRollingRegistry,
    MemoryUnitRepository,
    RollingListener,
    in_memory_database,
    init_repository,
)
from partner_repo.mongo import UNITS
from tests.conftest import until
from tests.unit.listener.support import Recorder
from tests.wire.wire_support import cursor, motor_client, receive, server_fixture

pytestmark = pytest.mark.wire

T0 = datetime(2024, 6, 1, 8, 0, tzinfo=UTC)
MAJORITY = {"level": "majority"}
SLICE = {"id": "s1", "start_index": 0, "end_index": 2, "summary": "two", "created_at": T0}
FINGERPRINT = {"version": 1, "message_count": 2, "slice_count": 1, "size_bytes": 300}

server = server_fixture(request_timeout=10)


class UnitsOnTheWire:
    """``memory_units`` on the mock server, everything else in memory."""

    def __init__(self, wire: Any, memory: Any) -> None:
        self._wire = wire
        self._memory = memory

    def __getitem__(self, name: str) -> Any:
        return self._wire[name] if name == UNITS else self._memory[name]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._memory, name)


@pytest.fixture
async def wire(server: MockupDB) -> AsyncIterator[Any]:
    async with motor_client(server, quiet_for=0.05) as client:
        yield client["partner"]


async def test_a_polling_pass_and_the_delivery_it_starts_read_with_majority_read_concern(
    server: MockupDB, wire: Any
) -> None:
    memory = await init_repository(in_memory_database("wire_majority"))
    recorder = Recorder()
    listener = RollingListener(
        UnitsOnTheWire(wire, memory), AfterRollingRegistry([recorder]), source="polling", poll_interval=60
    )
    await listener.start()

    probe = await receive(server, "aggregate")  # the totals probe
    assert probe.doc["readConcern"] == MAJORITY
    probe.replies(cursor({"_id": None, "units": 1, **FINGERPRINT}))
    scan = await receive(server, "find")  # every unit's fingerprint
    assert (scan.doc["readConcern"], scan.doc["hint"]) == (MAJORITY, "unit_fingerprint")
    scan.replies(cursor({"_id": "u1", **FINGERPRINT}))
    outline = await receive(server, "find")  # the changed unit's slices
    assert (outline.doc["filter"], outline.doc["readConcern"]) == ({"_id": "u1"}, MAJORITY)
    outline.replies(
        cursor({"_id": "u1", "core_id": "core", "slices": [SLICE], "slice_ids": ["s1"], **FINGERPRINT})
    )
    messages = await receive(server, "find")  # the slice's messages, for its result
    assert "conversation_messages" in messages.doc["projection"]
    assert messages.doc["readConcern"] == MAJORITY
    messages.replies(
        cursor(
            {
                "_id": "u1",
                "message_count": 2,
                "conversation_messages": [
                    {"role": "user", "content": "hi"},
                    {"role": "assistant", "content": "hello"},
                ],
            }
        )
    )
    await until(lambda: len(recorder.results) == 1)
    await listener.stop()

    (result,) = recorder.results
    assert (result.slice_id, [m.content for m in result.increment_messages]) == ("s1", ["hi", "hello"])


async def test_a_repository_without_majority_reads_sends_no_read_concern(server: MockupDB, wire: Any) -> None:
    units = MemoryUnitRepository(wire)
    pending = asyncio.ensure_future(units.fingerprint_totals())

    request = await receive(server, "aggregate")
    assert "readConcern" not in request.doc
    request.replies(cursor())
    assert await pending == (0, 0, 0, 0, 0)
