"""The listener's polling path end to end on the in-memory backend (which has no change streams)."""

from __future__ import annotations

from typing import Any

from listener_support import Recorder, append, quick_listener, registry_of

from partner_repo import MemoryUnitRepository


async def test_the_in_memory_backend_is_polled(memory_db: Any) -> None:
    recorder = Recorder()
    async with quick_listener(memory_db, registry_of(recorder)) as listener:
        await listener.flush()
        assert listener.source == "polling"


async def test_a_slice_appended_while_running_is_delivered_as_a_rolling_result(memory_db: Any) -> None:
    units = MemoryUnitRepository(memory_db)
    recorder = Recorder()
    async with quick_listener(memory_db, registry_of(recorder)) as listener:
        piece = await append(units, "u1", count=3, rolling_size=5, retain_divisor=6)
        await listener.flush()

    (result,) = recorder.results
    assert result.slice_id == piece.id
    assert result.memory_slice == piece
    assert result.memory_unit.id == "u1" and result.memory_unit.core_id == "core"
    assert result.memory_unit.message_count == 3
    assert len(result.increment_messages) == 3
    assert (result.rolling_size, result.retain_divisor) == (5, 6)
