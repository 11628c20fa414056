"""The migration that replaces the unique slice-id index with slice-id claims (docs/sharding.md)."""

from __future__ import annotations

from typing import Any

import pytest

from partner_repo import MigrationError, run_migrations
from partner_repo.mongo import SLICE_ID_CLAIMS, UNITS, Topology
from partner_repo.units import SliceIdClaims
from tests.unit.migrations.support import CLAIMS, bound, fresh_database, names, shipped_before, shipped_from


async def database_before_claims(*units: dict[str, Any]) -> Any:
    """A database at the migration just before this one (the unique index in place), holding ``units``."""
    database = await fresh_database()
    await run_migrations(database, distance=len(shipped_before(CLAIMS)))
    for unit in units:
        await database[UNITS].insert_one(unit)
    return database


def unit(unit_id: str, *slice_ids: str) -> dict[str, Any]:
    slices = [{"id": slice_id, "summary": "s"} for slice_id in slice_ids]
    return {"_id": unit_id, "core_id": "c", "slices": slices, "slice_ids": list(slice_ids), "version": 1}


async def test_forward_claims_every_slice_id_each_unit_holds_for_that_unit() -> None:
    database = await database_before_claims(unit("a", "a1", "a2"), unit("b", "b1"), unit("empty"))

    await run_migrations(database)

    held = await SliceIdClaims(database).holders(["a1", "a2", "b1"])
    assert held == {"a1": "a", "a2": "a", "b1": "b"}
    assert await database[SLICE_ID_CLAIMS].count_documents({}) == 3


async def test_forward_replaces_the_unique_index_with_one_that_only_finds_units() -> None:
    database = await database_before_claims()
    assert (await database[UNITS].index_information())["slice_ids_unique"]["unique"] is True

    await run_migrations(database)

    information = await database[UNITS].index_information()
    assert "slice_ids_unique" not in information and "unique" not in information["slice_ids"]
    assert "unit" in await database[SLICE_ID_CLAIMS].index_information()


async def test_a_rerun_of_the_forward_step_adds_no_claim_and_keeps_the_indexes() -> None:
    database = await database_before_claims(unit("a", "a1"))
    await run_migrations(database)
    claims_before = [d async for d in database[SLICE_ID_CLAIMS].find({})]
    indexes_before = await database[UNITS].index_information()
    migration = await bound(CLAIMS, database)

    await migration.Forward.claim_slice_ids_and_drop_the_unique_index.function(None, None)

    assert await migration.claim_every_held_id() == 0
    assert [d async for d in database[SLICE_ID_CLAIMS].find({})] == claims_before
    assert await database[UNITS].index_information() == indexes_before


async def test_an_id_two_units_hold_is_claimed_by_the_unit_first_in_id_order() -> None:
    database = await database_before_claims()
    await database[UNITS].drop_index("slice_ids_unique")  # only data the index never saw can share an id
    await database[UNITS].insert_many([unit("z", "shared"), unit("m", "shared")])

    await run_migrations(database)

    assert await SliceIdClaims(database).holders(["shared"]) == {"shared": "m"}


async def test_backward_restores_the_unique_index_and_drops_the_claims() -> None:
    database = await database_before_claims(unit("a", "a1"))
    await run_migrations(database)

    run = await run_migrations(database, backward=True, distance=len(shipped_from(CLAIMS)))

    assert run.ran == names(shipped_from(CLAIMS))[::-1]
    assert (await database[UNITS].index_information())["slice_ids_unique"]["unique"] is True
    assert SLICE_ID_CLAIMS not in await database.list_collection_names()


async def test_backward_is_refused_while_memory_units_is_sharded(monkeypatch: pytest.MonkeyPatch) -> None:
    database = await database_before_claims(unit("a", "a1"))
    await run_migrations(database)

    async def sharded(_: Any) -> Topology:
        return Topology(mongos=True, shard_keys={UNITS: {"_id": "hashed"}})

    monkeypatch.setattr("partner_repo.mongo.topology_of", sharded)  # what the migration imports
    with pytest.raises(MigrationError, match="memory_units is sharded"):
        await run_migrations(database, backward=True, distance=len(shipped_from(CLAIMS)))

    assert "slice_ids_unique" not in await database[UNITS].index_information()
    assert await SliceIdClaims(database).holders(["a1"]) == {"a1": "a"}
