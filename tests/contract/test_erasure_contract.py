"""Erasure's guarantees, kept by every backend: in-memory (polling) always, and the real MongoDB named by
MONGODB_URI (its change stream) when set.

Forgetting a core removes its window, units, listener progress and dead letters, and nothing of other cores;
a consumer whose listener group was down hears of it when the group starts again; an erasure cut short is
finished by running it again; a roll racing it brings nothing back, nor does a roller that stalled past its
lease or a listener commit held back behind a slow slice (the erased ids' tombstones fence both).
"""

from __future__ import annotations

import asyncio
import itertools
from datetime import timedelta
from functools import partial
from typing import Any

import pytest

from partner_repo import (
    AfterRollingRegistry,
    Backoff,
    DeadLetterRepository,
    Erasure,
    ErasureLog,
    ListenerCheckpoints,
    MemoryCoreRepository,
    MemoryEraser,
    MemoryUnitRepository,
    Message,
    RollingConfig,
    RollingListener,
    RollingResult,
    RollingService,
)
from partner_repo.mongo import CHECKPOINTS, CORES, ERASURES, UNITS
from tests import conftest
from tests.erasure_support import T0, Crash, CrashingDatabase, letter_on, progress_on, remember, unit_ids_of

until = partial(conftest.until, within=15.0)
QUICK = Backoff(initial=0.01, maximum=0.05, jitter=0)


class Index:
    """A consumer that keeps what it derived per slice and drops it when told of an erasure."""

    name = "index"

    def __init__(self) -> None:
        self.slices: dict[str, str] = {}
        self.erasures: list[Erasure] = []

    async def consume(self, result: RollingResult) -> None:
        self.slices[result.slice_id] = result.summary

    async def on_erased(self, erasure: Erasure) -> None:
        self.erasures.append(erasure)
        for slice_id in erasure.slice_ids:
            self.slices.pop(slice_id, None)


def listener_for(database: Any, consumer: Any) -> RollingListener:
    registry = AfterRollingRegistry([consumer])
    return RollingListener(database, registry, poll_interval=0.05, backoff=QUICK, max_attempts=2)


async def test_a_consumer_whose_group_was_down_hears_of_the_erasure_when_it_starts(database: Any) -> None:
    erased = await remember(database, "alice", turns=2)
    [kept] = await remember(database, "bob", turns=1)
    index = Index()
    async with listener_for(database, index) as listener:
        await until(lambda: len(index.slices) == 3)
        await listener.flush()

    report = await MemoryEraser(database).forget("alice")  # the group is down
    async with listener_for(database, index) as listener:
        await until(lambda: len(index.erasures) == 1)
        await listener.flush()

    [erasure] = index.erasures
    assert (erasure.erasure_id, erasure.core_id) == (report.erasure_id, "alice")
    assert set(erasure.slice_ids) == {r.slice_id for r in erased}
    assert index.slices == {kept.slice_id: kept.summary}  # what it derived from alice is gone


async def test_forget_removes_the_cores_documents_and_what_names_them_and_nothing_else(database: Any) -> None:
    [erased] = await remember(database, "alice", turns=1)
    [kept] = await remember(database, "bob", turns=1)
    for result in (erased, kept):
        await progress_on(database, result, "search")
        await letter_on(database, result)

    report = await MemoryEraser(database).forget("alice")

    assert (report.units, report.slices, report.checkpoints, report.dead_letters) == (1, 1, 1, 1)
    assert await database[CORES].find_one({"_id": "alice"}) is None
    assert await unit_ids_of(database, "alice") == set()
    assert await unit_ids_of(database, "bob") == {kept.memory_unit.id}
    search = ListenerCheckpoints(database, "search")
    assert (await search.unit(erased.memory_unit.id)).delivered == set()
    assert (await search.unit(kept.memory_unit.id)).delivered == {kept.slice_id}
    assert [x.slice_id for x in await DeadLetterRepository(database).list()] == [kept.slice_id]
    stored = [document async for document in database[ERASURES].find({})]
    assert len(stored) == 1 and "secret" not in repr(stored)


@pytest.mark.parametrize(
    ("collection", "method"),
    [(UNITS, "delete_many"), (CORES, "find_one_and_delete"), (ERASURES, "insert_one")],
)
async def test_an_erasure_cut_short_is_finished_by_running_it_again(
    database: Any, collection: str, method: str
) -> None:
    results = await remember(database, "alice", turns=2, refresh=True)
    with pytest.raises(Crash):
        await MemoryEraser(CrashingDatabase(database, collection, method)).forget("alice")

    report = await MemoryEraser(database).forget("alice")

    assert report.resumed and (report.units, report.slices, report.core_removed) == (2, 2, True)
    assert await unit_ids_of(database, "alice") == set()
    assert await database[CORES].find_one({"_id": "alice"}) is None
    [erasure] = await ErasureLog(database).after(0)
    assert set(erasure.slice_ids) == {r.slice_id for r in results}


