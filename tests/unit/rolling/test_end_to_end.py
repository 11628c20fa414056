"""End to end on the in-memory backend: a conversation recorded turn by turn, rolled as it goes."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from partner_repo import (
    MemoryCoreRepository,
    MemoryUnitRepository,
    RollingConfig,
    RollingService,
    resolve_chat_increment,
)
from tests.unit.rolling.support import T0, Clock, RecordingSummarizer, assert_slices_tile, numbered

TURN = 2


async def test_a_hundred_messages_in_turns_of_two_tile_the_unit_and_bound_the_window(memory_db: Any) -> None:
    config = RollingConfig()
    cores, units = MemoryCoreRepository(memory_db), MemoryUnitRepository(memory_db)
    clock = Clock(T0)
    service = RollingService(memory_db, RecordingSummarizer(), config, clock=clock)
    recorded = numbered(0, 100)
    session = await cores.session_id("agent")
    rolls = 0

    for start in range(0, len(recorded), TURN):
        clock.advance(timedelta(seconds=30))
        core = await cores.record("agent", recorded[start : start + TURN], at=clock.now)
        assert core.window_size <= config.trigger_limit + TURN
        rolls += await service.maybe_roll("agent") is not None
        assert len(await cores.snapshot("agent")) <= config.trigger_limit + TURN

    unit = await units.get(session)
    assert unit is not None
    assert rolls == len(unit.slices) >= 2
    assert_slices_tile(unit)
    assert unit.conversation_messages == recorded[: len(unit.conversation_messages)]
    times = [piece.created_at for piece in unit.complete_slices()]
    assert times == sorted(times)
    window = await cores.snapshot("agent")
    assert unit.conversation_messages + resolve_chat_increment(unit.conversation_messages, window) == recorded
    assert await cores.session_id("agent") == session


async def test_a_conversation_with_pauses_spreads_over_sessions_without_losing_a_message(
    memory_db: Any,
) -> None:
    config = RollingConfig(trigger_limit=10)
    cores, units = MemoryCoreRepository(memory_db), MemoryUnitRepository(memory_db)
    clock = Clock(T0)
    service = RollingService(memory_db, RecordingSummarizer(), config, clock=clock)
    recorded = numbered(0, 100)
    sessions: list[str] = []

    for start in range(0, len(recorded), TURN):
        pause = config.idle_after * 2 if start % 30 == 28 else timedelta(seconds=30)
        clock.advance(pause)
        await service.maybe_roll("agent")  # after a pause this is the idle roll
        core = await cores.record("agent", recorded[start : start + TURN], at=clock.now)
        if core.memory_session_id not in sessions:
            sessions.append(core.memory_session_id)
        await service.maybe_roll("agent")

    assert len(sessions) > 1
    stored: list[Any] = []
    for session in sessions:
        unit = await units.get(session)
        assert unit is not None
        assert_slices_tile(unit)
        stored = stored + resolve_chat_increment(stored, unit.conversation_messages)
    assert stored == recorded[: len(stored)]
    assert stored + resolve_chat_increment(stored, await cores.snapshot("agent")) == recorded
