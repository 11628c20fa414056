"""``init_repository(database, create_indexes=False)``: services that leave the indexes to migrations."""

from __future__ import annotations

from partner_repo import MemoryUnitRepository, Message, in_memory_database, init_repository
from partner_repo.mongo import ALL_INDEXES


async def test_without_create_indexes_no_index_is_created() -> None:
    database = await init_repository(in_memory_database("no_indexes"), create_indexes=False)
    for collection in ALL_INDEXES:
        await database[collection].insert_one({"_id": "so the collection exists"})

    for collection in ALL_INDEXES:
        assert set(await database[collection].index_information()) == {"_id_"}, collection


async def test_without_create_indexes_the_repositories_still_work() -> None:
    database = await init_repository(in_memory_database("no_indexes"), create_indexes=False)
    units = MemoryUnitRepository(database)

    piece = await units.append("u", [Message(role="user", content="hi")], "greeting", core_id="c")

    assert await units.get_slice("u", piece.id or "") == piece


async def test_creating_indexes_twice_is_harmless() -> None:
    database = await init_repository(in_memory_database("twice"))

    await init_repository(database)

    for collection, models in ALL_INDEXES.items():
        assert {m.document["name"] for m in models} <= set(await database[collection].index_information())
