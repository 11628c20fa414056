"""A turn's time is a time a conversation's event may carry, or the turn is refused with one line and nothing
is written: a time the library could store but not compute with (Go's and .NET's zero time, which a host
sends for "unset") must never be stored and then answered as an internal error on every later turn."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from partner_repo import InvalidInput, MemoryCoreRepository, Message, RollingConfig, RollingService
from partner_repo.rolling import extractive_summarizer

pytestmark = pytest.mark.asyncio

ZERO_TIME = datetime(1, 1, 1, tzinfo=UTC)
"""``0001-01-01T00:00:00Z``: Go's ``time.Time{}`` and .NET's ``DateTime.MinValue``."""
BEFORE_YEAR_ONE_IN_UTC = datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=14)))
"""``0001-01-01T00:00:00+14:00``: no ``datetime`` holds it in UTC."""


def rolling(database: Any) -> RollingService:
    return RollingService(database, extractive_summarizer, RollingConfig(trigger_limit=4))


def turn(number: int) -> list[Message]:
    return [
        Message(role="user", content=f"question {number}"),
        Message(role="assistant", content=f"answer {number}"),
    ]


@pytest.mark.parametrize("at", [ZERO_TIME, BEFORE_YEAR_ONE_IN_UTC], ids=["zero time", "before year 1 in UTC"])
async def test_a_turn_at_a_time_no_conversation_has_is_refused_and_writes_nothing(
    database: Any, at: datetime
) -> None:
    service = rolling(database)

    with pytest.raises(InvalidInput, match="at 0001-01-01"):
        await service.record_and_roll("alice", turn(1), at=at)

    assert await MemoryCoreRepository(database).get("alice") is None


async def test_a_refused_zero_time_leaves_the_core_recording_and_rolling_as_before(database: Any) -> None:
    service = rolling(database)
    await service.record_and_roll("alice", turn(1))

    for number in range(2, 6):
        with pytest.raises(InvalidInput):
            await service.record_and_roll("alice", turn(number), at=ZERO_TIME)
    rolled = [await service.record_and_roll("alice", turn(number)) for number in (2, 3)]

    assert any(result is not None for result in rolled)
    contents = [message.content for message in await MemoryCoreRepository(database).snapshot("alice")]
    assert "question 4" not in contents and "question 1" not in contents  # rolled; refused turns never stored


async def test_a_roll_asked_for_at_the_zero_time_is_refused(database: Any) -> None:
    service = rolling(database)
    await service.record_and_roll("alice", turn(1))

    with pytest.raises(InvalidInput, match="now 0001-01-01"):
        await service.maybe_roll("alice", now=ZERO_TIME)


async def test_a_message_whose_own_time_is_before_year_1_in_utc_is_refused(database: Any) -> None:
    message = {"role": "user", "content": "hi", "at": BEFORE_YEAR_ONE_IN_UTC}

    with pytest.raises(InvalidInput, match="not a time in UTC"):
        await MemoryCoreRepository(database).record("alice", [message])

    assert await MemoryCoreRepository(database).get("alice") is None
