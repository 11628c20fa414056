"""Issue 21: one driver adapter. Every call whose shape differs between Motor and PyMongo's async API goes
through ``partner_repo.mongo._driver``; the library follows the Beanie that is installed; the in-memory
backend has the installed stack's shape; ``connect()`` takes an application's own client or database."""

from __future__ import annotations

import importlib.metadata
import re
from pathlib import Path
from typing import Any

import pytest
from pymongo import DeleteMany, InsertOne, UpdateOne
from pymongo.errors import BulkWriteError

from partner_repo import MemoryCoreRepository, Message, RollingService, close_database, connect
from partner_repo.mongo import driver
from partner_repo.mongo._embedded import EmbeddedClient

ROOT = Path(__file__).resolve().parents[3]
ADAPTER = {ROOT / "partner_repo" / "mongo" / "_driver.py", ROOT / "partner_repo" / "mongo" / "_embedded.py"}
DRIVER_SPECIFIC = re.compile(
    r"(?<!driver)\.(?:aggregate|watch|start_session|start_transaction)\(|\.client\.close\("
    r"|get_motor_collection|get_pymongo_collection|AsyncIOMotor|AsyncMongoClient|mongomock_motor|\.delegate\b"
)

NOT_THE_DRIVERS = {("partner_repo/listener/stream/_change_stream.py", "self._units.watch(")}
"""Calls that only look like a driver's: ``MemoryUnitRepository.watch`` goes through the adapter itself."""


def _library_sources() -> list[Path]:
    return sorted((ROOT / "partner_repo").rglob("*.py")) + sorted((ROOT / "migrations").glob("*.py"))


def test_no_module_but_the_adapter_makes_a_driver_specific_call() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in _library_sources()
        if path not in ADAPTER
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if DRIVER_SPECIFIC.search(line)
        and not line.lstrip().startswith(("#", '"', "``"))
        and not any(str(path.relative_to(ROOT)) == f and snippet in line for f, snippet in NOT_THE_DRIVERS)
    ]

    assert found == []


def test_the_stack_follows_the_installed_beanie() -> None:
    beanie_major = int(importlib.metadata.version("beanie").split(".")[0])

    assert ("motor" if beanie_major < 2 else "pymongo") == driver.STACK
    assert driver.STACK in driver.stack_description()


def test_a_new_client_is_the_installed_stacks_client() -> None:
    client = driver.new_client("mongodb://127.0.0.1:1/?directConnection=true", connect=False)

    expected = "AsyncIOMotorClient" if driver.STACK == "motor" else "AsyncMongoClient"
    assert type(client).__name__ == expected


async def test_the_in_memory_backend_has_the_installed_stacks_shape() -> None:
    database = await connect(None)
    collection = database["probe"]
    await collection.insert_one({"_id": 1})

    cursor = collection.aggregate([{"$match": {}}])
    documents = await (await cursor if driver.STACK == "pymongo" else cursor).to_list(length=None)

    assert documents == [{"_id": 1}]
    await close_database(database)


@pytest.mark.parametrize("wrapped", [False, True], ids=["as is", "through a forwarding wrapper"])
async def test_bulk_write_applies_pymongos_requests_on_the_in_memory_backend_of_either_stack(
    wrapped: bool,
) -> None:
    """mongomock cannot take PyMongo 4.9's bulk requests: the embedded backend takes them itself and, on the
    Motor stack, mongomock-motor's collection gets them one by one; an ordered batch stops at its first
    error either way (recognized through a wrapper too: mongomock-motor's classes take Motor's names)."""
    database = await connect(None)
    collection = database["each"]
    target = Forwarding(collection) if wrapped else collection

    result = await driver.bulk_write(
        target,
        [
            UpdateOne({"_id": 1}, {"$set": {"n": 1}}, upsert=True),
            UpdateOne({"_id": 1}, {"$inc": {"n": 1}}),
            UpdateOne({"_id": 2}, {"$addToSet": {"keys": "a"}}, upsert=True),
            UpdateOne({"_id": 3}, {"$set": {"n": 3}}),  # no such document, no upsert: nothing
            DeleteMany({"_id": {"$in": [4, 5]}}),
        ],
    )
    with pytest.raises(BulkWriteError) as stopped:
        await driver.bulk_write(target, [InsertOne({"_id": 2}), InsertOne({"_id": 6})])

    assert (result.upserted_count, result.matched_count) == (2, 1)
    assert [error["index"] for error in stopped.value.details["writeErrors"]] == [0]
    assert [d async for d in collection.find({}).sort("_id", 1)] == [
        {"_id": 1, "n": 2},
        {"_id": 2, "keys": ["a"]},
    ]
    await close_database(database)


