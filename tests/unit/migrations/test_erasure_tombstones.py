"""The erasure-tombstones migration: TTL indexes that remove tombstones forward, exactly those backward."""

from __future__ import annotations

from typing import Any

from partner_repo import run_migrations
from partner_repo.mongo import CHECKPOINTS, UNITS
from tests.unit.migrations.support import ERASURE_TOMBSTONES, bound, fresh_database, load, shipped_from
from tests.unit.migrations.support import names as migration_names

MIGRATION = load(ERASURE_TOMBSTONES)
WEEK_S = 7 * 24 * 60 * 60


async def ttl_indexes(database: Any) -> dict[str, dict[str, Any]]:
    found = {}
    for collection in (UNITS, CHECKPOINTS):
        information = await database[collection].index_information()
        if "erased_ttl" in information:
            found[collection] = information["erased_ttl"]
    return found


async def test_forward_creates_a_ttl_index_on_erased_at_in_units_and_checkpoints() -> None:
    database = await fresh_database()

    run = await run_migrations(database, use_transaction=False)

    assert ERASURE_TOMBSTONES.name in run.ran
    indexes = await ttl_indexes(database)
    assert set(indexes) == {UNITS, CHECKPOINTS}
    for index in indexes.values():
        assert [name for name, _ in index["key"]] == ["erased_at"]
        assert index["expireAfterSeconds"] == WEEK_S


def test_the_ttl_indexes_hold_tombstones_only() -> None:
    """Partial on ``erased_at`` existing: no key for each unit or checkpoint (the declaration is checked;
    mongomock applies partial filters only in part, a server honours it)."""
    for index in MIGRATION.INDEXES.values():
        (model,) = index
        assert model.document["partialFilterExpression"] == {"erased_at": {"$exists": True}}


async def test_backward_drops_the_ttl_indexes_and_nothing_else() -> None:
    database = await fresh_database()
    await run_migrations(database, use_transaction=False)
    before = {c: set(await database[c].index_information()) for c in (UNITS, CHECKPOINTS)}

    reverted = shipped_from(ERASURE_TOMBSTONES)  # this migration and every later one
    run = await run_migrations(database, backward=True, distance=len(reverted), use_transaction=False)

    assert run.ran == migration_names(reverted)[::-1]
    assert await ttl_indexes(database) == {}
    later = {"unsummarized", "slice_ids"}  # the indexes of later migrations, reverted with them
    restored = {UNITS: {"slice_ids_unique"}, CHECKPOINTS: set()}  # what a later one replaced, back
    for collection, names in before.items():
        expected = (names - {"erased_ttl"} - later) | restored[collection]
        assert set(await database[collection].index_information()) == expected


async def test_dropping_ttl_indexes_that_are_already_gone_succeeds() -> None:
    database = await fresh_database()
    await database[UNITS].insert_one({"_id": "only so the collection exists", "core_id": "c"})
    migration = await bound(ERASURE_TOMBSTONES, database)

    await migration.drop_all()
    await migration.drop_all()

    assert await ttl_indexes(database) == {}
