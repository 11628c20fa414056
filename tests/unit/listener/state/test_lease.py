"""One active listener per group: the others stand by, and take over when the holder stops or goes silent."""

from __future__ import annotations

from typing import Any

from partner_repo import ListenerCheckpoints, MemoryUnitRepository
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
