"""One active listener per group: the others stand by, and take over when the holder stops or goes silent."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from partner_repo import GroupLeaseLost, ListenerCheckpoints, MemoryUnitRepository
from tests.conftest import until
from tests.unit.listener.support import Recorder, append, quick_listener, registry_of

TTL = 0.08  # seconds: the holder beats every 20 ms


async def test_a_second_listener_of_a_group_stands_by_while_the_first_delivers(memory_db: Any) -> None:
    units = MemoryUnitRepository(memory_db)
    first, second = Recorder("consumer"), Recorder("consumer")
    holder = quick_listener(memory_db, registry_of(first), lease_ttl=TTL)
    standby = quick_listener(memory_db, registry_of(second), lease_ttl=TTL)
    async with holder, standby:
        assert holder.active and not standby.active
        piece = await append(units, "u1")
        await holder.flush()
        await standby.flush()
        assert standby.source is None

    assert first.slice_ids == [piece.id]
    assert second.results == []


async def test_the_standby_takes_over_when_the_holder_stops_and_delivers_only_what_follows(
    memory_db: Any,
) -> None:
    units = MemoryUnitRepository(memory_db)
    first, second = Recorder("consumer"), Recorder("consumer")
    holder = quick_listener(memory_db, registry_of(first), lease_ttl=TTL)
    standby = quick_listener(memory_db, registry_of(second), lease_ttl=TTL)
    await holder.start()
    await standby.start()
    delivered_by_first = await append(units, "u1")
    await holder.flush()
    await holder.stop()

    await until(lambda: standby.active)
    after = await append(units, "u1")
    await standby.flush()
    await standby.stop()

    assert first.slice_ids == [delivered_by_first.id]
    assert second.slice_ids == [after.id]


async def test_a_holder_that_went_silent_is_taken_over_after_the_lease_ttl(memory_db: Any) -> None:
    units = MemoryUnitRepository(memory_db)
    checkpoints = ListenerCheckpoints(memory_db, "default")
    await checkpoints.open_group("beginning")
    assert await checkpoints.claim("crashed-process")  # and it never beats again
    recorder = Recorder()
    async with quick_listener(memory_db, registry_of(recorder), lease_ttl=TTL) as listener:
        assert not listener.active
        piece = await append(units, "u1")
        await until(lambda: listener.active)
        await listener.flush()

    assert recorder.slice_ids == [piece.id]
    assert (await checkpoints.lease_state())[0] is None  # released on stop


async def test_a_holder_that_lost_its_lease_stops_reading_until_it_gets_it_back(memory_db: Any) -> None:
    units = MemoryUnitRepository(memory_db)
    checkpoints = ListenerCheckpoints(memory_db, "default")
    recorder = Recorder()
    async with quick_listener(memory_db, registry_of(recorder), lease_ttl=TTL) as listener:
        assert listener.active
        owner, beat = await checkpoints.lease_state()
        assert owner == listener.owner
        assert await checkpoints.take_over("intruder", owner, beat)
        await until(lambda: not listener.active and listener.source is None)

        await checkpoints.release("intruder")
        await until(lambda: listener.active)
        piece = await append(units, "u1")
        await listener.flush()

    assert recorder.slice_ids == [piece.id]


class HeldReads:
    """A database whose reads of the units wait at :attr:`gate` while :attr:`holding`: a polling pass stalls
    in its read, as a process paused mid-pass would."""

    def __init__(self, database: Any) -> None:
        self._database = database
        self.holding = False
        self.gate = asyncio.Event()

    def __getitem__(self, name: str) -> Any:
        collection = self._database[name]
        return _HeldCollection(collection, self) if name == "memory_units" else collection

    def __getattr__(self, name: str) -> Any:
        return getattr(self._database, name)

    async def pass_(self) -> None:
        if self.holding:
            await self.gate.wait()


class _HeldCollection:
    def __init__(self, collection: Any, held: HeldReads) -> None:
        self._collection = collection
        self._held = held

    def __getattr__(self, name: str) -> Any:
        return getattr(self._collection, name)

    def with_options(self, **options: Any) -> Any:
        # as the library reads it (units/_feed.py, ``majority``): another kind of collection back (the Motor
        # stack's mongomock-motor hands back its synchronous core) means the options are not taken
        chosen = self._collection.with_options(**options)
        return _HeldCollection(chosen, self._held) if type(chosen) is type(self._collection) else self

    def find(self, *args: Any, **kwargs: Any) -> Any:
        return _HeldCursor(self._collection.find(*args, **kwargs), self._held)

    async def aggregate(self, *args: Any, **kwargs: Any) -> Any:
        await self._held.pass_()
        cursor = self._collection.aggregate(*args, **kwargs)
        return await cursor if asyncio.iscoroutine(cursor) else cursor


class _HeldCursor:
    def __init__(self, cursor: Any, held: HeldReads) -> None:
        self._cursor = cursor
        self._held = held

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cursor, name)

    async def to_list(self, length: int | None = None) -> list[Any]:
        await self._held.pass_()
        return list(await self._cursor.to_list(length))

    async def __aiter__(self) -> Any:
        await self._held.pass_()
        async for document in self._cursor:
            yield document


async def test_a_flush_whose_listener_loses_its_lease_meanwhile_says_so_and_is_not_cancelled(
    memory_db: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """The model check's long run (issue 37): a listener whose lease lapsed while it was stalled ended its
    ``flush()`` in a bare ``CancelledError`` (the pass the flush asked for was cancelled with its source),
    although nobody had cancelled the caller, who reads that as "I was cancelled" and stops."""
    checkpoints = ListenerCheckpoints(memory_db, "default")
    held = HeldReads(memory_db)
    async with quick_listener(held, registry_of(Recorder()), lease_ttl=TTL) as listener:
        await listener.flush()
        held.holding = True
        await asyncio.sleep(0.05)  # the next pass is held in its read of the units
        flushing = asyncio.ensure_future(listener.flush())  # asks for the pass after it
        await asyncio.sleep(0.05)
        owner, beat = await checkpoints.lease_state()
        assert await checkpoints.take_over("intruder", owner, beat)  # as a standby after a stall past the ttl
        await until(lambda: "lost the lease to listener intruder" in caplog.text)
        held.gate.set()

        with pytest.raises(GroupLeaseLost, match="lease lapsed while it flushed"):
            await flushing
