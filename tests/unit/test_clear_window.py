"""MemoryEraser.clear_window: only the live chat window goes; the core, its session and its memory stay."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from test_erasure_concurrency import GatedSummarizer, roll_in_progress

from partner_repo import ErasureLog, MemoryCoreRepository, MemoryEraser, Message
from tests.erasure_support import T0, remember, unit_ids_of


async def test_clearing_empties_the_window_and_says_how_many_messages_it_held(memory_db: Any) -> None:
    cores = MemoryCoreRepository(memory_db)
    await cores.record("alice", [Message(role="user", content=f"m{n}") for n in range(3)])

    cleared = await MemoryEraser(memory_db).clear_window("alice")

    assert cleared == 3 and await cores.snapshot("alice") == []


async def test_clearing_sets_the_window_counter_to_zero_and_bumps_the_version(memory_db: Any) -> None:
    cores = MemoryCoreRepository(memory_db)
    before = await cores.record("alice", [Message(role="user", content="m")])

    await MemoryEraser(memory_db).clear_window("alice")

    stored = await memory_db["memory_cores"].find_one({"_id": "alice"})
    assert stored["window_size"] == 0 and stored["version"] > before.version


async def test_the_session_and_the_memory_stay(memory_db: Any) -> None:
    await remember(memory_db, "alice", turns=2)
    cores = MemoryCoreRepository(memory_db)
    await cores.record("alice", [Message(role="user", content="live")])
    before, units = await cores.get("alice"), await unit_ids_of(memory_db, "alice")

    await MemoryEraser(memory_db).clear_window("alice")

    after = await cores.get("alice")
    assert after is not None and before is not None and after.memory_session_id == before.memory_session_id
    assert await unit_ids_of(memory_db, "alice") == units
    assert await ErasureLog(memory_db).last_seq() == 0  # consumers never receive the window: not announced


async def test_clearing_waits_for_a_roll_in_progress_so_it_never_trims_what_comes_after_the_clear(
    memory_db: Any,
) -> None:
    summarizer = GatedSummarizer()
    roll = await roll_in_progress(memory_db, summarizer)
    clear = asyncio.create_task(MemoryEraser(memory_db).clear_window("alice"))
    await asyncio.sleep(0.1)
    assert not clear.done()

    summarizer.gate.set()
    await roll
    await clear
    cores = MemoryCoreRepository(memory_db)
    await cores.record("alice", [Message(role="user", content="after the clear")], at=T0 + timedelta(hours=2))

    assert [m.content for m in await cores.snapshot("alice")] == ["after the clear"]


async def test_clearing_a_core_that_does_not_exist_clears_nothing(memory_db: Any) -> None:
    assert await MemoryEraser(memory_db).clear_window("nobody") == 0
    assert await MemoryCoreRepository(memory_db).get("nobody") is None
