"""Slice-id uniqueness without a unique index, under concurrency: of writers appending one caller-chosen slice
id to different units at once (tasks, or OS processes on a server), exactly one stores it."""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import pytest

from partner_repo import DuplicateSliceId, MemoryUnitRepository, Message, close_database, init_repository
from partner_repo.mongo import SLICE_ID_CLAIMS, UNITS
from tests.conftest import real_database, requires_mongodb

WRITERS = 8

CLAIMING_PROCESS = """
import asyncio, sys
from partner_repo import DuplicateSliceId, Message, connect, MemoryUnitRepository

async def main(uri, db_name, ready, unit_id):
    async with connect(uri, db_name, create_indexes=False) as database:
        units = MemoryUnitRepository(database)
        while not __import__("os").path.exists(ready):  # start together
            await asyncio.sleep(0.005)
        try:
            said = [Message(role="user", content="hi")]
            await units.append(unit_id, said, "s", core_id="c", slice_id="contested")
        except DuplicateSliceId:
            print("refused")
            return
        print("stored")

asyncio.run(main(*sys.argv[1:]))
"""


async def holders(database: Any) -> list[str]:
    return sorted([d["_id"] async for d in database[UNITS].find({"slice_ids": "contested"}, {"_id": 1})])


async def test_concurrent_appends_of_one_slice_id_to_different_units_store_it_once(database: Any) -> None:
    async def append(n: int) -> bool:
        try:
            units = MemoryUnitRepository(database)
            await units.append(
                f"u{n}", [Message(role="user", content="hi")], "s", core_id="c", slice_id="contested"
            )
        except DuplicateSliceId:
            return False
        return True

    stored = await asyncio.gather(*(append(n) for n in range(WRITERS)))

    assert sum(stored) == 1 and await holders(database) == [f"u{stored.index(True)}"]


@pytest.mark.integration
async def test_processes_appending_one_slice_id_to_different_units_store_it_once(tmp_path: Any) -> None:
    database = await init_repository(await real_database())
    ready = tmp_path / "go"
    try:
        command = [sys.executable, "-c", CLAIMING_PROCESS, requires_mongodb(), database.name, str(ready)]
        pipe = asyncio.subprocess.PIPE
        processes = [
            await asyncio.create_subprocess_exec(*command, f"p{n}", stdout=pipe) for n in range(WRITERS)
        ]
        ready.write_text("go")  # every process appends as soon as it sees this
        outcomes = [(await asyncio.wait_for(p.communicate(), 60))[0].decode().strip() for p in processes]

        assert sorted(outcomes) == ["refused"] * (WRITERS - 1) + ["stored"]
        (winner,) = await holders(database)
        assert outcomes[int(winner[1:])] == "stored"
        assert [d["unit_id"] async for d in database[SLICE_ID_CLAIMS].find({})] == [winner]
    finally:
        await database.client.drop_database(database.name)
        await close_database(database)
