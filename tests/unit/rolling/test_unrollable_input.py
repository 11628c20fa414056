"""Input that could never be rolled into a unit is refused where it enters, writing nothing; and a roll
always stores something, so no message or summary can wedge a core (every later roll failing the same way)."""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

import pytest

from partner_repo import (
    MAX_MESSAGE_BYTES,
    MAX_SUMMARY_BYTES,
    InvalidInput,
    MemoryCoreRepository,
    MemorySlice,
    MemoryUnit,
    MemoryUnitRepository,
    Message,
    RollingConfig,
    RollingService,
)
from partner_repo.mongo import MAX_DOCUMENT_BYTES, bson_size
from tests.unit.rolling.support import T0, numbered

LONE_SURROGATE = "half an emoji: \ud83d"


def message_of(size: int, label: str = "x") -> Message:
    """A user message whose stored form, once recorded (with the ``at`` that ``record`` gives it), is exactly
    ``size`` bytes."""
    overhead = bson_size({"role": "user", "content": "", "at": T0})
    return Message(role="user", content=label * (size - overhead))


async def echo(messages: list[Message]) -> str:
    return f"{len(messages)} messages"


# -- refused at the boundary --------------------------------------------------------------------------------


async def test_a_message_no_unit_could_hold_is_refused_and_nothing_is_recorded(memory_db: Any) -> None:
    cores = MemoryCoreRepository(memory_db)

    with pytest.raises(InvalidInput, match="fit in a memory unit"):
        await cores.record("agent", [Message(role="user", content="x" * (17 * 1024 * 1024))])

    assert await cores.get("agent") is None