async def test_a_roll_in_progress_is_waited_for_and_what_it_stored_is_erased(database: Any) -> None:
    await remember(database, "alice", turns=1)
    gate, started = asyncio.Event(), asyncio.Event()

    async def slow(messages: list[Message]) -> str:
        started.set()
        await gate.wait()
        return "slow summary"

    await MemoryCoreRepository(database).record(
        "alice", [Message(role="user", content=f"late {n}") for n in range(6)], at=T0 + timedelta(hours=1)
    )
    service = RollingService(database, slow, RollingConfig(trigger_limit=4))
    roll = asyncio.create_task(service.roll("alice", now=T0 + timedelta(hours=1)))
    await started.wait()
    forget = asyncio.create_task(MemoryEraser(database).forget("alice"))
    await asyncio.sleep(0.2)
    assert not forget.done()

    gate.set()
    rolled, report = await roll, await forget

    assert rolled is not None and rolled.slice_id in (await ErasureLog(database).after(0))[0].slice_ids
    assert report.units == 1 and await unit_ids_of(database, "alice") == set()


async def test_forget_before_and_clear_window_leave_the_core(database: Any) -> None:
    old = await remember(database, "alice", turns=1, at=T0, refresh=True)
    new = await remember(database, "alice", turns=1, at=T0 + timedelta(days=2), refresh=True)
    cores = MemoryCoreRepository(database)
    await cores.record("alice", [Message(role="user", content="live")], at=T0 + timedelta(days=3))
    eraser = MemoryEraser(database)

    report = await eraser.forget_before("alice", T0 + timedelta(days=1))
    cleared = await eraser.clear_window("alice")

    assert report.units == 1 and cleared == 1
    assert await unit_ids_of(database, "alice") == {new[0].memory_unit.id} != {old[0].memory_unit.id}
    core = await cores.get("alice")
    assert core is not None and core.chat_messages == [] and core.lease_owner is None


async def test_a_roller_stalled_past_two_lease_ttls_while_forget_erased_the_core_stores_nothing(
    database: Any,
) -> None:
    """Finding 4, erasure half. The roller took its lease and a snapshot of the core's first window (its
    session's unit does not exist yet), then stalled for two lease ttls; forget watched the lease stay silent,
    took it over and erased the core. On the roller's own clock its summary came back at once (the stall was
    before it), so it does not re-check its lease: only its fenced append stands between the erased text and
    memory, and the tombstone under the session's unit id refuses it."""
    cores = MemoryCoreRepository(database)
    window = [Message(role="user", content=f"erased secret {n}") for n in range(6)]
    await cores.record("alice", window, at=T0)
    core = await cores.get("alice")
    assert core is not None
    gate, started = asyncio.Event(), asyncio.Event()

    async def stalled(messages: list[Message]) -> str:
        started.set()
        await gate.wait()
        return "a summary of the erased secrets"

    roller = RollingService(database, stalled, RollingConfig(trigger_limit=4), monotonic=lambda: 0.0)
    roll = asyncio.create_task(roller.roll("alice", now=T0))
    await started.wait()  # lease and snapshot taken
    ticks = itertools.count(step=60.0)  # the eraser looks at the silent lease once per lease ttl (60 s)
    report = await MemoryEraser(database, monotonic=lambda: next(ticks)).forget("alice")
    gate.set()

    assert await roll is None
    assert report.core_removed and report.window_messages == 6
    assert await MemoryUnitRepository(database).get(core.memory_session_id) is None
    assert await unit_ids_of(database, "alice") == set()
    stored = [document async for document in database[UNITS].find({})]
    assert "erased secret" not in repr(stored) and "summary" not in repr(stored)


class HeldBack:
    """A consumer that takes one slice slowly (until ``gate`` is set) and every other at once."""

    name = "held-back"

    def __init__(self, slow_slice_id: str) -> None:
        self.slow = slow_slice_id
        self.gate = asyncio.Event()
        self.consumed: list[str] = []

    async def consume(self, result: RollingResult) -> None:
        if result.slice_id == self.slow:
            await self.gate.wait()
        self.consumed.append(result.slice_id)


async def test_a_commit_held_back_behind_a_slow_slice_does_not_bring_back_an_erased_units_progress(
    database: Any,
) -> None:
    """Finding 6. With parallel delivery, alice's slice is delivered while bob's (offered first) is slow, so
    the checkpoint commit of alice's unit waits behind bob's; forget erases alice meanwhile and removes the
    group's progress on her unit. The commit, saved once bob's slice is done, must not recreate it."""
    [slow] = await remember(database, "bob", turns=1, at=T0)
    [erased] = await remember(database, "alice", turns=1, at=T0 + timedelta(hours=1))
    unit_id = erased.memory_unit.id
    consumer = HeldBack(slow.slice_id)
    checkpoints = ListenerCheckpoints(database, "default")
    listener = RollingListener(
        database, AfterRollingRegistry([consumer]), poll_interval=0.05, backoff=QUICK, concurrency=2
    )
    async with listener:
        await until(lambda: erased.slice_id in consumer.consumed)
        await until(lambda: _delivered(checkpoints, unit_id, erased.slice_id))
        report = await MemoryEraser(database).forget("alice")
        consumer.gate.set()
        await listener.flush()

    assert report.checkpoints == 1 and consumer.consumed == [erased.slice_id, slow.slice_id]
    assert await database[CHECKPOINTS].count_documents({"unit_id": unit_id, "kind": "unit"}) == 0
    assert (await checkpoints.unit(unit_id)).delivered == set()
    assert (await checkpoints.unit(slow.memory_unit.id)).delivered == {slow.slice_id}


async def _delivered(checkpoints: ListenerCheckpoints, unit_id: str, slice_id: str) -> bool:
    return slice_id in (await checkpoints.unit(unit_id)).delivered