class Forwarding:
    """A collection seen through a wrapper that forwards every attribute (an instrumented collection)."""

    def __init__(self, collection: Any) -> None:
        self._collection = collection

    def __getattr__(self, name: str) -> Any:
        return getattr(self._collection, name)


async def test_the_embedded_backend_answers_in_pymongo_async_shape() -> None:
    client = EmbeddedClient(tz_aware=True)
    collection = client["shape"]["items"]
    await collection.insert_many([{"_id": n} for n in range(3)])

    assert [d["_id"] async for d in collection.find().sort("_id", -1)] == [2, 1, 0]
    assert await (await collection.aggregate([{"$count": "n"}])).to_list() == [{"n": 3}]
    assert not hasattr(type(collection), "watch")  # no change streams: the library falls back to polling
    await client.close()


async def test_an_application_database_is_adopted_and_left_open() -> None:
    own = driver.in_memory_client(tz_aware=True)["app"]

    async with connect(own) as database:
        await MemoryCoreRepository(database).get_or_create("agent")

    assert database is own
    assert await own["memory_cores"].count_documents({}) == 1  # still usable: the application closes it


async def test_an_application_client_is_adopted_with_the_database_name_given() -> None:
    client = driver.in_memory_client(tz_aware=True)

    database = await connect(client, "billing")
    rolling = RollingService(database, lambda messages: "summary")
    await rolling.record_and_roll("agent", [Message(role="user", content="hi")])

    assert database.name == "billing"
    assert await client["billing"]["memory_cores"].count_documents({}) == 1


@pytest.mark.parametrize("given", [42, b"not a uri object"])
async def test_connect_refuses_what_is_neither_uri_client_nor_database(given: Any) -> None:
    from partner_repo import InvalidInput

    with pytest.raises(InvalidInput, match="takes a URI, a client or a database"):
        await connect(given)


async def test_awaiting_only_what_is_awaitable_serves_both_shapes() -> None:
    class MotorShaped:
        def aggregate(self, pipeline: list[Any], **options: Any) -> Any:
            return Cursor()

    class PyMongoShaped:
        async def aggregate(self, pipeline: list[Any], **options: Any) -> Any:
            return Cursor()

    class Cursor:
        async def to_list(self, length: int | None = None) -> list[Any]:
            return [{"ok": 1}]

    assert await driver.aggregate_list(MotorShaped(), []) == [{"ok": 1}]
    assert await driver.aggregate_list(PyMongoShaped(), []) == [{"ok": 1}]


async def test_an_embedded_cursor_reads_each_document_once_however_it_is_read() -> None:
    client = EmbeddedClient()
    collection = client["shape"]["items"]
    await collection.insert_many([{"_id": n} for n in range(3)])
    cursor = await collection.list_indexes()  # a list underneath, not a mongomock cursor

    first = await cursor.next()
    rest = await cursor.to_list()

    assert first["name"] == "_id_" and rest == []
    found = collection.find().sort("_id")
    assert [await found.next(), await found.next()] == [{"_id": 0}, {"_id": 1}]
    assert await found.to_list() == [{"_id": 2}]


@pytest.mark.skipif(driver.STACK != "pymongo", reason="Beanie 1 (the motor stack) binds to either driver")
async def test_on_beanie_2_a_motor_client_is_refused_saying_why() -> None:
    class AsyncIOMotorClient:  # what an application on Beanie 2 that kept Motor around would pass
        __module__ = "motor.motor_asyncio"

        def get_database(self, name: str) -> Any:
            raise AssertionError("nothing is opened")

    from partner_repo import InvalidInput

    with pytest.raises(InvalidInput, match="Beanie 2 runs on PyMongo's async API only"):
        await connect(AsyncIOMotorClient())
