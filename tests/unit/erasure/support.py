"""What the erasure unit tests share beyond ``tests/erasure_support.py``: a roll held inside its summarizer,
the lease still its own, for an erasure to race."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from partner_repo import MemoryCoreRepository, Message, RollingConfig, RollingService
from tests.erasure_support import T0


class GatedSummarizer:
    """Summarizes once ``gate`` is set; ``started`` is set when a roll is inside it (holding the lease)."""

    def __init__(self) -> None:
        self.gate = asyncio.Event()
        self.started = asyncio.Event()

    async def __call__(self, messages: list[Message]) -> str:
        self.started.set()
        await self.gate.wait()
        return "summary"


async def roll_in_progress(database: Any, summarizer: GatedSummarizer) -> asyncio.Task[Any]:
    """A roll of ``alice`` (six new messages) that holds the core's lease inside its summarizer."""
    window = [Message(role="user", content=f"new secret {n}") for n in range(6)]
    await MemoryCoreRepository(database).record("alice", window, at=T0 + timedelta(hours=1))
    service = RollingService(database, summarizer, RollingConfig(trigger_limit=4))
    roll = asyncio.create_task(service.roll("alice", now=T0 + timedelta(hours=1)))
    await summarizer.started.wait()
    return roll
