"""The index migrations: together exactly the library's indexes forward, exactly those dropped backward."""

from __future__ import annotations

from typing import Any

from partner_repo import run_migrations
from partner_repo.mongo import ALL_INDEXES, UNITS
from tests.unit.migrations.support import (
    CLAIMS,
    ERASURE_INDEXES,
    ERASURE_TOMBSTONES,
    INDEXES,
    NORMALIZE,
    RECALL_INDEX,
    RECALL_INDEXES,
    RECALL_VECTORS,
    SLICE_INDEX,
    UNSUMMARIZED,
    bound,
    fresh_database,
    load,
    names,
    shipped_from,
)

MIGRATION = load(INDEXES)
SWAP = load(SLICE_INDEX)
ERASURE = load(ERASURE_INDEXES)
TOMBSTONES = load(ERASURE_TOMBSTONES)
SUMMARIES = load(UNSUMMARIZED)
CLAIMING = load(CLAIMS)
RECALL = load(RECALL_INDEXES)
MOVED = load(RECALL_INDEX)
VECTORS = load(RECALL_VECTORS)


def specs(indexes: dict[str, list[Any]]) -> dict[str, list[dict[str, Any]]]:
    return {collection: [model.document for model in models] for collection, models in indexes.items()}


async def index_names(database: Any) -> dict[str, set[str]]:
    return {
        collection: set(await database[collection].index_information())
        for collection in sorted(await database.list_collection_names())
        if collection in ALL_INDEXES
    }


def test_the_migrations_together_create_exactly_the_indexes_the_library_declares() -> None:
    """Drift alarm: ``partner_repo.mongo._indexes`` changed without a migration. Add a migration that creates
    the new index (and drops a removed one), then compose the index migrations here."""
    composed = specs(MIGRATION.INDEXES)
    swapped = [SWAP.NEW_INDEX.document if i == SWAP.OLD_INDEX.document else i for i in composed[UNITS]]
    composed[UNITS] = swapped
    for migration in (ERASURE, TOMBSTONES, RECALL):
        for collection, added in specs(migration.INDEXES).items():
            composed[collection] = composed.get(collection, []) + added
    composed[UNITS] = composed[UNITS] + [SUMMARIES.INDEX.document]
    lookup = CLAIMING.LOOKUP_INDEX.document
    composed[UNITS] = [lookup if i == CLAIMING.UNIQUE_INDEX.document else i for i in composed[UNITS]]
    composed["slice_id_claims"] = [CLAIMING.CLAIM_INDEX.document]
    for dropped in MOVED.OLD_INDEXES:  # 0.5 moves 0.4's two recall collections into one
        del composed[dropped]
    composed.update(specs(MOVED.INDEXES))
    composed["recall_index"] = [*composed["recall_index"], VECTORS.CORE_VECTORS.document]

    assert composed == specs(ALL_INDEXES)


async def test_migrating_forward_leaves_the_indexes_init_repository_creates() -> None:
    migrated = await fresh_database()
    initialized = await fresh_database(indexes=True)

    await run_migrations(migrated, use_transaction=False)

    assert await index_names(migrated) == await index_names(initialized)
    for collection in ALL_INDEXES:
        assert as_declared(await migrated[collection].index_information()) == as_declared(
            await initialized[collection].index_information()
        )


def as_declared(information: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Index information with keys as lists: mongomock reports the keys of a batch-created index as a view."""
    return {name: {**spec, "key": list(spec["key"])} for name, spec in information.items()}


async def test_backward_drops_the_migrations_indexes_and_nothing_else() -> None:
    database = await fresh_database()
    await run_migrations(database, use_transaction=False)
    await database[UNITS].create_index("custom_field", name="a_teams_own_index")

    reverted = shipped_from(INDEXES)  # every migration from this one on

    run = await run_migrations(database, backward=True, distance=len(reverted), use_transaction=False)

    assert run.ran == names(reverted)[::-1]
    assert set(await database[UNITS].index_information()) == {"_id_", "a_teams_own_index"}
    assert all(set(names) <= {"_id_"} for c, names in (await index_names(database)).items() if c != UNITS)


async def test_dropping_indexes_that_are_already_gone_succeeds() -> None:
    database = await fresh_database()
    await database[UNITS].insert_one({"_id": "only so the collection exists", "core_id": "c"})
    migration = await bound(INDEXES, database)

    await migration.drop_all()
    await migration.drop_all()

    assert set(await database[UNITS].index_information()) == {"_id_"}


async def test_indexes_come_after_normalization_so_every_slice_has_an_id_first() -> None:
    assert NORMALIZE.name < INDEXES.name
