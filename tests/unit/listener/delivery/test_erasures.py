"""Consumers with ``on_erased`` hear of every erasure through the listener, at least once, even after being
down; consumers without it are delivered as before."""

from __future__ import annotations

import asyncio
import io
from dataclasses import dataclass, field
from typing import Any

from partner_repo import (
    DeadLetterRepository,
    Erasure,
    ListenerCheckpoints,
    MemoryEraser,
    PrintConsumer,
    RollingResult,
    replay_dead_letters,
)
from partner_repo.mongo import CHECKPOINTS
from tests.conftest import until
from tests.erasure_support import progress_on, remember
from tests.unit.listener.support import Recorder, quick_listener, registry_of


@dataclass
class Indexer:
    """Keeps slice ids as a search index would, and drops them when told they were erased."""

    name: str = "indexer"
    fail_erasures: int = 0
    events: list[str] = field(default_factory=list)
    erasures: list[Erasure] = field(default_factory=list)
    gate: asyncio.Event | None = None

    async def consume(self, result: RollingResult) -> None:
        if self.gate is not None:
            await self.gate.wait()
        self.events.append(f"consume {result.slice_id}")

    async def on_erased(self, erasure: Erasure) -> None:
        if self.fail_erasures:
            self.fail_erasures -= 1
            raise RuntimeError("index down")
        self.events.append(f"erased {' '.join(erasure.slice_ids)}")
        self.erasures.append(erasure)


async def run_once(database: Any, *consumers: Any, **options: Any) -> None:
    """Start a listener of group ``default``, let it deliver everything there is, stop it."""
    async with quick_listener(database, registry_of(*consumers), **options) as listener:
        await listener.flush()


async def test_a_consumer_with_on_erased_is_told_what_was_erased(memory_db: Any) -> None:
    results = await remember(memory_db, "alice", turns=2)
    indexer = Indexer()
    async with quick_listener(memory_db, registry_of(indexer)) as listener:
        await listener.flush()
        report = await MemoryEraser(memory_db).forget("alice")
        await listener.flush()

    [erasure] = indexer.erasures
    assert (erasure.erasure_id, erasure.core_id, erasure.scope) == (report.erasure_id, "alice", "core")
    assert erasure.unit_ids == (results[0].memory_unit.id,)
    assert set(erasure.slice_ids) == {r.slice_id for r in results}


async def test_a_group_that_was_down_is_told_when_it_starts_again(memory_db: Any) -> None:
    await remember(memory_db, "alice", turns=1)
    indexer = Indexer()
    await run_once(memory_db, indexer)  # the group exists and delivered the slice
    await MemoryEraser(memory_db).forget("alice")  # while no listener of the group runs

    await run_once(memory_db, indexer)

    assert [e.core_id for e in indexer.erasures] == ["alice"]


async def test_an_erasure_delivered_is_not_delivered_again_after_a_restart(memory_db: Any) -> None:
    await remember(memory_db, "alice", turns=1)
    indexer = Indexer()
    await run_once(memory_db, indexer)
    await MemoryEraser(memory_db).forget("alice")
    await run_once(memory_db, indexer)

    await run_once(memory_db, indexer)

    assert len(indexer.erasures) == 1


async def test_consumers_without_on_erased_are_delivered_as_before(memory_db: Any) -> None:
    [kept] = await remember(memory_db, "bob", turns=1)
    await remember(memory_db, "alice", turns=1)
    await MemoryEraser(memory_db).forget("alice")
    plain, indexer = Recorder(), Indexer()

    await run_once(memory_db, plain, indexer)

    assert plain.slice_ids == [kept.slice_id]  # the erased slice is gone: never delivered


async def test_on_erased_comes_after_a_delivery_of_an_erased_slice_in_flight(memory_db: Any) -> None:
    [result] = await remember(memory_db, "alice", turns=1)
    indexer = Indexer(gate=asyncio.Event())
    async with quick_listener(memory_db, registry_of(indexer)) as listener:
        await until(lambda: listener.lag().pending == 1)  # the slice is being delivered
        await MemoryEraser(memory_db).forget("alice")
        await asyncio.sleep(0.1)  # the listener follows the log every 10 ms: it waits for that delivery
        assert indexer.erasures == []
        indexer.gate.set()
        await listener.flush()

    assert indexer.events == [f"consume {result.slice_id}", f"erased {result.slice_id}"]


