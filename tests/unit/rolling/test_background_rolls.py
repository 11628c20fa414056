"""``record_and_roll_later``: a turn is answered at once and its roll runs in the background, bounded, one
per core, errors logged, drained (or left safely in the window) at shutdown."""

from __future__ import annotations

import asyncio
import logging
import re
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from partner_repo import (
    InvalidInput,
    MemoryCoreRepository,
    MemoryUnitRepository,
    Message,
    RollingConfig,
    RollingResult,
    RollingService,
)
from tests.unit.rolling.support import T0, numbered

CONFIG = RollingConfig(trigger_limit=4, retain_divisor=4)
DOCS = Path(__file__).resolve().parents[3] / "docs" / "rolling.md"


class GatedSummarizer:
    """Summarizes once released; counts how many summaries run at once."""

    def __init__(self) -> None:
        self.gate = asyncio.Event()
        self.running = 0
        self.most = 0
        self.calls = 0

    async def __call__(self, messages: list[Message]) -> str:
        self.calls += 1
        self.running += 1
        self.most = max(self.most, self.running)
        try:
            await self.gate.wait()
            return f"{len(messages)} messages"
        finally:
            self.running -= 1


async def stored(database: Any, core_id: str) -> list[Message]:
    units = await MemoryUnitRepository(database).list_units(core_id)
    return [message for unit in units for message in unit.conversation_messages]


async def test_a_turn_is_answered_before_its_roll_is_summarized(memory_db: Any) -> None:
    summarizer = GatedSummarizer()
    async with RollingService(memory_db, summarizer, CONFIG) as rolling:
        state = await rolling.record_and_roll_later("agent", numbered(0, 4), at=T0)

        assert state.window_size == 4  # answered, while the roll waits for its summary
        await asyncio.sleep(0.01)
        assert summarizer.running == 1 and await stored(memory_db, "agent") == []
        summarizer.gate.set()
    assert await stored(memory_db, "agent") == numbered(0, 4)  # leaving the block drained it


async def test_background_rolls_run_at_most_the_configured_number_at_once(memory_db: Any) -> None:
    summarizer = GatedSummarizer()
    async with RollingService(memory_db, summarizer, CONFIG, background_concurrency=2) as rolling:
        for core in range(5):
            await rolling.record_and_roll_later(f"agent-{core}", numbered(0, 4), at=T0)
        await asyncio.sleep(0.05)
        assert summarizer.running == 2
        summarizer.gate.set()
    assert summarizer.most == 2 and summarizer.calls == 5
    for core in range(5):
        assert await stored(memory_db, f"agent-{core}") == numbered(0, 4)


async def test_a_turn_recorded_while_its_core_rolls_is_rolled_after_it(memory_db: Any) -> None:
    summarizer = GatedSummarizer()
    async with RollingService(memory_db, summarizer, CONFIG) as rolling:
        await rolling.record_and_roll_later("agent", numbered(0, 4), at=T0)
        await asyncio.sleep(0.01)
        await rolling.record_and_roll_later("agent", numbered(4, 8), at=T0)  # due again: it still rolls
        assert summarizer.running == 1
        summarizer.gate.set()
    assert summarizer.most == 1  # one roll per core at a time
    assert await stored(memory_db, "agent") == numbered(0, 8)


async def test_a_failing_background_roll_is_logged_and_the_window_kept(
    memory_db: Any, caplog: pytest.LogCaptureFixture
) -> None:
    async def broken(messages: list[Message]) -> str:
        raise RuntimeError("the LLM is down")

    async def keep_failing(core_id: str, at: Any, recorded: Any) -> RollingResult | None:
        raise RuntimeError("the database blinked")

    caplog.set_level(logging.ERROR)
    async with RollingService(memory_db, broken, CONFIG) as rolling:
        rolling._background._roll = keep_failing  # a roll that raises, whatever the cause
        await rolling.record_and_roll_later("agent", numbered(0, 4), at=T0)
    assert "core 'agent': background roll failed" in caplog.text and "the database blinked" in caplog.text
    assert await MemoryCoreRepository(memory_db).snapshot("agent") == numbered(0, 4)


async def test_shutdown_cancels_rolls_past_the_grace_and_their_messages_stay_in_the_window(
    memory_db: Any,
) -> None:
    summarizer = GatedSummarizer()  # never released
    rolling = RollingService(memory_db, summarizer, CONFIG)
    await rolling.record_and_roll_later("agent", numbered(0, 4), at=T0)
    await asyncio.sleep(0.01)

    assert await rolling.aclose(grace=timedelta(milliseconds=20)) == 1

    assert await MemoryCoreRepository(memory_db).snapshot("agent") == numbered(0, 4)
    core = await MemoryCoreRepository(memory_db).get("agent")
    assert core is not None and core.lease_owner is None  # given back: the next roller need not wait
    done = RollingService(memory_db, lambda messages: "later", CONFIG)
    assert await done.roll("agent", now=T0 + timedelta(seconds=1)) is not None


async def test_a_closed_service_refuses_background_rolls(memory_db: Any) -> None:
    rolling = RollingService(memory_db, lambda messages: "s", CONFIG)
    await rolling.aclose()

    with pytest.raises(InvalidInput, match="shutting down"):
        await rolling.record_and_roll_later("agent", numbered(0, 4), at=T0)


async def test_on_rolled_receives_every_background_result(memory_db: Any) -> None:
    results: list[RollingResult] = []
    async with RollingService(memory_db, lambda messages: "s", CONFIG, on_rolled=results.append) as rolling:
        await rolling.record_and_roll_later("agent", numbered(0, 4), at=T0)
    assert [list(result.increment_messages) for result in results] == [numbered(0, 4)]


def fastapi_example() -> str:
    text = DOCS.read_text(encoding="utf-8")
    marker = text.index("<!-- fastapi-lifespan-example")
    block = re.search(r"```python\n(.*?)```", text[marker:], re.DOTALL)
    assert block is not None
    return block.group(1)


def test_the_fastapi_lifespan_example_answers_turns_and_drains_its_rolls_at_shutdown() -> None:
    from fastapi.testclient import TestClient

    namespace: dict[str, Any] = {"MONGODB_URI": None}  # None: the embedded in-memory database
    exec(compile(fastapi_example(), str(DOCS), "exec"), namespace)
    app = namespace["app"]

    with TestClient(app) as client:
        answers = [
            client.post("/agents/a1/turns", json={"question": f"q{n}", "answer": f"a{n}"}).json()
            for n in range(20)
        ]
        rolling = app.state.rolling
    assert answers[0] == {"window_size": 2}
    assert rolling._background.pending == 0 and rolling._background._closed  # drained when the app stopped
