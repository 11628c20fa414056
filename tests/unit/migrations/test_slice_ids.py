"""The slice-ids migration: 0.1.0 units gain exactly their ``slice_ids`` (and exact sizes), the unique index
moves to it, nothing else changes, a concurrent append is never overwritten, and Backward restores 0.1.0."""

from __future__ import annotations

from datetime import UTC, datetime
from functools import partial
from typing import Any

from partner_repo import MemoryUnitRepository, Message, UnitChecker, run_migrations
from partner_repo.mongo import UNITS, bson_size
from partner_repo.units import SliceIdClaims
from tests.unit.interference import InterruptedCollection
from tests.unit.migrations.support import SLICE_IDS, bound, fresh_database, load, names, shipped_from

T0 = datetime(2024, 5, 1, 9, 0, tzinfo=UTC)
MIGRATION = load(SLICE_IDS)


def unit_of_0_1(unit_id: str, slice_ids: list[str], *, version: int = 3) -> dict[str, Any]:
    """A unit as partner-repo 0.1.0 stored it: normalized, derived counts and size, no ``slice_ids``."""
    messages = [{"role": "user", "content": f"{unit_id} {i}"} for i in range(len(slice_ids))]
    slices = [
        {
            "id": s,
            "start_index": i,
            "end_index": i + 1,
            "summary": s,
            "created_at": T0,
            "rolling_size": None,
            "retain_divisor": None,
        }
        for i, s in enumerate(slice_ids)
    ]
    document: dict[str, Any] = {
        "_id": unit_id,
        "core_id": "c",
        "conversation_messages": messages,
        "slices": slices,
        "updated_at": T0,
        "previous_unit_id": None,
        "version": version,
        "message_count": len(messages),
        "slice_count": len(slices),
        "size_bytes": 0,
    }
    document["size_bytes"] = bson_size(document)
    return document


async def database_of_0_1(*units: dict[str, Any]) -> Any:
    """A database migrated as far as 0.1.0 went (its index included), holding ``units``."""
    database = await fresh_database()
    await run_migrations(database, distance=2)
    if units:
        await database[UNITS].insert_many(list(units))
    return database


async def stored(database: Any, unit_id: str) -> dict[str, Any]:
    document = await database[UNITS].find_one({"_id": unit_id})
    assert document is not None
    return dict(document)


async def test_forward_gives_every_unit_its_slice_ids_and_an_exact_size() -> None:
    database = await database_of_0_1(unit_of_0_1("a", ["a1", "a2"]), unit_of_0_1("b", []))

    run = await run_migrations(database)

    assert run.ran == names(shipped_from(SLICE_IDS))
    assert (await stored(database, "a"))["slice_ids"] == ["a1", "a2"]
    assert (await stored(database, "b"))["slice_ids"] == []
    assert (await UnitChecker(database).check()).ok  # derived fields exact, size included


async def test_forward_changes_nothing_a_unit_holds_and_keeps_its_version() -> None:
    before = unit_of_0_1("a", ["a1"])
    database = await database_of_0_1(before)

    await run_migrations(database)

    after = await stored(database, "a")
    assert {k: v for k, v in after.items() if k not in ("slice_ids", "size_bytes")} == {
        k: v for k, v in before.items() if k != "size_bytes"
    }


async def test_forward_moves_the_unique_index_to_slice_ids_and_on_to_slice_id_claims() -> None:
    database = await database_of_0_1(unit_of_0_1("a", ["a1", "a2"]))
    assert "slice_id_unique" in await database[UNITS].index_information()

    await run_migrations(database)

    information = await database[UNITS].index_information()
    assert "slice_id_unique" not in information and "slice_ids_unique" not in information
    assert "unique" not in information["slice_ids"]
    assert await SliceIdClaims(database).holders(["a1", "a2"]) == {"a1": "a", "a2": "a"}


async def test_a_rerun_writes_nothing() -> None:
    database = await database_of_0_1(unit_of_0_1("a", ["a1"]))
    migration = await bound(SLICE_IDS, database)
    await migration.fill_all(None)

    assert (await migration.fill_all(None))["written"] == 0


async def test_units_written_by_other_tools_are_left_for_the_library_to_adopt() -> None:
    foreign = {"_id": "foreign", "core_id": "c", "slices": [{"summary": "no id"}]}
    database = await database_of_0_1(foreign)

    await run_migrations(database)

    assert await stored(database, "foreign") == foreign


async def append_meanwhile(database: Any) -> None:
    """An append by the library, landing just before the migration's first guarded update."""
    await MemoryUnitRepository(database).append(
        "a", [Message(role="user", content="landed meanwhile")], "meanwhile", core_id="c"
    )


async def test_an_append_landing_during_the_migration_is_never_overwritten() -> None:
    database = await database_of_0_1(unit_of_0_1("a", ["a1"]))
    migration = await bound(SLICE_IDS, database)
    units = InterruptedCollection(database[UNITS], partial(append_meanwhile, database))

    await migration._write_one(units, await stored(database, "a"), None, forward=True)

    document = await stored(database, "a")
    assert units.interfered and document["message_count"] == 2
    assert sorted(document["slice_ids"]) == sorted(s["id"] for s in document["slices"])
    assert (await UnitChecker(database).check()).ok


async def test_backward_restores_the_layout_and_the_index_of_0_1() -> None:
    before = unit_of_0_1("a", ["a1", "a2"])
    database = await database_of_0_1(before)
    await run_migrations(database)

    run = await run_migrations(database, backward=True, distance=len(shipped_from(SLICE_IDS)))

    assert run.ran == names(shipped_from(SLICE_IDS))[::-1]
    assert await stored(database, "a") == before
    information = await database[UNITS].index_information()
    assert "slice_ids_unique" not in information and "slice_id_unique" in information