async def test_a_new_group_is_not_told_of_erasures_made_before_it_existed(memory_db: Any) -> None:
    await remember(memory_db, "alice", turns=1)
    await MemoryEraser(memory_db).forget("alice")
    indexer = Indexer()

    await run_once(memory_db, indexer, group="created-later")

    assert indexer.erasures == []


async def test_a_group_from_before_erasures_is_told_of_every_erasure(memory_db: Any) -> None:
    await remember(memory_db, "alice", turns=1)
    indexer = Indexer()
    await run_once(memory_db, indexer)
    await memory_db[CHECKPOINTS].update_one({"_id": {"group": "default"}}, {"$unset": {"erasure_seq": ""}})
    await MemoryEraser(memory_db).forget("alice")
    await memory_db[CHECKPOINTS].update_one({"_id": {"group": "default"}}, {"$unset": {"erasure_seq": ""}})

    await run_once(memory_db, indexer)

    assert len(indexer.erasures) == 1


async def test_a_failing_on_erased_is_retried_then_dead_lettered_and_the_group_goes_on(
    memory_db: Any,
) -> None:
    await remember(memory_db, "alice", turns=1)
    await remember(memory_db, "bob", turns=1)
    indexer = Indexer(fail_erasures=3)  # every attempt at the first erasure (max_attempts=3)
    await run_once(memory_db, indexer)
    eraser = MemoryEraser(memory_db)
    await eraser.forget("alice")
    await eraser.forget("bob")

    await run_once(memory_db, indexer)

    assert [e.core_id for e in indexer.erasures] == ["bob"]
    [letter] = await DeadLetterRepository(memory_db).list()
    assert (letter.consumer, letter.core_id, letter.erasure_seq) == ("indexer", "alice", 1)
    assert letter.attempts == 3
    assert "index down" in letter.error


async def test_a_dead_lettered_erasure_is_handed_over_again_by_a_replay(memory_db: Any) -> None:
    await remember(memory_db, "alice", turns=1)
    indexer = Indexer(fail_erasures=3)
    await run_once(memory_db, indexer)
    await MemoryEraser(memory_db).forget("alice")
    await run_once(memory_db, indexer)

    report = await replay_dead_letters(memory_db, registry_of(indexer))

    assert len(report.delivered) == 1 and [e.core_id for e in indexer.erasures] == ["alice"]
    assert await DeadLetterRepository(memory_db).list() == []


async def test_a_consumer_that_finished_an_erasure_is_not_handed_it_again(memory_db: Any) -> None:
    """Another consumer's failure, then a restart, repeats the erasure only for the consumers missing it."""
    await remember(memory_db, "alice", turns=1)
    first, second = Indexer("first"), Indexer("second")
    await run_once(memory_db, first, second)
    await MemoryEraser(memory_db).forget("alice")
    await ListenerCheckpoints(memory_db, "default").mark_erasure_done_by(1, "first")  # as before a crash

    await run_once(memory_db, first, second)

    assert (len(first.erasures), len(second.erasures)) == (0, 1)


async def test_progress_written_on_an_erased_unit_during_the_erasure_is_removed_once_delivered(
    memory_db: Any,
) -> None:
    [result] = await remember(memory_db, "alice", turns=1)
    indexer = Indexer()
    await run_once(memory_db, indexer)
    await MemoryEraser(memory_db).forget("alice")
    await progress_on(memory_db, result)  # a delivery in flight during the erasure wrote it afterwards

    await run_once(memory_db, indexer)

    assert (
        await memory_db[CHECKPOINTS].count_documents({"unit_id": result.memory_unit.id, "kind": "unit"}) == 0
    )
    # what stays is the group's tombstone for the unit (ids only, removed by its TTL index): no progress
    [tombstone] = [d async for d in memory_db[CHECKPOINTS].find({"unit_id": result.memory_unit.id})]
    assert set(tombstone) == {"_id", "kind", "group", "unit_id", "erased_at"}
    assert tombstone["kind"] == "erased-unit"


async def test_the_print_consumer_prints_one_line_per_erasure(memory_db: Any) -> None:
    await remember(memory_db, "alice", turns=1)
    stream = io.StringIO()
    consumer = PrintConsumer(stream=stream)
    await run_once(memory_db, consumer)
    await MemoryEraser(memory_db).forget("alice")

    await run_once(memory_db, consumer)

    assert stream.getvalue().splitlines()[-1] == "erasure 1 (core) core alice: 1 unit(s), 1 slice(s) erased"
