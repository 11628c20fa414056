"""On a real server, leaving ``async with connect(uri)`` closes the client: the database stops working."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from pymongo import AsyncMongoClient
from pymongo.errors import InvalidOperation

from partner_repo import Message, RollingService, close_database, connect
from partner_repo.mongo import driver
from tests.conftest import requires_mongodb

pytestmark = pytest.mark.integration


async def test_leaving_the_block_closes_the_connection() -> None:
    async with connect(requires_mongodb(), f"partner_repo_test_{uuid.uuid4().hex[:12]}") as database:
        assert (await database.command("ping"))["ok"] == 1
        await database.client.drop_database(database.name)

    with pytest.raises(InvalidOperation):
        await database.command("ping")


async def test_close_database_closes_an_awaited_connection() -> None:
    database = await connect(requires_mongodb(), f"partner_repo_test_{uuid.uuid4().hex[:12]}")
    await database.client.drop_database(database.name)

    await close_database(database)

    with pytest.raises(InvalidOperation):
        await database.command("ping")


def _application_clients() -> list[str]:
    """The client kinds an application on this stack can hand over: PyMongo's async client always, Motor's
    where Beanie 1 is installed (Beanie 2 cannot bind to Motor: connect() refuses it, see the unit tests)."""
    return ["pymongo", "motor"] if driver.STACK == "motor" else ["pymongo"]


@pytest.mark.parametrize("kind", _application_clients())
async def test_an_application_client_is_used_as_given_and_left_open(kind: str) -> None:
    uri = requires_mongodb()
    if kind == "motor":
        from motor.motor_asyncio import AsyncIOMotorClient  # the Motor stack's own tests may name it

        client: Any = AsyncIOMotorClient(uri, tz_aware=True)
    else:
        client = AsyncMongoClient(uri, tz_aware=True)
    name = f"partner_repo_test_{uuid.uuid4().hex[:12]}"
    try:
        async with connect(client, name) as database:
            rolling = RollingService(database, lambda messages: "summary")
            for n in range(40):
                await rolling.record_and_roll("agent", [Message(role="user", content=f"m{n}")])

        assert await client[name]["memory_units"].count_documents({}) == 1  # the client is still open
        await client.drop_database(name)
    finally:
        await driver.close_client(client)
