"""On a real server, leaving ``async with connect(uri)`` closes the client: the database stops working."""

from __future__ import annotations

import uuid

import pytest
from conftest import requires_mongodb
from pymongo.errors import InvalidOperation

from partner_repo import close_database, connect

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
