"""The indexes ``init_repository`` creates for the foundation's queries."""

from __future__ import annotations

from typing import Any

import pytest

from partner_repo import in_memory_database, init_repository
from partner_repo.mongo import ALL_INDEXES, CORES, SHARD_KEYS, UNIT_INDEXES, UNITS, index_refusal

REQUIRED_UNIT_INDEXES = {
    "core_updated": [("core_id", 1), ("updated_at", -1)],
    "slice_ids": [("slice_ids", 1)],
    "slice_created": [("slices.created_at", 1), ("slices.id", 1)],
    "core_slice_created": [("core_id", 1), ("slices.created_at", 1), ("slices.id", 1)],
}


def keys(info: dict[str, Any]) -> list[tuple[str, int]]:
    return [(name, int(direction)) for name, direction in list(info["key"])]


async def test_init_repository_creates_the_unit_indexes(memory_db: Any) -> None:
    info = await memory_db[UNITS].index_information()

    for name, expected in REQUIRED_UNIT_INDEXES.items():
        assert keys(info[name]) == expected, name
    assert not any(info[name].get("unique") for name in REQUIRED_UNIT_INDEXES)


async def test_init_repository_creates_every_declared_index(memory_db: Any) -> None:
    for collection, models in ALL_INDEXES.items():
        info = await memory_db[collection].index_information()
        for model in models:
            document = model.document
            assert keys(info[document["name"]]) == list(document["key"].items())
    assert {UNITS, CORES} <= set(ALL_INDEXES)


@pytest.mark.parametrize("collection", sorted(SHARD_KEYS))
def test_no_index_of_a_shardable_collection_is_one_its_shard_key_forbids(collection: str) -> None:
    """A unique index the shard key does not prefix blocks ``shardCollection`` (docs/sharding.md)."""
    refused = [index_refusal(m.document, SHARD_KEYS[collection]) for m in ALL_INDEXES[collection]]

    assert refused == [None] * len(ALL_INDEXES[collection])


def test_the_slice_id_index_only_finds_units_and_is_not_unique() -> None:
    (model,) = [m.document for m in UNIT_INDEXES if m.document["name"] == "slice_ids"]
    assert "unique" not in model and "partialFilterExpression" not in model


async def test_init_repository_is_idempotent() -> None:
    database = in_memory_database("twice")
    await init_repository(database)
    first = await database[UNITS].index_information()
    await init_repository(database)
    assert await database[UNITS].index_information() == first


async def test_init_repository_can_leave_indexes_to_migrations() -> None:
    database = await init_repository(in_memory_database("no_indexes"), create_indexes=False)
    assert set(await database[UNITS].index_information()) <= {"_id_"}


@pytest.mark.parametrize("name", list(REQUIRED_UNIT_INDEXES))
def test_every_required_index_is_declared_once(name: str) -> None:
    assert [m.document["name"] for m in UNIT_INDEXES].count(name) == 1
