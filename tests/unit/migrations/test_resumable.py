"""The normalize-units migration next to live writers, without a transaction (the default): appends that land
meanwhile are kept, a unit that cannot be written now is left for the next run instead of stopping this one,
the migration is recorded as applied only once every unit is done, and a run that stopped half-way is
finished by running again, keeping what the first run did (Backward still restores every original)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pymongo.errors import AutoReconnect, WriteError

from partner_repo import (
    MemoryUnitRepository,
    Message,
    MigrationError,
    MigrationRun,
    migration_status,
    run_migrations,
)
from partner_repo.admin import normalization_violations
from partner_repo.models import MemoryUnit
from partner_repo.mongo import UNITS
from tests.conftest import YieldingDatabase
from tests.unit.interference import SwappedDatabase
from tests.unit.migrations.support import NORMALIZE, fresh_database

T0 = datetime(2024, 5, 1, 9, 0, tzinfo=UTC)
IDS = ("a", "b", "c", "d", "e")
Hook = Callable[[Any], Awaitable[None]]


def legacy_unit(unit_id: str) -> dict[str, Any]:
    """A unit another tool wrote: a null slice, one without an id, an interval past the messages."""
    return {
        "_id": unit_id,
        "core_id": "core",
        "conversation_messages": [{"role": "user", "content": f"{unit_id} {i}"} for i in range(3)],
        "slices": [None, {"summary": "no id", "start_index": -1, "end_index": 9, "created_at": T0}],
        "updated_at": T0 + timedelta(minutes=1),
    }


class GuardedWriteHook:
    """The units collection, running ``hook(unit_id)`` before each of the migration's guarded writes (an
    update whose filter names a ``version``): another writer getting in first, or the server failing it."""

    def __init__(self, collection: Any, hook: Hook) -> None:
        self._collection = collection
        self._hook = hook

    def __getattr__(self, name: str) -> Any:
        return getattr(self._collection, name)

    async def update_one(self, query: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        if "version" in query:
            await self._hook(query["_id"])
        return await self._collection.update_one(query, *args, **kwargs)


def hooked(database: Any, hook: Hook) -> SwappedDatabase:
    """``database``, running ``hook(unit_id)`` before each of the migration's guarded writes."""
    return SwappedDatabase(database, GuardedWriteHook(database[UNITS], hook))


async def normalize(database: Any) -> MigrationRun:
    """Only the normalization: the in-memory backend cannot build the unique multikey index over several
    units (the integration tests run the whole chain)."""
    return await run_migrations(database, distance=1)


async def legacy_database(*ids: str) -> Any:
    database = await fresh_database()
    await database[UNITS].insert_many([legacy_unit(unit_id) for unit_id in ids])
    return database


async def stored(database: Any, unit_id: str) -> dict[str, Any]:
    document = await database[UNITS].find_one({"_id": unit_id})
    assert document is not None
    return dict(document)


async def is_normalized(database: Any, unit_id: str) -> bool:
    document = await stored(database, unit_id)
    unit = MemoryUnit.model_validate(document)
    complete = document.get("message_count") == len(document["conversation_messages"])
    return complete and not normalization_violations(unit) and None not in document["slices"]


async def test_appends_that_land_while_it_runs_are_kept_and_the_run_completes() -> None:
    database = await legacy_database(*IDS)
    racy = YieldingDatabase(database)  # every call yields, so the appends interleave with the migration
    units = MemoryUnitRepository(racy)

    async def live_writer(unit_id: str) -> None:
        for turn in range(4):
            await units.append(
                unit_id, [Message(role="user", content=f"live {turn}")], f"s{turn}", core_id="core"
            )

    run, *_ = await asyncio.gather(normalize(racy), *(live_writer(unit_id) for unit_id in IDS))

    assert run.ran == (NORMALIZE.name,)
    for unit_id in IDS:
        contents = [m["content"] for m in (await stored(database, unit_id))["conversation_messages"]]
        assert contents == [f"{unit_id} {i}" for i in range(3)] + [f"live {turn}" for turn in range(4)]
        assert await is_normalized(database, unit_id), unit_id


async def test_a_unit_that_keeps_changing_is_left_for_the_next_run_and_the_others_are_normalized() -> None:
    database = await legacy_database(*IDS)

    async def old_tool_writes_c_first(unit_id: Any) -> None:  # a writer that never normalizes
        if unit_id == "c":
            await database[UNITS].update_one(
                {"_id": "c"},
                {
                    "$push": {"conversation_messages": {"role": "user", "content": "again"}},
                    "$inc": {"version": 1},
                },
            )

    with pytest.raises(MigrationError) as failure:
        await normalize(hooked(database, old_tool_writes_c_first))

    message = str(failure.value)
    assert NORMALIZE.name in message and "1 unit(s) left as stored: 'c'" in message
    assert "kept changing under concurrent writes" in message and "run partner-repo migrate again" in message
    assert [await is_normalized(database, unit_id) for unit_id in IDS] == [True, True, False, True, True]
    assert (await migration_status(database)).current is None  # not recorded: the next run does it again

    run = await normalize(database)

    assert run.ran == (NORMALIZE.name,)
    assert all([await is_normalized(database, unit_id) for unit_id in IDS])
    assert len((await stored(database, "c"))["conversation_messages"]) == 3 + 50


async def test_a_unit_the_server_refuses_to_write_is_named_with_the_reason_and_the_rest_is_done() -> None:
    database = await legacy_database(*IDS)

    async def refuse_b(unit_id: Any) -> None:
        if unit_id == "b":
            errmsg = "Resulting document after update is larger than 16777216"
            raise WriteError(errmsg, 17419, {"code": 17419, "errmsg": errmsg})

    with pytest.raises(
        MigrationError, match=r"'b' \(the server refused the write: .*16777216 \(code 17419\)\)"
    ):
        await normalize(hooked(database, refuse_b))

    assert [await is_normalized(database, unit_id) for unit_id in IDS] == [True, False, True, True, True]
    assert (await migration_status(database)).current is None


async def test_a_run_stopped_half_way_is_finished_by_running_again_and_backward_still_restores_all() -> None:
    database = await legacy_database(*IDS)
    originals = [await stored(database, unit_id) for unit_id in IDS]

    async def connection_lost_at_c(unit_id: Any) -> None:
        if unit_id == "c":
            raise AutoReconnect("connection reset by peer")

    with pytest.raises(
        MigrationError, match=r"connection to the server failed.*run partner-repo migrate again"
    ):
        await normalize(hooked(database, connection_lost_at_c))
    assert [await is_normalized(database, unit_id) for unit_id in IDS] == [True, True, False, False, False]
    first_run = {unit_id: await stored(database, unit_id) for unit_id in ("a", "b")}

    run = await normalize(database)

    assert run.ran == (NORMALIZE.name,)
    assert all([await is_normalized(database, unit_id) for unit_id in IDS])
    assert {unit_id: await stored(database, unit_id) for unit_id in ("a", "b")} == first_run  # not rewritten
    await run_migrations(database, backward=True)
    assert [await stored(database, unit_id) for unit_id in IDS] == originals
