"""The migrations on a real replica set (``MONGODB_URI``): without a transaction (the default) and in one,
forward and backward, next to live appends, with data the in-memory backend cannot index (several units under
the unique multikey slice-id index)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from partner_repo import (
    DuplicateSliceId,
    MemoryCoreRepository,
    MemoryUnit,
    MemoryUnitRepository,
    Message,
    RollingService,
    close_database,
    default_migrations_path,
    init_repository,
    migration_status,
    run_migrations,
)
from partner_repo.admin import normalization_violations
from partner_repo.mongo import ALL_INDEXES, CORES, UNITS, bson_size
from tests.conftest import real_database
from tests.unit.migrations.stored_0_3 import core_of_0_3, msgs, unit_of_0_3

pytestmark = pytest.mark.integration

T0 = datetime(2024, 5, 1, 9, 0, tzinfo=UTC)
NAMES = tuple(p.name for p in sorted(Path(default_migrations_path()).glob("[!_]*.py")))
(POSITIONS,) = (name for name in NAMES if name.endswith("_positions.py"))
FROM_POSITIONS = NAMES[NAMES.index(POSITIONS) :]


def as_0_3(stored: list[dict[str, object]]) -> list[dict[str, object]]:
    """Stored messages as 0.3 compared them: role and content (a 0.4 record also stores each one's time)."""
    return [{"role": m["role"], "content": m["content"]} for m in stored]


def legacy_unit(unit_id: str) -> dict[str, Any]:
    return {
        "_id": unit_id,
        "core_id": "core",
        "conversation_messages": [{"role": "user", "content": f"m{i}"} for i in range(4)],
        "slices": [None, {"summary": "no id", "start_index": -1, "end_index": 9, "created_at": T0}],
        "updated_at": T0 + timedelta(minutes=1),
    }


@pytest.fixture
async def raw_database() -> AsyncIterator[Any]:
    """A fresh database on the real server, documents registered, no indexes (the migrations create them)."""
    database = await real_database()
    await init_repository(database, create_indexes=False)
    try:
        yield database
    finally:
        await database.client.drop_database(database.name)
        await close_database(database)


def index_specs(information: dict[str, Any]) -> dict[str, tuple[Any, ...]]:
    return {
        name: (list(spec["key"]), spec.get("unique", False), spec.get("partialFilterExpression"))
        for name, spec in information.items()
    }


@pytest.mark.parametrize("use_transaction", [True, False], ids=["transaction", "no-transaction"])
async def test_forward_normalizes_every_legacy_unit_and_builds_every_index(
    raw_database: Any, use_transaction: bool
) -> None:
    await raw_database[UNITS].insert_many([legacy_unit(f"u{i}") for i in range(5)])

    run = await run_migrations(raw_database, use_transaction=use_transaction)

    assert run.ran == NAMES
    units = MemoryUnitRepository(raw_database)
    for i in range(5):
        unit = await units.get(f"u{i}")
        assert unit is not None
        assert [(s.start_index, s.end_index) for s in unit.complete_slices()] == [(0, 4)]
        assert unit.complete_slices()[0].id
    for collection, models in ALL_INDEXES.items():
        info = await raw_database[collection].index_information()
        assert {m.document["name"] for m in models} <= set(info), collection


async def test_migrated_indexes_match_what_init_repository_builds_option_for_option(
    raw_database: Any,
) -> None:
    initialized = raw_database.client[f"partner_repo_test_{uuid.uuid4().hex[:12]}"]
    await init_repository(initialized)
    try:
        await run_migrations(raw_database)

        for collection in ALL_INDEXES:
            migrated = index_specs(await raw_database[collection].index_information())
            expected = index_specs(await initialized[collection].index_information())
            assert migrated == expected, collection
    finally:
        await raw_database.client.drop_database(initialized.name)


async def test_backward_restores_the_units_and_drops_the_indexes(raw_database: Any) -> None:
    await raw_database[UNITS].insert_many([legacy_unit("a"), legacy_unit("b")])
    originals = [await raw_database[UNITS].find_one({"_id": i}) for i in ("a", "b")]
    await run_migrations(raw_database)

    run = await run_migrations(raw_database, backward=True, distance=0)

    assert run.ran == tuple(reversed(NAMES)) and run.after is None
    assert [await raw_database[UNITS].find_one({"_id": i}) for i in ("a", "b")] == originals
    assert set(await raw_database[UNITS].index_information()) == {"_id_"}
    assert (await migration_status(raw_database)).applied == ()


async def test_a_unit_appended_to_after_the_migration_survives_backward(raw_database: Any) -> None:
    await raw_database[UNITS].insert_one(legacy_unit("a"))
    await run_migrations(raw_database, distance=1)
    await MemoryUnitRepository(raw_database).append(
        "a", [Message(role="user", content="new")], "s", core_id="core"
    )
    written = await raw_database[UNITS].find_one({"_id": "a"})

    await run_migrations(raw_database, backward=True)

    assert await raw_database[UNITS].find_one({"_id": "a"}) == written


async def test_slice_ids_stay_unique_after_migrating_through_their_claims(raw_database: Any) -> None:
    await raw_database[UNITS].insert_many([legacy_unit("a"), legacy_unit("b")])
    await run_migrations(raw_database)
    taken = (await raw_database[UNITS].find_one({"_id": "a"}))["slices"][0]["id"]

    with pytest.raises(DuplicateSliceId, match="already used by unit 'a'"):  # the migration claimed it
        said = [Message(role="user", content="x")]
        await MemoryUnitRepository(raw_database).append("b", said, "s", core_id="core", slice_id=taken)
    assert "unique" not in (await raw_database[UNITS].index_information())["slice_ids"]


async def test_a_run_next_to_live_appends_completes_and_keeps_every_append(raw_database: Any) -> None:
    ids = [f"u{i:03d}" for i in range(300)]
    await raw_database[UNITS].insert_many([legacy_unit(unit_id) for unit_id in ids])
    units = MemoryUnitRepository(raw_database)
    appended = dict.fromkeys(ids, 0)
    migrating = True

    async def live_writer(offset: int) -> None:
        turn = 0
        while migrating or turn < 5:  # a few appends at least, even when the run is quick
            unit_id = ids[(offset + 37 * turn) % len(ids)]
            await units.append(
                unit_id, [Message(role="user", content=f"live {offset}.{turn}")], "live", core_id="core"
            )
            appended[unit_id] += 1
            turn += 1

    writers = [asyncio.create_task(live_writer(offset)) for offset in range(4)]
    try:
        run = await run_migrations(raw_database)
        during_the_run = sum(appended.values())
    finally:
        migrating = False
        await asyncio.gather(*writers)

    assert run.ran == NAMES and during_the_run > 0
    for unit_id in ids:
        document = await raw_database[UNITS].find_one({"_id": unit_id})
        assert len(document["conversation_messages"]) == 4 + appended[unit_id], unit_id
        assert document["message_count"] == len(document["conversation_messages"]), unit_id
        assert not normalization_violations(MemoryUnit.model_validate(document)), unit_id


def kept_six(session: str) -> dict[str, Any]:
    """The stored front a 0.3 trim recorded after a roll that kept 6 of its 36 messages as context."""
    return {"unit_id": session, "message_count": 36, "front": 6}


async def summarize(messages: list[Message]) -> str:
    return f"{len(messages)} messages"


@pytest.mark.parametrize("use_transaction", [True, False], ids=["transaction", "no-transaction"])
async def test_a_0_3_core_gets_its_positions_and_the_next_rolls_store_each_message_once(
    raw_database: Any, use_transaction: bool
) -> None:
    await run_migrations(raw_database, distance=NAMES.index(POSITIONS))
    await raw_database[UNITS].insert_one(unit_of_0_3("session", msgs(0, 36), core_id="core"))
    await raw_database[CORES].insert_one(
        core_of_0_3("session", msgs(30, 41), core_id="core", stored=kept_six("session"))
    )

    run = await run_migrations(raw_database, use_transaction=use_transaction)

    assert run.ran == FROM_POSITIONS
    core = await raw_database[CORES].find_one({"_id": "core"})
    unit = await raw_database[UNITS].find_one({"_id": "session"})
    assert core["window_start"] == 0 and "window_stored" not in core
    assert (unit["taken_until"], unit["taken_count"]) == (6, 36) and bson_size(unit) == unit["size_bytes"]
    service = RollingService(raw_database, summarize)
    await service.roll("core", now=T0 + timedelta(minutes=5))
    await MemoryCoreRepository(raw_database).record("core", msgs(41, 43))
    await service.roll("core", now=T0 + timedelta(minutes=6))
    unit = await raw_database[UNITS].find_one({"_id": "session"})
    assert as_0_3(unit["conversation_messages"]) == msgs(0, 43) and bson_size(unit) == unit["size_bytes"]


async def test_positions_backward_removes_every_mark_and_keeps_sizes_exact(raw_database: Any) -> None:
    await run_migrations(raw_database, distance=NAMES.index(POSITIONS))
    await raw_database[UNITS].insert_one(unit_of_0_3("session", msgs(0, 36), core_id="core"))
    await raw_database[CORES].insert_one(
        core_of_0_3("session", msgs(30, 41), core_id="core", stored=kept_six("session"))
    )
    await run_migrations(raw_database)
    await RollingService(raw_database, summarize).roll("core", now=T0 + timedelta(minutes=5))
    await raw_database[UNITS].insert_one(
        {"_id": "reserved", "erased_at": datetime.now(UTC), "taken_until": 3, "taken_count": 0}
    )  # the tombstone a 0.4 clear leaves for a unit not created yet

    run = await run_migrations(raw_database, backward=True, distance=len(FROM_POSITIONS))

    assert run.ran == tuple(reversed(FROM_POSITIONS))
    unit = await raw_database[UNITS].find_one({"_id": "session"})
    assert "taken_until" not in unit and "taken_count" not in unit and bson_size(unit) == unit["size_bytes"]
    assert as_0_3(unit["conversation_messages"]) == msgs(0, 41)
    assert await raw_database[UNITS].find_one({"_id": "reserved"}) is None


async def test_positions_next_to_live_turns_and_rolls_keep_every_message_once(raw_database: Any) -> None:
    await run_migrations(raw_database, distance=NAMES.index(POSITIONS))
    ids = [f"c{i:03d}" for i in range(60)]
    await raw_database[UNITS].insert_many([unit_of_0_3(f"s-{c}", msgs(0, 36), core_id=c) for c in ids])
    cores = [core_of_0_3(f"s-{c}", msgs(30, 41), core_id=c, stored=kept_six(f"s-{c}")) for c in ids]
    for core in cores[::2]:
        del core["window_stored"]  # half of them resolved by content, as a 0.2 roll left them
    await raw_database[CORES].insert_many(cores)
    service = RollingService(raw_database, summarize)
    recorded = dict.fromkeys(ids, 41)
    migrating = True

    async def live(offset: int) -> None:
        turn = 0
        while migrating or turn < 3:
            core_id = ids[(offset + 7 * turn) % len(ids)]
            end = recorded[core_id]
            recorded[core_id] = end + 2
            await MemoryCoreRepository(raw_database).record(core_id, msgs(end, end + 2))
            await service.roll(core_id, now=T0 + timedelta(minutes=5 + turn))
            turn += 1

    turns = [asyncio.create_task(live(offset)) for offset in range(4)]
    try:
        await run_migrations(raw_database)
        during_the_run = sum(recorded.values()) - 41 * len(ids)
    finally:
        migrating = False
        await asyncio.gather(*turns)

    assert during_the_run > 0
    for core_id in ids:
        await service.roll(core_id, now=T0 + timedelta(hours=1))
        unit = await raw_database[UNITS].find_one({"_id": f"s-{core_id}"})
        assert as_0_3(unit["conversation_messages"]) == msgs(0, recorded[core_id]), core_id
        assert bson_size(unit) == unit["size_bytes"], core_id
