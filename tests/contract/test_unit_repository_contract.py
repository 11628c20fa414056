"""The repository contract every backend keeps: the embedded one always, a real MongoDB with MONGODB_URI.

Each test runs once per backend through the ``database`` fixture; the ``mongodb`` cases carry the
``integration`` marker and are skipped, with the reason shown, when no server is configured.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import bson
import pytest
from pymongo.errors import DuplicateKeyError

from partner_repo import (
    ConflictError,
    DuplicateSliceId,
    MemoryCoreRepository,
    MemorySlice,
    MemoryUnit,
    MemoryUnitRepository,
    Message,
    UnitTooLarge,
)

T0 = datetime(2024, 2, 1, 9, 0, tzinfo=UTC)


def turn(label: str, size: int = 2) -> list[Message]:
    return [Message(role="user" if i % 2 == 0 else "assistant", content=f"{label}/{i}") for i in range(size)]


@pytest.fixture
def units(database: Any) -> MemoryUnitRepository:
    return MemoryUnitRepository(database)


def assert_tiles(unit: MemoryUnit) -> None:
    """Slices (in start order) are disjoint, contiguous and cover every message exactly once."""
    position = 0
    for piece in sorted(unit.complete_slices(), key=lambda s: s.start_index or 0):
        assert piece.start_index == position
        position = piece.end_index or 0
    assert position == len(unit.conversation_messages)


async def test_appends_tile_the_unit_and_read_back(units: MemoryUnitRepository) -> None:
    pieces = [
        await units.append(
            "u", turn(f"t{i}", size=i + 1), f"turn {i}", core_id="c", created_at=T0 + timedelta(minutes=i)
        )
        for i in range(4)
    ]

    unit = await units.get("u")
    assert unit is not None
    assert unit.complete_slices() == pieces
    assert [(p.start_index, p.end_index) for p in pieces] == [(0, 1), (1, 3), (3, 6), (6, 10)]
    assert_tiles(unit)
    for i, piece in enumerate(pieces):
        assert piece.id is not None
        assert await units.get_slice("u", piece.id) == piece
        assert await units.slice_messages("u", piece.id) == turn(f"t{i}", size=i + 1)
    assert await units.tail_messages("u", 4) == turn("t3", size=4)
    assert unit.updated_at == T0 + timedelta(minutes=3) and unit.updated_at.tzinfo is UTC


async def test_concurrent_appends_tile_the_unit(units: MemoryUnitRepository) -> None:
    await asyncio.gather(*(units.append("u", turn(f"w{i}"), f"writer {i}", core_id="c") for i in range(20)))

    unit = await units.get("u")
    assert unit is not None and len(unit.slices) == 20
    assert_tiles(unit)
    for piece in unit.complete_slices():
        writer = piece.summary.split()[-1]
        assert unit.conversation_messages[piece.start_index or 0 : piece.end_index or 0] == turn(f"w{writer}")


async def test_a_slow_writers_slice_is_placed_in_time_order(units: MemoryUnitRepository) -> None:
    await units.append("u", turn("a"), "one", core_id="c", created_at=T0)
    await units.append("u", turn("c"), "three", core_id="c", created_at=T0 + timedelta(hours=2))
    late = await units.append("u", turn("b"), "two", core_id="c", created_at=T0 + timedelta(hours=1))

    unit = await units.get("u")
    assert unit is not None
    assert [s.summary for s in unit.complete_slices()] == ["one", "two", "three"]
    assert (late.start_index, late.end_index) == (4, 6)


async def test_an_append_retried_with_its_slice_id_lands_once(units: MemoryUnitRepository) -> None:
    first = await units.append("u", turn("x"), "s", core_id="c", slice_id="retry-me")
    again = await units.append("u", turn("x"), "s", core_id="c", slice_id="retry-me")

    assert again == first
    unit = await units.get("u")
    assert unit is not None and len(unit.conversation_messages) == 2 and len(unit.slices) == 1


async def test_a_slice_id_used_by_another_unit_is_refused(units: MemoryUnitRepository) -> None:
    await units.append("first", turn("a"), "s", core_id="c", slice_id="shared")

    with pytest.raises(DuplicateSliceId):
        await units.append("second", turn("b"), "s", core_id="c", slice_id="shared")
    with pytest.raises(DuplicateSliceId):
        await units.save(MemoryUnit(id="third", core_id="c", slices=[MemorySlice(id="shared")]))

    assert await units.get("second") is None and await units.get("third") is None


async def test_units_without_slices_do_not_collide_on_the_slice_index(database: Any) -> None:
    units = MemoryUnitRepository(database)
    for unit_id in ("empty-1", "empty-2", "empty-3"):
        await units.save(MemoryUnit(id=unit_id, core_id="c", conversation_messages=turn(unit_id)))
    await database["memory_units"].insert_many(
        [{"_id": "raw-1", "core_id": "c", "slices": []}, {"_id": "raw-2", "core_id": "c", "slices": []}]
    )
    assert await units.unit_ids("c") == {"empty-1", "empty-2", "empty-3", "raw-1", "raw-2"}


async def test_saving_a_stale_copy_is_a_conflict(units: MemoryUnitRepository) -> None:
    await units.append("u", turn("a"), "s", core_id="c")
    stale = await units.get("u")
    assert stale is not None
    await units.append("u", turn("b"), "s", core_id="c")
    stale.conversation_messages.clear()

    with pytest.raises(ConflictError):
        await units.save(stale)
    unit = await units.get("u")
    assert unit is not None and len(unit.conversation_messages) == 4


async def test_save_normalizes_and_versions(units: MemoryUnitRepository) -> None:
    saved = await units.save(
        MemoryUnit.model_validate(
            {
                "id": "u",
                "core_id": "c",
                "conversation_messages": turn("a", 3),
                "slices": [None, {"summary": "s", "start_index": -1, "end_index": 99}],
            }
        )
    )
    assert saved.version == 1
    assert saved.slices[0] is not None and (saved.slices[0].start_index, saved.slices[0].end_index) == (0, 3)
    loaded = await units.get("u")
    assert loaded == saved
    assert (await units.save(loaded)).version == 2


async def test_stored_derived_fields_match_the_document(database: Any, units: MemoryUnitRepository) -> None:
    for i in range(11):
        await units.append("u", turn(f"t{i}"), f"s{i}", core_id="c", created_at=T0 + timedelta(minutes=i))
    await units.append("u", turn("late"), "late", core_id="c", created_at=T0 - timedelta(days=1))

    raw = await database["memory_units"].find_one({"_id": "u"})
    assert raw["message_count"] == len(raw["conversation_messages"]) == 24
    assert raw["slice_count"] == len(raw["slices"]) == 12
    assert raw["size_bytes"] == len(bson.encode(raw))


async def test_a_unit_written_by_another_tool_is_completed_before_an_append(
    database: Any, units: MemoryUnitRepository
) -> None:
    await database["memory_units"].insert_one(
        {
            "_id": "legacy",
            "core_id": "c",
            "conversation_messages": [m.model_dump() for m in turn("old", 3)],
            "slices": [{"id": "old", "start_index": 0, "end_index": 3, "summary": "old", "created_at": T0}],
        }
    )
    piece = await units.append("legacy", turn("new"), "new", core_id="c", created_at=T0 + timedelta(hours=1))

    assert (piece.start_index, piece.end_index) == (3, 5)
    unit = await units.get("legacy")
    assert unit is not None and unit.conversation_messages == turn("old", 3) + turn("new")
    assert_tiles(unit)


async def test_an_oversized_write_is_refused(database: Any) -> None:
    units = MemoryUnitRepository(database, max_document_bytes=1_500)
    await units.append("u", turn("a"), "s", core_id="c")
    with pytest.raises(UnitTooLarge):
        await units.append("u", [Message(role="user", content="x" * 2_000)], "s", core_id="c")
    unit = await units.get("u")
    assert unit is not None and len(unit.conversation_messages) == 2


async def test_listing_and_deleting(units: MemoryUnitRepository) -> None:
    await units.append("b", turn("b"), "s", core_id="c", created_at=T0 + timedelta(days=1))
    await units.append("a", turn("a"), "s", core_id="c", created_at=T0)
    await units.append("z", turn("z"), "s", core_id="other", created_at=T0)

    assert [u.id for u in await units.list_units("c")] == ["a", "b"]
    assert await units.unit_ids("c") == {"a", "b"}
    assert await units.delete("a") is True and await units.delete("a") is False
    assert await units.unit_ids("c") == {"b"}


async def test_core_sessions(database: Any) -> None:
    cores = MemoryCoreRepository(database)
    created = await cores.get_or_create("agent", now=T0)
    assert await cores.session_id("agent") == created.memory_session_id

    fresh = await cores.refresh_session("agent", now=T0 + timedelta(hours=1))
    core = await cores.get("agent")
    assert core is not None
    assert core.memory_session_id == fresh != created.memory_session_id
    assert core.session_started_at == T0 + timedelta(hours=1) and core.session_started_at.tzinfo is UTC


async def test_concurrent_first_gets_of_new_cores_agree_on_one_session(database: Any) -> None:
    """Fifty new cores, each asked for by ten callers at once: every caller gets the one core made.

    Fifty rounds so that a server whose racing first upserts can lose (tests/emulator_gaps.py) shows it on
    every run, not once in a while."""
    cores = MemoryCoreRepository(database)
    for round_ in range(50):
        results = await asyncio.gather(*(cores.get_or_create(f"shared-{round_}") for _ in range(10)))
        assert len({core.memory_session_id for core in results}) == 1


# Slice ids are unique through their claims (slice_id_claims), not through a unique index on memory_units.


ONLY_MONGODB = pytest.mark.parametrize(
    "database", [pytest.param("mongodb", marks=pytest.mark.integration)], indirect=True
)
"""Run on the real-server case of the ``database`` fixture only."""


@ONLY_MONGODB
async def test_a_second_claim_of_one_slice_id_is_refused_by_the_server(database: Any) -> None:
    claims = database["slice_id_claims"]
    await claims.insert_one({"_id": "dup", "unit_id": "one"})
    with pytest.raises(DuplicateKeyError):
        await claims.insert_one({"_id": "dup", "unit_id": "two"})


@ONLY_MONGODB
async def test_units_holding_slices_without_an_id_do_not_collide(database: Any) -> None:
    """The 0.1.0 index (``slices.id``, partial on ``$exists``) gave each id-less slice a null key: on mongod
    the second of these inserts failed. No slice-id index is unique now."""
    collection = database["memory_units"]
    for unit_id in ("mixed-1", "mixed-2"):
        slices = [{"id": f"{unit_id}-s"}, {"summary": "no id yet"}]
        await collection.insert_one(
            {"_id": unit_id, "core_id": "c", "slices": slices, "slice_ids": [f"{unit_id}-s"]}
        )

    assert await collection.count_documents({"_id": {"$in": ["mixed-1", "mixed-2"]}}) == 2


@ONLY_MONGODB
async def test_the_server_reports_no_unique_index_on_memory_units_but_id(database: Any) -> None:
    info = await database["memory_units"].index_information()
    assert [name for name, index in info.items() if index.get("unique")] == []
    assert list(info["slice_ids"]["key"]) == [("slice_ids", 1)]


@ONLY_MONGODB
async def test_appends_racing_with_one_slice_id_into_units_store_it_once(database: Any) -> None:
    """Appends racing with one caller-chosen slice id into several units: one claim wins, the rest refused."""
    units = MemoryUnitRepository(database)
    outcomes = await asyncio.gather(
        *(units.append(f"unit-{i}", turn(str(i)), "s", core_id="c", slice_id="contended") for i in range(6)),
        return_exceptions=True,
    )
    assert sum(not isinstance(o, BaseException) for o in outcomes) == 1
    assert all(isinstance(o, DuplicateSliceId) for o in outcomes if isinstance(o, BaseException))
    assert await database["memory_units"].count_documents({"slice_ids": "contended"}) == 1
