"""A summarizer may be a plain function: it runs off the event loop, and its text is stored as given.

Before, a ``lambda messages: "..."`` was accepted and every roll silently stored the exception summary.
"""

from __future__ import annotations

import asyncio
import threading
from datetime import timedelta
from functools import partial
from typing import Any

import pytest

from partner_repo import (
    SUMMARY_ON_EXCEPTION,
    InvalidInput,
    MemoryCoreRepository,
    MemoryUnitRepository,
    Message,
    RollingConfig,
    RollingService,
)
from partner_repo.rolling._summarizer import as_async_summarizer
from tests.unit.rolling.support import T0, numbered


async def stored_summary(database: Any, service: RollingService) -> str:
    """Record eight messages on core ``agent``, roll them, and return the summary the slice stored."""
    core = await MemoryCoreRepository(database).record("agent", numbered(0, 8), at=T0)
    result = await service.roll("agent", now=T0 + timedelta(minutes=1))
    assert result is not None
    unit = await MemoryUnitRepository(database).get(core.memory_session_id)
    assert unit is not None
    [piece] = unit.complete_slices()
    return piece.summary


async def test_a_lambda_summarizer_gives_its_own_text(memory_db: Any) -> None:
    service = RollingService(memory_db, lambda messages: f"{len(messages)} messages")

    assert await stored_summary(memory_db, service) == "8 messages"


async def test_a_sync_summarizer_runs_outside_the_event_loop_thread(memory_db: Any) -> None:
    threads: list[int] = []

    def summarize(messages: list[Message]) -> str:
        threads.append(threading.get_ident())
        return "summary"

    await stored_summary(memory_db, RollingService(memory_db, summarize))

    assert threads and threads[0] != threading.get_ident()


async def test_the_lease_is_renewed_while_a_blocking_sync_summarizer_runs(memory_db: Any) -> None:
    """A blocking call in a worker thread leaves the loop free for the lease keeper (every third of the
    lease duration)."""
    config = RollingConfig(trigger_limit=4, lease_duration=timedelta(milliseconds=60))
    beats: list[int] = []

    def summarize(messages: list[Message]) -> str:
        threading.Event().wait(0.2)  # blocks its thread, not the loop
        return "slow"

    service = RollingService(memory_db, summarize, config)
    cores = MemoryCoreRepository(memory_db)
    await cores.record("agent", numbered(0, 8), at=T0)
    roll = asyncio.create_task(service.roll("agent", now=T0))
    while not roll.done():
        core = await cores.get("agent")
        assert core is not None
        beats.append(core.lease_beat)
        await asyncio.sleep(0.02)

    assert (await roll) is not None
    assert max(beats) - min(beats) >= 2  # renewed while the summarizer blocked


async def test_a_sync_callable_returning_a_coroutine_has_it_awaited(memory_db: Any) -> None:
    async def llm(messages: list[Message]) -> str:
        return f"llm on {messages[0].content}"

    service = RollingService(memory_db, lambda messages: llm(messages))

    assert await stored_summary(memory_db, service) == "llm on message 0"


async def test_a_callable_object_with_an_async_call_is_awaited_on_the_loop(memory_db: Any) -> None:
    threads: list[int] = []

    class Summarizer:
        async def __call__(self, messages: list[Message]) -> str:
            threads.append(threading.get_ident())
            return "object"

    assert await stored_summary(memory_db, RollingService(memory_db, Summarizer())) == "object"
    assert threads == [threading.get_ident()]


async def test_a_partial_of_an_async_function_is_awaited_on_the_loop(memory_db: Any) -> None:
    async def summarize(prefix: str, messages: list[Message]) -> str:
        return f"{prefix} {len(messages)}"

    assert await stored_summary(memory_db, RollingService(memory_db, partial(summarize, "p"))) == "p 8"


async def test_a_sync_summarizer_that_raises_gives_the_exception_summary(memory_db: Any) -> None:
    def summarize(messages: list[Message]) -> str:
        raise RuntimeError("model down")

    assert await stored_summary(memory_db, RollingService(memory_db, summarize)) == SUMMARY_ON_EXCEPTION


def test_the_form_is_decided_once_when_the_service_is_built() -> None:
    async def summarize(messages: list[Message]) -> str:
        return "async"

    assert as_async_summarizer(summarize) is summarize  # async: used as given, no wrapper per roll


@pytest.mark.parametrize("value", ["not callable", 42, None])
def test_what_is_not_callable_is_refused_at_construction(memory_db: Any, value: Any) -> None:
    with pytest.raises(InvalidInput, match="summarizer must be callable"):
        RollingService(memory_db, value)