async def test_a_turn_larger_than_a_unit_could_hold_is_refused(memory_db: Any) -> None:
    cores = MemoryCoreRepository(memory_db)
    half = message_of(MAX_MESSAGE_BYTES // 2 + 1)

    with pytest.raises(InvalidInput, match="the turn is"):
        await cores.record("agent", [half, half])
    assert await cores.get("agent") is None


@pytest.mark.parametrize("where", ["record", "append"])
async def test_text_that_is_not_valid_unicode_is_refused_and_nothing_is_written(
    memory_db: Any, where: str
) -> None:
    bad = [Message(role="user", content=LONE_SURROGATE)]

    with pytest.raises(InvalidInput, match="not valid Unicode text"):
        if where == "record":
            await MemoryCoreRepository(memory_db).record("agent", bad)
        else:
            await MemoryUnitRepository(memory_db).append("u", bad, "s", core_id="c")

    assert await memory_db["memory_cores"].count_documents({}) == 0
    assert await memory_db["memory_units"].count_documents({}) == 0


async def test_a_summary_or_a_saved_unit_with_unencodable_text_is_refused(memory_db: Any) -> None:
    units = MemoryUnitRepository(memory_db)
    with pytest.raises(InvalidInput, match="summary"):
        await units.append("u", numbered(0, 2), LONE_SURROGATE, core_id="c")
    with pytest.raises(InvalidInput, match="message 0"):
        await units.save(
            MemoryUnit(
                id="v", core_id="c", conversation_messages=[Message(role="user", content=LONE_SURROGATE)]
            )
        )
    with pytest.raises(InvalidInput, match="slice 0"):
        await units.save(MemoryUnit(id="w", core_id="c", slices=[MemorySlice(summary=LONE_SURROGATE)]))
    assert await memory_db["memory_units"].count_documents({}) == 0


# -- a roll always stores something --------------------------------------------------------------------------


async def test_the_largest_accepted_message_rolls_into_a_unit_of_its_own(memory_db: Any) -> None:
    cores, units = MemoryCoreRepository(memory_db), MemoryUnitRepository(memory_db)
    largest = message_of(MAX_MESSAGE_BYTES)
    core = await cores.record("agent", [largest])
    await cores.record("agent", [Message(role="assistant", content="ok")])
    service = RollingService(memory_db, echo, RollingConfig(retain_divisor=0))

    first = await service.roll("agent", now=T0)
    second = await service.roll("agent", now=T0 + timedelta(seconds=1))

    assert first is not None and list(first.increment_messages) == [largest]
    assert first.memory_unit.id == core.memory_session_id
    assert second is not None and [m.content for m in second.increment_messages] == ["ok"]
    continuation = await units.get(second.memory_unit.id)
    assert continuation is not None and continuation.previous_unit_id == core.memory_session_id


async def test_a_window_larger_than_a_unit_rolls_in_parts_and_loses_nothing(memory_db: Any) -> None:
    """The embedded backend lets a window pass 16 MiB (a server refuses at 16 MiB); its rolls still fit."""
    cores, units = MemoryCoreRepository(memory_db), MemoryUnitRepository(memory_db)
    big = [message_of(6 * 1024 * 1024, label) for label in "abc"]
    for message in big:
        await cores.record("agent", [message], at=T0)
    service = RollingService(memory_db, echo, RollingConfig(retain_divisor=0))

    first = await service.roll("agent", now=T0)
    second = await service.roll("agent", now=T0 + timedelta(seconds=1))

    assert first is not None and second is not None
    assert list(first.increment_messages) + list(second.increment_messages) == big
    stored = [m for u in await units.list_units("agent") for m in u.conversation_messages]
    assert stored == big
    async for document in memory_db["memory_units"].find({}):
        assert bson_size(document) == document["size_bytes"] <= MAX_DOCUMENT_BYTES


async def test_a_huge_summary_is_stored_cut_and_the_roll_goes_on(
    memory_db: Any, caplog: pytest.LogCaptureFixture
) -> None:
    async def rambling(messages: list[Message]) -> str:
        return "é" * (10 * 1024 * 1024)

    await MemoryCoreRepository(memory_db).record("agent", numbered(0, 6), at=T0)
    with caplog.at_level(logging.WARNING, logger="partner_repo"):
        result = await RollingService(memory_db, rambling).roll("agent", now=T0)

    assert result is not None and len(result.summary.encode()) <= MAX_SUMMARY_BYTES
    assert set(result.summary) == {"é"}
    assert any("cut from" in r.getMessage() for r in caplog.records)


async def test_a_summary_with_unencodable_text_is_stored_repaired(memory_db: Any) -> None:
    async def broken(messages: list[Message]) -> str:
        return LONE_SURROGATE

    await MemoryCoreRepository(memory_db).record("agent", numbered(0, 6), at=T0)
    result = await RollingService(memory_db, broken).roll("agent", now=T0)

    assert result is not None and result.summary == "half an emoji: ?"


async def test_a_long_summary_near_the_limit_opens_a_continuation_instead_of_failing(memory_db: Any) -> None:
    cores, units = MemoryCoreRepository(memory_db), MemoryUnitRepository(memory_db)
    config = RollingConfig(unit_soft_limit_bytes=MAX_DOCUMENT_BYTES, retain_divisor=0)
    core = await cores.record("agent", [message_of(MAX_MESSAGE_BYTES - 50_000, "a")], at=T0)
    await cores.record("agent", [Message(role="assistant", content="noted")], at=T0)

    async def long_summary(messages: list[Message]) -> str:
        return "s" * (MAX_SUMMARY_BYTES - 1)

    service = RollingService(memory_db, long_summary, config)
    assert await service.roll("agent", now=T0) is not None
    await cores.record("agent", numbered(0, 2), at=T0)
    # the unit is ~15.9 MiB: counted with an empty summary the next slice fits, with the real one it does not

    result = await service.roll("agent", now=T0 + timedelta(seconds=1))

    assert result is not None and result.memory_unit.id != core.memory_session_id
    continuation = await units.get(result.memory_unit.id)
    assert continuation is not None and continuation.previous_unit_id == core.memory_session_id
