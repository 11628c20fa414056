"""A roll racing a forget never brings the erased memory back: forget takes the core's rolling lease first."""

from __future__ import annotations

import asyncio
import itertools
from datetime import timedelta
from typing import Any

import pytest

from partner_repo import (
    ConflictError,
    ErasureLog,
    MemoryCoreRepository,
    MemoryEraser,
    Message,
    RollingConfig,
    RollingService,
)
from tests.erasure_support import T0, remember, unit_ids_of
from tests.unit.erasure.support import GatedSummarizer, roll_in_progress


async def test_forget_waits_for_a_roll_in_progress_then_erases_what_it_stored(memory_db: Any) -> None:
    await remember(memory_db, "alice", turns=1)
    summarizer = GatedSummarizer()
    roll = await roll_in_progress(memory_db, summarizer)
    forget = asyncio.create_task(MemoryEraser(memory_db).forget("alice"))
    await asyncio.sleep(0.1)
    assert not forget.done()  # waiting for the lease

    summarizer.gate.set()
    rolled, report = await roll, await forget

    assert rolled is not None and report.units == 1
    assert rolled.slice_id in (await ErasureLog(memory_db).after(0))[0].slice_ids
    assert await unit_ids_of(memory_db, "alice") == set()
    assert await MemoryCoreRepository(memory_db).get("alice") is None


async def test_a_roll_that_starts_while_forget_holds_the_lease_stores_nothing(memory_db: Any) -> None:
    await remember(memory_db, "alice", turns=1)
    record = MemoryCoreRepository(memory_db).record
    await record("alice", [Message(role="user", content=f"late {n}") for n in range(6)])
    eraser = MemoryEraser(memory_db)
    original = eraser._plan  # the first step under the lease
    rolled: list[Any] = []

    async def plan_while_a_roll_tries(request: Any, core: Any) -> None:
        service = RollingService(memory_db, lambda m: "s", RollingConfig(trigger_limit=4))
        rolled.append(await service.roll("alice", now=T0 + timedelta(hours=2)))
        await original(request, core)

    eraser._plan = plan_while_a_roll_tries  # type: ignore[method-assign]
    await eraser.forget("alice")

    assert rolled == [None]
    assert await unit_ids_of(memory_db, "alice") == set()


async def test_forget_gives_up_on_a_live_roller_after_its_wait_and_erases_nothing(memory_db: Any) -> None:
    await remember(memory_db, "alice", turns=1)
    units = await unit_ids_of(memory_db, "alice")
    summarizer = GatedSummarizer()
    roll = await roll_in_progress(memory_db, summarizer)

    with pytest.raises(ConflictError, match="is being rolled"):
        await MemoryEraser(memory_db, lease_wait=timedelta(milliseconds=100)).forget("alice")

    assert await unit_ids_of(memory_db, "alice") == units
    summarizer.gate.set()
    await roll
    report = await MemoryEraser(memory_db).forget("alice")  # the next forget finishes it
    assert report.resumed and await unit_ids_of(memory_db, "alice") == set()


async def test_a_roller_that_fell_silent_loses_the_core_and_stores_nothing_afterwards(memory_db: Any) -> None:
    """Forget takes over the lease of a roller silent for its whole ttl (watched on the eraser's clock); when
    the roller wakes up, its lease is gone and the roll is abandoned: the erased memory stays erased."""
    await remember(memory_db, "alice", turns=1)
    summarizer = GatedSummarizer()
    roll = await roll_in_progress(memory_db, summarizer)
    ticks = itertools.count(step=30.0)  # every look at the lease is 30 s later on the eraser's clock

    report = await MemoryEraser(memory_db, monotonic=lambda: next(ticks)).forget("alice")
    summarizer.gate.set()

    assert report.units == 1 and await roll is None
    assert await unit_ids_of(memory_db, "alice") == set()
    assert await MemoryCoreRepository(memory_db).get("alice") is None


async def test_recording_after_forget_starts_a_new_core(memory_db: Any) -> None:
    [old] = await remember(memory_db, "alice", turns=1)
    await MemoryEraser(memory_db).forget("alice")

    core = await MemoryCoreRepository(memory_db).record("alice", [{"role": "user", "content": "hi again"}])

    assert core.memory_session_id != old.memory_unit.id and core.window_size == 1
