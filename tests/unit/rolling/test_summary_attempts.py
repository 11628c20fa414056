"""A roll asks its summarizer with a timeout and a few attempts; after the last failure Partner's placeholder
is stored (the messages are never lost) and the slice is marked ``unsummarized``."""

from __future__ import annotations

import asyncio
import threading
import time
from datetime import timedelta
from typing import Any

import pytest

from partner_repo import (
    SUMMARY_ON_EMPTY,
    SUMMARY_ON_EXCEPTION,
    InvalidInput,
    MemoryCoreRepository,
    MemoryUnitRepository,
    Message,
    RollingConfig,
    RollingService,
)
from partner_repo.mongo import UNITS
from tests.unit.rolling.support import T0, numbered

QUICK = {"summarize_backoff": timedelta(0)}


class Flaky:
    """Fails its first ``failures`` calls, then summarizes."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.calls = 0

    async def __call__(self, messages: list[Message]) -> str:
        self.calls += 1
        if self.calls <= self.failures:
            raise RuntimeError("rate limited")
        return f"{len(messages)} messages"


async def roll_with(database: Any, summarizer: Any, **config: Any) -> Any:
    await MemoryCoreRepository(database).record("agent", numbered(0, 4), at=T0)
    service = RollingService(database, summarizer, RollingConfig(**{**QUICK, **config}))
    return await service.roll("agent", now=T0)


async def stored_slice(database: Any, result: Any) -> dict[str, Any]:
    document = await database[UNITS].find_one({"_id": result.memory_unit.id})
    (piece,) = document["slices"]
    return dict(piece)


async def test_a_summarizer_that_fails_is_tried_again_and_its_summary_stored(memory_db: Any) -> None:
    summarizer = Flaky(failures=2)

    result = await roll_with(memory_db, summarizer, summarize_attempts=3)

    assert summarizer.calls == 3
    assert result.summary == "4 messages" and not result.unsummarized
    assert "unsummarized" not in await stored_slice(memory_db, result)


async def test_after_the_last_attempt_the_placeholder_is_stored_marked_unsummarized(database: Any) -> None:
    summarizer = Flaky(failures=99)

    result = await roll_with(database, summarizer, summarize_attempts=4)

    assert summarizer.calls == 4
    assert result.summary == SUMMARY_ON_EXCEPTION and result.unsummarized and result.revision == 0
    stored = await stored_slice(database, result)
    assert stored["summary"] == SUMMARY_ON_EXCEPTION and stored["unsummarized"] is True
    assert "revision" not in stored
    units = MemoryUnitRepository(database)
    assert await units.messages_between(result.memory_unit.id, 0, 4) == numbered(0, 4)  # never lost


async def test_a_plain_slice_is_stored_without_a_mark_or_a_revision(memory_db: Any) -> None:
    result = await roll_with(memory_db, Flaky(failures=0))

    stored = await stored_slice(memory_db, result)
    assert "unsummarized" not in stored and "revision" not in stored


async def test_a_hanging_async_summarizer_times_out_and_the_roll_goes_on(memory_db: Any) -> None:
    cancelled: list[bool] = []

    async def never_returns(messages: list[Message]) -> str:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.append(True)
            raise
        return "unreachable"

    result = await roll_with(
        memory_db, never_returns, summarize_timeout=timedelta(milliseconds=20), summarize_attempts=2
    )

    assert result.summary == SUMMARY_ON_EXCEPTION and result.unsummarized
    assert cancelled == [True, True]  # an async call is cancelled at its timeout
    assert await MemoryCoreRepository(memory_db).snapshot("agent") == []  # rolled all the same


async def test_a_hanging_sync_summarizer_times_out_while_its_thread_runs_on(memory_db: Any) -> None:
    release = threading.Event()
    started: list[int] = []

    def blocks(messages: list[Message]) -> str:
        started.append(threading.get_ident())
        release.wait(timeout=10)
        return "too late"

    try:
        result = await roll_with(
            memory_db, blocks, summarize_timeout=timedelta(milliseconds=20), summarize_attempts=2
        )
    finally:
        release.set()  # the abandoned calls return now; their results are dropped

    assert result.summary == SUMMARY_ON_EXCEPTION and result.unsummarized
    assert len(started) == 2 and threading.get_ident() not in started


async def test_waits_between_attempts_grow_from_the_backoff(memory_db: Any) -> None:
    started = time.monotonic()

    result = await roll_with(
        memory_db, Flaky(failures=99), summarize_attempts=3, summarize_backoff=timedelta(milliseconds=40)
    )

    waited = time.monotonic() - started
    assert result.unsummarized
    assert waited >= (0.040 + 0.080) * 0.75  # 40 ms, then 80 ms, each within +-25 %


def test_the_longest_a_roll_waits_for_its_summary_is_bounded() -> None:
    config = RollingConfig()

    assert config.summarize_timeout == timedelta(minutes=2) and config.summarize_attempts == 3
    assert timedelta(minutes=6) < config.summarize_budget < timedelta(minutes=6, seconds=5)
    assert RollingConfig(summarize_backoff=timedelta(hours=1)).summarize_delay(9) == timedelta(seconds=30)


async def test_an_empty_answer_is_stored_as_partners_empty_summary_without_retrying(memory_db: Any) -> None:
    calls: list[int] = []

    async def says_nothing(messages: list[Message]) -> str:
        calls.append(1)
        return "  "

    result = await roll_with(memory_db, says_nothing)

    assert calls == [1] and result.summary == SUMMARY_ON_EMPTY and not result.unsummarized


@pytest.mark.parametrize(
    "config",
    [
        {"summarize_attempts": 0},
        {"summarize_attempts": 11},
        {"summarize_attempts": True},
        {"summarize_timeout": timedelta(0)},
        {"summarize_timeout": 5},
        {"summarize_backoff": timedelta(seconds=-1)},
    ],
)
def test_bad_summarize_settings_are_refused(config: dict[str, Any]) -> None:
    with pytest.raises(InvalidInput):
        RollingConfig(**config)
