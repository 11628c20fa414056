"""The indexes ``init_repository`` creates for the foundation's queries."""

from __future__ import annotations

from typing import Any

import pytest

from partner_repo import in_memory_database, init_repository
from partner_repo.indexes import ALL_INDEXES, CORES, UNIT_INDEXES, UNITS

REQUIRED_UNIT_INDEXES = {
    "core_updated": [("core_id", 1), ("updated_at", -1)],
    "slice_ids_unique": [("slice_ids", 1)],
    "slice_created": [("slices.created_at", 1), ("slices.id", 1)],
    "core_slice_created": [("core_id", 1), ("slices.created_at", 1), ("slices.id", 1)],
}


def keys(info: dict[str, Any]) -> list[tuple[str, int]]:
    return [(name, int(direction)) for name, direction in list(info["key"])]


async def test_init_repository_creates_the_unit_indexes(memory_db: Any) -> None:
    info = await memory_db[UNITS].index_information()

    for name, expected in REQUIRED_UNIT_INDEXES.items():
        assert keys(info[name]) == expected, name
    assert info["slice_ids_unique"].get("unique") is True
    assert not any(info[name].get("unique") for name in REQUIRED_UNIT_INDEXES if name != "slice_ids_unique")


async def test_init_repository_creates_every_declared_index(memory_db: Any) -> None:
    for collection, models in ALL_INDEXES.items():
        info = await memory_db[collection].index_information()
        for model in models:
            document = model.document
            assert keys(info[document["name"]]) == list(document["key"].items())
    assert {UNITS, CORES} <= set(ALL_INDEXES)


def test_the_slice_id_index_is_unique_and_partial_on_existing_ids() -> None:
    """Without the filter every unit with no slices would index a null key, and the second one would collide.

    mongomock drops ``partialFilterExpression`` from ``index_information``, so the declaration is checked
    here, the command sent to a server in the wire tests, and the server's behaviour in the contract tests.
    """
    (model,) = [m.document for m in UNIT_INDEXES if m.document["name"] == "slice_ids_unique"]
    assert model["unique"] is True
    assert model["partialFilterExpression"] == {"slice_ids": {"$type": "string"}}


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
