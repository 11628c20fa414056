"""What an erasure leaves under the ids it erased, and how every reader takes it.

A tombstone is ``{_id, erased_at}`` in ``memory_units`` (and ``{_id, kind: "erased-unit", group, unit_id,
erased_at}`` per listener group in ``listener_checkpoints``): ids and a time, no content. It fences the id
(nothing can create the unit or its progress again while it lasts) and is otherwise no unit: every read
answers as it does for an id nothing was ever stored under.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

import pytest
from pymongo.errors import DuplicateKeyError

from partner_repo import (
    ConflictError,
    ListenerCheckpoints,
    MemoryCoreRepository,
    MemoryEraser,
    MemoryUnit,
    MemoryUnitRepository,
    Message,
    NotFound,
    SliceQueries,
    StaleIncrement,
    UnitChecker,
)
from partner_repo.mongo import CHECKPOINTS, TOMBSTONE_RETENTION, UNITS
from partner_repo.units._append import APPEND_PATIENCE_S
from tests.conftest import YieldingDatabase, until
from tests.erasure_support import T0, remember
from tests.unit.listener.support import Recorder, quick_listener, registry_of

WEEK_S = 7 * 24 * 60 * 60


async def erased(database: Any) -> tuple[str, str]:
    """Alice's one unit and its slice, both erased (bob's memory stays)."""
    await remember(database, "bob", turns=1)
    [result] = await remember(database, "alice", turns=1)
    await MemoryEraser(database).forget("alice")
    return result.memory_unit.id, result.slice_id


# -- what forget leaves --------------------------------------------------------------------------------------


async def test_forget_leaves_only_the_id_and_a_time_under_each_erased_unit(database: Any) -> None:
    unit_id, _ = await erased(database)

    tombstone = await database[UNITS].find_one({"_id": unit_id})

    assert tombstone is not None and set(tombstone) == {"_id", "erased_at"}


async def test_forget_fences_the_session_unit_id_even_when_no_unit_was_stored_under_it(database: Any) -> None:
    cores = MemoryCoreRepository(database)
    await cores.record("alice", [Message(role="user", content="never rolled")], at=T0)
    core = await cores.get("alice")
    assert core is not None

    await MemoryEraser(database).forget("alice")

    tombstone = await database[UNITS].find_one({"_id": core.memory_session_id})
    assert tombstone is not None and set(tombstone) == {"_id", "erased_at"}


async def test_forget_before_leaves_a_tombstone_under_each_unit_it_erased(database: Any) -> None:
    [old] = await remember(database, "alice", turns=1, at=T0, refresh=True)
    [new] = await remember(database, "alice", turns=1, at=T0 + timedelta(days=2), refresh=True)

    await MemoryEraser(database).forget_before("alice", T0 + timedelta(days=1))

    tombstone = await database[UNITS].find_one({"_id": old.memory_unit.id})
    assert tombstone is not None and set(tombstone) == {"_id", "erased_at"}
    assert await MemoryUnitRepository(database).get(new.memory_unit.id) is not None


async def test_forget_turns_every_groups_progress_on_an_erased_unit_into_a_tombstone(database: Any) -> None:
    await remember(database, "alice", turns=1)
    await ListenerCheckpoints(database, "search").open_group("beginning")  # a group that saw nothing of it
    [result] = await remember(database, "alice", turns=1, at=T0 + timedelta(hours=1))
    unit = result.memory_unit
    await ListenerCheckpoints(database, "index").mark_delivered(unit.id, unit.core_id, result.slice_id)

    report = await MemoryEraser(database).forget("alice")

    left = [d async for d in database[CHECKPOINTS].find({"unit_id": unit.id}).sort("group", 1)]
    assert report.checkpoints == 1
    assert [(d["group"], d["kind"], set(d)) for d in left] == [
        (group, "erased-unit", {"_id", "kind", "group", "unit_id", "erased_at"})
        for group in ("index", "search")
    ]


async def test_the_ttl_indexes_remove_tombstones_after_the_retention(database: Any) -> None:
    for collection in (UNITS, CHECKPOINTS):
        index = (await database[collection].index_information())["erased_ttl"]

        assert [name for name, _ in index["key"]] == ["erased_at"]
        assert index["expireAfterSeconds"] == WEEK_S == TOMBSTONE_RETENTION.total_seconds()


# -- the unit repository: no such unit ---------------------------------------------------------------------


READS_OF_NO_UNIT: dict[str, Callable[[MemoryUnitRepository, str], Awaitable[Any]]] = {
    "get": lambda units, unit_id: units.get(unit_id),
    "head": lambda units, unit_id: units.head(unit_id),
    "tail": lambda units, unit_id: units.tail(unit_id, 4),
    "outline": lambda units, unit_id: units.outline(unit_id),
}


@pytest.mark.parametrize("read", list(READS_OF_NO_UNIT))
async def test_a_tombstone_reads_as_no_unit(database: Any, read: str) -> None:
    unit_id, _ = await erased(database)

    assert await READS_OF_NO_UNIT[read](MemoryUnitRepository(database), unit_id) is None


async def test_an_erased_units_tail_messages_are_empty(database: Any) -> None:
    unit_id, _ = await erased(database)

    assert await MemoryUnitRepository(database).tail_messages(unit_id, 4) == []


async def test_an_erased_units_messages_are_not_found(database: Any) -> None:
    unit_id, slice_id = await erased(database)
    units = MemoryUnitRepository(database)

    with pytest.raises(NotFound):
        await units.messages_between(unit_id, 0, 2)
    with pytest.raises(NotFound):
        await units.slice_messages(unit_id, slice_id)


async def test_no_listing_of_a_cores_units_names_a_tombstone(database: Any) -> None:
    unit_id, _ = await erased(database)
    units = MemoryUnitRepository(database)

    assert await units.unit_ids("alice") == set() and await units.list_units("alice") == []
    assert unit_id not in {u.id for u in await units.list_units("bob")}


async def test_deleting_an_erased_units_id_deletes_nothing_and_keeps_the_fence(database: Any) -> None:
    unit_id, _ = await erased(database)

    assert await MemoryUnitRepository(database).delete(unit_id) is False
    assert await database[UNITS].find_one({"_id": unit_id}) is not None


# -- the unit repository: nothing is created under a tombstone ---------------------------------------------


@pytest.mark.parametrize(
    ("expected_start", "refusal"),
    [(0, StaleIncrement), (2, StaleIncrement), (None, ConflictError)],
    ids=["fenced-as-new", "fenced-on-its-count", "unfenced"],
)
async def test_an_append_to_an_erased_unit_id_is_refused_at_once_and_creates_nothing(
    database: Any, expected_start: int | None, refusal: type[Exception]
) -> None:
    unit_id, _ = await erased(database)
    units = MemoryUnitRepository(database)
    started = time.monotonic()

    with pytest.raises(refusal, match=repr(unit_id)):
        await units.append(
            unit_id,
            [Message(role="user", content="after the erasure")],
            "late",
            core_id="alice",
            expected_start=expected_start,
        )

    assert time.monotonic() - started < APPEND_PATIENCE_S / 2  # refused, not retried until patience ran out
    assert await units.get(unit_id) is None
    tombstone = await database[UNITS].find_one({"_id": unit_id})
    assert tombstone is not None and set(tombstone) == {"_id", "erased_at"}


async def test_saving_a_new_unit_under_an_erased_id_is_refused(database: Any) -> None:
    unit_id, _ = await erased(database)
    unit = MemoryUnit(id=unit_id, core_id="alice", conversation_messages=[], slices=[])

    with pytest.raises(ConflictError):
        await MemoryUnitRepository(database).save(unit)

    assert await MemoryUnitRepository(database).get(unit_id) is None


# -- admin ------------------------------------------------------------------------------------------------


async def test_the_admin_unit_view_and_messages_of_an_erased_unit_are_not_found(database: Any) -> None:
    unit_id, _ = await erased(database)
    queries = SliceQueries(database)

    with pytest.raises(NotFound):
        await queries.unit(unit_id)
    with pytest.raises(NotFound):
        await queries.messages(unit_id, 0, 2)


async def test_admin_slice_queries_find_nothing_of_an_erased_unit(database: Any) -> None:
    unit_id, slice_id = await erased(database)
    queries = SliceQueries(database)

    assert (await queries.find(unit_id=unit_id)).items == []
    assert await queries.count(unit_id=unit_id) == 0
    assert slice_id not in {s.id for s in (await queries.find(order="asc")).items}
    assert await queries.get(slice_id) is None
    with pytest.raises(NotFound):
        await queries.require(slice_id)


async def test_stats_count_no_tombstone_as_a_unit(database: Any) -> None:
    await erased(database)

    stats = await SliceQueries(database).stats(now=T0)

    assert (stats.units, stats.slices) == (1, 1)  # bob's
    assert [u.core_id for u in stats.largest_units] == ["bob"]


async def test_check_and_repair_read_no_tombstone(database: Any) -> None:
    await erased(database)
    checker = UnitChecker(database)

    report = await checker.check()
    repaired = await checker.repair()

    assert report.ok and report.units_checked == 1
    assert repaired.ok and repaired.repaired == [] and repaired.units_checked == 1


# -- the listener --------------------------------------------------------------------------------------------


async def test_a_listener_passes_a_tombstone_by_without_calling_it_unreadable(
    database: Any, caplog: pytest.LogCaptureFixture
) -> None:
    await erased(database)
    recorder = Recorder()

    with caplog.at_level(logging.WARNING, logger="partner_repo.listener"):
        async with quick_listener(database, registry_of(recorder)) as listener:
            await listener.flush()

    assert [r.memory_unit.core_id for r in recorder.results] == ["bob"]
    assert "cannot be read" not in caplog.text


async def test_a_group_starting_from_now_records_no_baseline_for_a_tombstone(database: Any) -> None:
    unit_id, _ = await erased(database)

    async with quick_listener(database, registry_of(Recorder()), start_from="now") as listener:
        await listener.flush()

    assert await database[CHECKPOINTS].count_documents({"unit_id": unit_id, "kind": "unit"}) == 0


async def test_polling_passes_after_an_erasure_stop_at_the_probe(memory_db: Any) -> None:
    """The fingerprint scan lists a tombstone like any id: once it is known for one, a pass that finds
    nothing changed costs the probe alone again (no fingerprint scan, no read of the tombstone)."""
    await erased(memory_db)
    database = YieldingDatabase(memory_db)
    async with quick_listener(database, registry_of(Recorder()), source="polling") as listener:
        await listener.flush()
        calls = database[UNITS].calls
        calls.clear()
        await until(lambda: calls.count("aggregate") >= 5)  # five more passes (every 10 ms)

    assert set(calls) == {"aggregate"}


async def test_progress_saved_on_an_erased_unit_after_the_erasure_is_not_recorded(database: Any) -> None:
    checkpoints = ListenerCheckpoints(database, "default")
    await checkpoints.open_group("beginning")  # the group exists when the erasure runs
    unit_id, slice_id = await erased(database)

    await checkpoints.mark_consumer_done(unit_id, "alice", slice_id, "index")
    await checkpoints.mark_delivered(unit_id, "alice", slice_id)
    await checkpoints.save_fingerprint(unit_id, "alice", (2, 4, 1, 900))

    assert await database[CHECKPOINTS].count_documents({"unit_id": unit_id, "kind": "unit"}) == 0
    assert (await checkpoints.unit(unit_id)).delivered == set()
    assert unit_id not in await checkpoints.fingerprints()


async def test_an_erasure_delivered_to_a_group_leaves_its_tombstones_in_place(database: Any) -> None:
    """The group's second clean-up after ``on_erased`` replaces, never deletes: the fence stays."""

    class Eraser(Recorder):
        async def on_erased(self, erasure: Any) -> None:
            await asyncio.sleep(0)

    [result] = await remember(database, "alice", turns=1)
    unit_id = result.memory_unit.id
    consumer = Eraser()
    async with quick_listener(database, registry_of(consumer)) as listener:
        await listener.flush()
    await MemoryEraser(database).forget("alice")
    async with quick_listener(database, registry_of(consumer)) as listener:
        await listener.flush()  # the erasure is delivered, and the group's progress on the unit replaced
    await ListenerCheckpoints(database, "default").mark_delivered(unit_id, "alice", result.slice_id)

    [left] = [d async for d in database[CHECKPOINTS].find({"unit_id": unit_id})]
    assert left["kind"] == "erased-unit" and set(left) == {"_id", "kind", "group", "unit_id", "erased_at"}


