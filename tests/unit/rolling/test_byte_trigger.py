"""The byte trigger: a window whose messages take ``trigger_bytes`` rolls whatever its count, a one-message
window included, and a turn the window cannot take rolls the window first, so a core never stops taking
turns while each message fits in a unit."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from partner_repo import (
    InvalidInput,
    MemoryCoreRepository,
    MemoryUnitRepository,
    Message,
    RollingConfig,
    RollingService,
    WindowTooLarge,
)
from partner_repo.mongo import CORES, messages_bytes
from partner_repo.validation import Turn
from tests.unit.rolling.support import T0

MIB = 1024 * 1024


def big(label: str, size: int) -> Message:
    return Message(role="user", content=label * size)


async def echo(messages: list[Message]) -> str:
    return f"{len(messages)} message(s)"


async def stored(database: Any, core_id: str) -> list[Message]:
    units = await MemoryUnitRepository(database).list_units(core_id)
    return [message for unit in units for message in unit.conversation_messages]


async def test_record_counts_the_bytes_of_the_window(memory_db: Any) -> None:
    cores = MemoryCoreRepository(memory_db)
    turn = [Message(role="user", content="hello"), Message(role="assistant", content="hi there")]

    state = await cores.record("agent", turn, at=T0)

    assert state.window_bytes == messages_bytes(m.model_dump() for m in await cores.snapshot("agent"))


async def test_a_window_of_large_messages_rolls_at_every_turn_and_never_stops_taking_turns(
    memory_db: Any,
) -> None:
    """5 MB documents with trigger_limit 4: the 4th record failed before (the window passed 16 MiB)."""
    rolling = RollingService(memory_db, echo, RollingConfig(trigger_limit=4))
    documents = [big(label, 5 * MIB) for label in "abcdef"]

    results = [await rolling.record_and_roll("agent", [document], at=T0) for document in documents]

    assert all(result is not None for result in results)  # a one-message window of 5 MB rolls
    assert await stored(memory_db, "agent") == documents
    state = await MemoryCoreRepository(memory_db).window_state("agent")
    assert state is not None and state.window_size == 0 and state.window_bytes == 0


async def test_a_small_one_message_window_still_does_not_roll(memory_db: Any) -> None:
    rolling = RollingService(memory_db, echo, RollingConfig(trigger_bytes=MIB))
    await MemoryCoreRepository(memory_db).record("agent", [Message(role="user", content="hi")], at=T0)

    assert await rolling.roll("agent", now=T0) is None


async def test_a_turn_the_window_cannot_take_rolls_the_window_then_is_recorded(
    memory_db: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server refuses a window past 16 MiB; here a smaller limit stands in for it (in the one write every
    turn goes through)."""
    limit = 3 * MIB
    record_turn = MemoryCoreRepository.record_turn

    async def refusing(self: MemoryCoreRepository, turn: Turn) -> Any:
        state = await self.window_state(turn.core_id)
        adding = messages_bytes(m.model_dump() for m in turn.messages)
        if state is not None and (state.window_bytes or 0) + adding > limit:
            raise WindowTooLarge(turn.core_id)
        return await record_turn(self, turn)

    monkeypatch.setattr(MemoryCoreRepository, "record_turn", refusing)
    config = RollingConfig(trigger_limit=100, trigger_bytes=16 * MIB)  # neither trigger would roll it
    rolling = RollingService(memory_db, echo, config)
    first, second = big("a", 2 * MIB), big("b", 2 * MIB)
    await rolling.record_and_roll("agent", [first], at=T0)

    result = await rolling.record_and_roll("agent", [second], at=T0 + timedelta(seconds=1))

    assert result is not None and list(result.increment_messages) == [first]  # the one-message window rolled
    assert await stored(memory_db, "agent") == [first]
    assert await MemoryCoreRepository(memory_db).snapshot("agent") == [second]


async def test_a_core_written_before_the_byte_count_is_counted_exactly_from_its_next_roll(
    memory_db: Any,
) -> None:
    """The per-turn command does not ask for the count: a 0.3 core's earlier messages are missing from it
    until its next roll's trim sets it exactly (only the byte trigger sees less meanwhile)."""
    old = [{"role": "user", "content": f"old {n}"} for n in range(36)]
    await memory_db[CORES].insert_one(
        {
            "_id": "old",
            "memory_session_id": "s",
            "session_started_at": T0,
            "chat_messages": old,
            "window_size": 36,
        }
    )
    cores = MemoryCoreRepository(memory_db)

    state = await cores.record("old", [Message(role="user", content="y")], at=T0)
    assert state.window_size == 37 and state.window_bytes is not None
    assert state.window_bytes < messages_bytes(m.model_dump() for m in await cores.snapshot("old"))

    await RollingService(memory_db, echo).roll("old", now=T0)

    after = await cores.window_state("old")
    assert after is not None and after.window_bytes == messages_bytes(
        m.model_dump() for m in await cores.snapshot("old")
    )


def test_trigger_bytes_is_bounded_by_the_document_limit() -> None:
    with pytest.raises(InvalidInput, match="trigger_bytes"):
        RollingConfig(trigger_bytes=17 * MIB)
    with pytest.raises(InvalidInput, match="trigger_bytes"):
        RollingConfig(trigger_bytes=0)
