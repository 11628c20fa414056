"""Consumers written with plain ``def consume`` / ``def on_erased`` run in a worker thread, decided once at
registration (as summarizers are); anything that is neither a coroutine function nor a plain callable is
refused when it is registered, naming the consumer."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from partner_repo import (
    AfterRollingRegistry,
    DeadLetterRepository,
    Erasure,
    InvalidInput,
    MemoryEraser,
    MemoryUnitRepository,
    RollingResult,
    replay_dead_letters,
)
from tests.erasure_support import remember
from tests.unit.listener.support import append, quick_listener, registry_of


class SyncIndexer:
    """A consumer written for a blocking client: plain methods, which must not run on the event loop."""

    def __init__(self, name: str = "sync-indexer", *, fail: bool = False) -> None:
        self.name = name
        self.fail = fail
        self.slice_ids: list[str] = []
        self.erased: list[list[str]] = []
        self.threads: set[str] = set()

    def consume(self, result: RollingResult) -> None:
        self.threads.add(threading.current_thread().name)
        if self.fail:
            raise RuntimeError("index down")
        self.slice_ids.append(result.slice_id)

    def on_erased(self, erasure: Erasure) -> None:
        self.threads.add(threading.current_thread().name)
        self.erased.append(list(erasure.slice_ids))


async def test_a_sync_consume_receives_every_slice_in_a_worker_thread_and_nothing_is_dead_lettered(
    memory_db: Any,
) -> None:
    units = MemoryUnitRepository(memory_db)
    pieces = [await append(units, "u1", minutes=minute) for minute in range(3)]
    indexer = SyncIndexer()

    async with quick_listener(memory_db, registry_of(indexer)) as listener:
        await listener.flush()

    assert indexer.slice_ids == [piece.id for piece in pieces]
    assert await DeadLetterRepository(memory_db).list() == []
    assert threading.main_thread().name not in indexer.threads


async def test_a_sync_on_erased_is_told_of_the_erasure_in_a_worker_thread(memory_db: Any) -> None:
    results = await remember(memory_db, "alice", turns=2)
    indexer = SyncIndexer()
    async with quick_listener(memory_db, registry_of(indexer)) as listener:
        await listener.flush()
        await MemoryEraser(memory_db).forget("alice")
        await listener.flush()

    assert sorted(slice_id for erased in indexer.erased for slice_id in erased) == sorted(
        r.slice_id for r in results
    )
    assert threading.main_thread().name not in indexer.threads


async def test_the_registry_triggers_a_sync_consume_in_process(memory_db: Any) -> None:
    units = MemoryUnitRepository(memory_db)
    piece = await append(units, "u1")
    result = RollingResult.from_slice("u1", "core", piece, await units.slice_messages("u1", piece.id or ""))
    indexer = SyncIndexer()

    failed = await AfterRollingRegistry([indexer]).trigger(result)

    assert failed == [] and indexer.slice_ids == [piece.id]


async def test_a_dead_letter_of_a_sync_consumer_is_replayed_to_it(memory_db: Any) -> None:
    units = MemoryUnitRepository(memory_db)
    piece = await append(units, "u1")
    failing = SyncIndexer(fail=True)
    async with quick_listener(memory_db, registry_of(failing)) as listener:
        await listener.flush()
    assert [letter.slice_id for letter in await DeadLetterRepository(memory_db).list()] == [piece.id]

    healed = SyncIndexer()
    report = await replay_dead_letters(memory_db, registry_of(healed))

    assert [letter.slice_id for letter in report.delivered] == [piece.id]
    assert healed.slice_ids == [piece.id]


class NotCallable:
    name = "not-callable"
    consume = 42


class Generating:
    name = "generating"

    def consume(self, result: RollingResult) -> Iterator[None]:
        yield None


class AsyncGenerating:
    name = "async-generating"

    async def consume(self, result: RollingResult) -> AsyncIterator[None]:
        yield None


class ErasedNotCallable:
    name = "erased-not-callable"
    on_erased = "yes please"

    async def consume(self, result: RollingResult) -> None:
        return None


class ErasedGenerating:
    name = "erased-generating"

    async def consume(self, result: RollingResult) -> None:
        return None

    def on_erased(self, erasure: Erasure) -> Iterator[None]:
        yield None


@pytest.mark.parametrize(
    ("consumer", "method"),
    [
        (NotCallable(), "consume"),
        (Generating(), "consume"),
        (AsyncGenerating(), "consume"),
        (ErasedNotCallable(), "on_erased"),
        (ErasedGenerating(), "on_erased"),
    ],
)
def test_a_consume_or_on_erased_that_is_neither_async_nor_a_plain_callable_is_refused_naming_the_consumer(
    consumer: Any, method: str
) -> None:
    with pytest.raises(InvalidInput) as raised:
        AfterRollingRegistry().register(consumer)

    assert repr(consumer.name) in str(raised.value) and method in str(raised.value)


def test_a_consumer_that_sets_on_erased_to_none_has_no_on_erased() -> None:
    class Quiet:
        name = "quiet"
        on_erased = None

        def consume(self, result: RollingResult) -> None:
            return None

    registry = AfterRollingRegistry()
    registry.register(Quiet())

    assert len(registry) == 1
