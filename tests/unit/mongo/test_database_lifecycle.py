"""``connect()``'s lifecycle: an async context manager that closes the client, a documented close, and what an
application registers in its own Beanie init."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from beanie import Document, init_beanie

import partner_repo.mongo._database
from partner_repo import (
    DOCUMENT_MODELS,
    MemoryCore,
    MemoryCoreRepository,
    close_database,
    connect,
    ensure_indexes,
    in_memory_database,
)
from partner_repo.mongo import ALL_INDEXES, driver


@pytest.fixture
def closed(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The in-memory clients closed during the test (mongomock's own close leaves nothing to see)."""
    calls: list[Any] = []

    def recording_database(db_name: str = "partner") -> Any:
        client = driver.in_memory_client(tz_aware=True)
        client.close = lambda: calls.append(client)  # either shape: close_database awaits only an awaitable
        return client[db_name]

    monkeypatch.setattr(partner_repo.mongo._database, "in_memory_database", recording_database)
    return calls


async def test_async_with_connect_gives_a_ready_database(closed: list[Any]) -> None:
    async with connect() as database:
        core = await MemoryCoreRepository(database).get_or_create("agent")

        assert core.id == "agent"
        assert "idle_pending" in await database["memory_cores"].index_information()


async def test_leaving_the_block_closes_the_client(closed: list[Any]) -> None:
    async with connect() as database:
        pass

    assert closed == [database.client]


async def test_leaving_the_block_by_an_exception_closes_the_client_too(closed: list[Any]) -> None:
    with pytest.raises(RuntimeError, match="app failed"):
        async with connect() as database:
            raise RuntimeError("app failed")

    assert closed == [database.client]


async def test_awaiting_connect_still_returns_the_database_and_close_database_closes_it(
    closed: list[Any],
) -> None:
    database = await connect()
    assert closed == []

    await close_database(database)

    assert closed == [database.client]


async def test_closing_twice_does_no_harm(closed: list[Any]) -> None:
    database = await connect()

    await close_database(database)
    await close_database(database)


class AppDocument(Document):
    """A document of the application, registered next to the library's."""

    title: str

    class Settings:
        name = "app_documents"


async def test_an_app_registers_the_library_documents_in_its_own_beanie_init() -> None:
    database = in_memory_database(f"app_{uuid.uuid4().hex[:8]}")

    await init_beanie(database=database, document_models=[*DOCUMENT_MODELS, AppDocument], skip_indexes=True)
    await ensure_indexes(database)

    await AppDocument(title="mine").insert()
    await MemoryCoreRepository(database).get_or_create("agent")
    assert await MemoryCore.find_one(MemoryCore.id == "agent") is not None
    for collection, indexes in ALL_INDEXES.items():
        names = set(await database[collection].index_information())
        assert {index.document["name"] for index in indexes} <= names, collection


async def test_ensure_indexes_twice_changes_nothing() -> None:
    database = in_memory_database(f"app_{uuid.uuid4().hex[:8]}")
    await ensure_indexes(database)
    before = {c: await database[c].index_information() for c in ALL_INDEXES}

    await ensure_indexes(database)

    assert {c: await database[c].index_information() for c in ALL_INDEXES} == before