class LosesTheFirstInsertRace:
    """The checkpoints collection, where the first upsert fails as the loser of a race with a concurrent
    first write of the same key would (the winner's document is there when it fails)."""

    def __init__(self, collection: Any) -> None:
        self._collection = collection
        self.raced = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._collection, name)

    async def update_one(self, query: Any, update: Any, **options: Any) -> Any:
        if not self.raced and options.get("upsert"):
            self.raced = True
            winner = {"_id": query["_id"], "kind": "unit", **query["_id"], "delivered": ["by-the-winner"]}
            await self._collection.insert_one(winner)
            raise DuplicateKeyError("E11000 duplicate key error collection: listener_checkpoints index: _id_")
        return await self._collection.update_one(query, update, **options)


async def test_progress_that_loses_a_race_with_a_concurrent_first_write_is_still_recorded(
    memory_db: Any,
) -> None:
    collection = LosesTheFirstInsertRace(memory_db[CHECKPOINTS])

    class Database:
        def __getitem__(self, name: str) -> Any:
            return collection if name == CHECKPOINTS else memory_db[name]

    await ListenerCheckpoints(Database(), "default").mark_delivered("u1", "core", "s1")

    assert collection.raced
    assert (await ListenerCheckpoints(memory_db, "default").unit("u1")).delivered == {"by-the-winner", "s1"}
