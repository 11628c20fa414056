"""On a mongos (``hello`` answers ``msg: "isdbgrid"``): index management reads the shard keys and never asks
for an index a sharded collection cannot have, and ``migrate --transaction`` is refused before any command.

The server is scripted as a mongos whose ``config.collections`` says which collections are sharded: a unique
index not prefixed by the shard key must not be requested there (MongoDB refuses it, manual: "Sharded
Collections with Unique Indexes").
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from mockupdb import MockupDB, Request

from partner_repo import MigrationError, init_repository, run_migrations
from partner_repo.mongo import ALL_INDEXES, ERASURES, UNITS
from tests.unit.migrations.support import INDEXES, SLICE_INDEX, bound, load
from tests.wire.wire_support import HELLO, cursor, motor_client, plain, server_fixture

pytestmark = pytest.mark.wire

MONGOS_HELLO = {**HELLO, "msg": "isdbgrid", "logicalSessionTimeoutMinutes": 30}


def sessions_end(request: Request) -> bool:
    """Closing the client ends its sessions (a mongos has them): answered without the test."""
    return bool(request.command_name == "endSessions" and request.ok())


server = server_fixture(hello=MONGOS_HELLO, autoresponder=sessions_end)


@pytest.fixture
async def client(server: MockupDB) -> AsyncIterator[Any]:
    async with motor_client(server, quiet_for=0.2, unexpected="a request was left unanswered") as mongos:
        yield mongos


class Mongos:
    """Answers every command of a call like a mongos would, recording the indexes requested."""

    def __init__(self, server: MockupDB, sharded: dict[str, dict[str, Any]]) -> None:
        self.server = server
        self.sharded = sharded
        self.created: dict[str, list[dict[str, Any]]] = {}
        self.config_reads: list[dict[str, Any]] = []
        self.dropped: list[tuple[str, str]] = []
        self.seen: list[str] = []

    async def serve(self, call: asyncio.Task[Any]) -> None:
        while not call.done():
            if not await asyncio.to_thread(self.server.got, timeout=0.05):
                continue
            self.answer(await asyncio.to_thread(self.server.receives, timeout=10))

    def answer(self, request: Request) -> None:
        name = str(next(iter(request.doc)))
        self.seen.append(name)
        if name in {"hello", "isMaster", "ismaster"}:  # asked by the library itself (a handshake never is)
            request.replies(MONGOS_HELLO)
        elif name == "find" and request.doc["find"] == "collections" and request.doc["$db"] == "config":
            self.config_reads.append(plain(request.doc["filter"]))
            found = [{"_id": f"partner.{c}", "key": key} for c, key in self.sharded.items()]
            request.replies(cursor(*found, ns="config.collections"))
        elif name == "createIndexes":
            self.created.setdefault(request.doc["createIndexes"], []).extend(plain(request.doc["indexes"]))
            request.replies({})
        elif name == "dropIndexes":
            self.dropped.append((request.doc["dropIndexes"], request.doc["index"]))
            request.replies({})
        elif name in {"find", "listCollections", "listIndexes", "aggregate"}:
            request.replies(cursor())
        elif name == "buildInfo":
            request.replies({"version": "7.0.12", "versionArray": [7, 0, 12, 0]})
        else:
            request.replies({})


async def test_index_management_on_a_mongos_reads_which_collections_are_sharded(
    server: MockupDB, client: Any
) -> None:
    mongos = Mongos(server, {UNITS: {"_id": "hashed"}})
    call = asyncio.create_task(init_repository(client["partner"]))
    await mongos.serve(call)
    await call

    (read,) = mongos.config_reads
    assert {f"partner.{name}" for name in ALL_INDEXES} <= set(read["_id"]["$in"])
    expected = {name: [m.document["name"] for m in models] for name, models in ALL_INDEXES.items()}
    assert {name: [i["name"] for i in indexes] for name, indexes in mongos.created.items()} == expected


async def test_a_unique_index_the_shard_key_does_not_prefix_is_never_requested(
    server: MockupDB, client: Any
) -> None:
    """The library documents ``erasures`` as unsharded; sharded anyway, it cannot have ``erasure_part``."""
    mongos = Mongos(server, {UNITS: {"_id": "hashed"}, ERASURES: {"_id": "hashed"}})
    call = asyncio.create_task(init_repository(client["partner"]))
    await mongos.serve(call)
    await call

    assert "erasure_part" not in [index["name"] for index in mongos.created.get(ERASURES, [])]
    assert not any(index.get("unique") for indexes in mongos.created.values() for index in indexes)
    assert [i["name"] for i in mongos.created[UNITS]] == [m.document["name"] for m in ALL_INDEXES[UNITS]]


async def test_the_migration_of_0_3_on_a_sharded_collection_drops_the_old_index_and_builds_none(
    server: MockupDB, client: Any
) -> None:
    mongos = Mongos(server, {UNITS: {"_id": "hashed"}})

    async def swap() -> None:
        migration = await bound(SLICE_INDEX, client["partner"])
        await migration.swap_indexes(migration.OLD_INDEX, migration.NEW_INDEX)

    call = asyncio.create_task(swap())
    await mongos.serve(call)
    await call

    assert mongos.dropped == [(UNITS, "slice_id_unique")] and mongos.created == {}


async def test_the_index_migration_of_0_1_on_a_sharded_collection_skips_its_unique_index(
    server: MockupDB, client: Any
) -> None:
    mongos = Mongos(server, {UNITS: {"_id": "hashed"}})

    async def create() -> None:
        await (await bound(INDEXES, client["partner"])).create_all()

    call = asyncio.create_task(create())
    await mongos.serve(call)
    await call

    assert "slice_id_unique" not in [index["name"] for index in mongos.created[UNITS]]
    assert len(mongos.created[UNITS]) == len(load(INDEXES).INDEXES[UNITS]) - 1


async def test_migrate_with_a_transaction_is_refused_on_a_mongos_before_any_other_command(
    server: MockupDB, client: Any
) -> None:
    mongos = Mongos(server, {UNITS: {"_id": "hashed"}})
    call = asyncio.create_task(run_migrations(client["partner"], use_transaction=True))
    await mongos.serve(call)

    with pytest.raises(MigrationError, match=r"refused on a sharded cluster.*without --transaction"):
        await call
    assert mongos.seen == ["hello", "find"]  # the topology: hello, then config.collections; nothing else
