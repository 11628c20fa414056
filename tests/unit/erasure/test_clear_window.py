"""MemoryEraser.clear_window: only the live chat window goes; the core, its session and its memory stay."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest

from partner_repo import ConflictError, ErasureLog, MemoryCoreRepository, MemoryEraser, Message
from tests.erasure_support import T0, remember, unit_ids_of
from tests.unit.erasure.support import GatedSummarizer, roll_in_progress


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


async def test_a_clear_whose_hold_is_taken_over_after_its_mark_starts_again_and_empties_what_it_marked(
    memory_db: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    cores = MemoryCoreRepository(memory_db)
    await cores.record("alice", [Message(role="user", content=f"m{n}") for n in range(3)])
    real_clear = MemoryCoreRepository.clear_window
    taken_over = [True]

    async def first_taken_over(self: MemoryCoreRepository, core_id: str, *, lease_owner: str) -> int | None:
        if taken_over.pop() if taken_over else False:
            return None  # a roller took the hold over between the mark and the emptying write
        return await real_clear(self, core_id, lease_owner=lease_owner)

    monkeypatch.setattr(MemoryCoreRepository, "clear_window", first_taken_over)

    cleared = await MemoryEraser(memory_db).clear_window("alice")

    assert cleared == 3 and await cores.snapshot("alice") == []


async def test_a_clear_taken_over_every_time_says_to_clear_again(
    memory_db: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    await MemoryCoreRepository(memory_db).record("alice", [Message(role="user", content="m")])

    async def always_taken_over(self: MemoryCoreRepository, core_id: str, *, lease_owner: str) -> int | None:
        return None

    monkeypatch.setattr(MemoryCoreRepository, "clear_window", always_taken_over)

    with pytest.raises(ConflictError, match="3 times; clear it again"):
        await MemoryEraser(memory_db).clear_window("alice")
