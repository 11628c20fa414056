"""Appends that lose an optimistic race: they retry with a fresh time and get through.

A writer that lost a race used to retry with its first timestamp, older than the slice that beat it, so the
retry had to insert its slice before the winner's (one more read per attempt) and, under sustained
contention, kept losing to writers with fresh stamps until it gave up with ConflictError. A retry without a
caller-given time is stamped anew: the slice is created when it is stored.
"""

from __future__ import annotations

import asyncio
import types
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from partner_repo import ConflictError, MemoryUnitRepository, Message
from partner_repo.mongo import UNITS
from tests.unit.interference import interrupted_units


def turn(label: str) -> list[Message]:
    return [
        Message(role="user", content=f"{label} asks"),
        Message(role="assistant", content=f"{label} answers"),
    ]


@pytest.fixture
def ticking_clock(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The repository's clock advances one millisecond per reading, so every stamp is distinct."""
    ticks = iter(range(1_000_000))
    start = datetime(2025, 1, 1, tzinfo=UTC)

    def clock() -> datetime:
        return start + timedelta(milliseconds=next(ticks))

    monkeypatch.setattr("partner_repo.units._increment.utc_now", clock)
    monkeypatch.setattr("partner_repo.units._append.utc_now", clock)
    yield  # the clock is the repository's until the test ends


async def test_an_append_that_lost_a_race_is_stored_with_the_time_of_its_retry(
    memory_db: Any, ticking_clock: None
) -> None:
    other = MemoryUnitRepository(memory_db)
    await other.append("u", turn("first"), "first", core_id="c")
    loser = MemoryUnitRepository(
        interrupted_units(memory_db, lambda: other.append("u", turn("winner"), "winner", core_id="c"))
    )

    retried = await loser.append("u", turn("loser"), "loser", core_id="c")

    unit = await other.get("u")
    assert unit is not None
    assert [s.summary for s in unit.complete_slices()] == ["first", "winner", "loser"]
    winner = unit.complete_slices()[1]
    assert retried.created_at is not None and winner.created_at is not None
    assert retried.created_at > winner.created_at
    assert unit.conversation_messages[retried.start_index or 0 : retried.end_index or 0] == turn("loser")


async def test_an_append_with_a_given_time_keeps_it_when_retried(memory_db: Any, ticking_clock: None) -> None:
    other = MemoryUnitRepository(memory_db)
    await other.append("u", turn("first"), "first", core_id="c")
    loser = MemoryUnitRepository(
        interrupted_units(memory_db, lambda: other.append("u", turn("winner"), "winner", core_id="c"))
    )
    given = datetime(2024, 6, 1, 12, 0, tzinfo=UTC)

    retried = await loser.append("u", turn("loser"), "loser", core_id="c", created_at=given)

    assert retried.created_at == given
    unit = await other.get("u")
    assert unit is not None
    assert [s.summary for s in unit.complete_slices()] == ["loser", "first", "winner"]  # kept in time order


@pytest.mark.parametrize("shared", [True, False], ids=["one shared repository", "a repository each"])
async def test_writers_appending_repeatedly_to_one_unit_all_get_through(racy_db: Any, shared: bool) -> None:
    """A repository each is how writers in separate processes meet: only the version guard orders them."""
    first = MemoryUnitRepository(racy_db)
    await first.append("u", turn("start"), "start", core_id="c")

    async def writer(number: int) -> None:
        units = first if shared else MemoryUnitRepository(racy_db)
        for step in range(10):
            await units.append("u", turn(f"w{number}s{step}"), f"w{number}s{step}", core_id="c")

    await asyncio.gather(*(writer(n) for n in range(8)))

    unit = await first.get("u")
    assert unit is not None
    slices = unit.complete_slices()
    assert len(slices) == 1 + 8 * 10
    for piece in slices:
        assert unit.conversation_messages[piece.start_index or 0 : piece.end_index or 0] == turn(
            piece.summary
        )


async def test_appends_to_one_unit_through_one_repository_take_turns_instead_of_racing(racy_db: Any) -> None:
    units = MemoryUnitRepository(racy_db)
    await units.append("u", turn("start"), "start", core_id="c")
    collection = racy_db[UNITS]
    collection.calls.clear()

    await asyncio.gather(*(units.append("u", turn(f"t{n}"), f"t{n}", core_id="c") for n in range(32)))

    assert collection.calls.count("update_one") == 32  # one push each: none lost a race, none retried
    assert collection.calls.count("find_one") == 0  # each found the head the previous one left


async def test_a_slow_append_does_not_hold_up_appends_to_other_units(racy_db: Any) -> None:
    units = MemoryUnitRepository(racy_db)
    await units.append("slow", turn("start"), "start", core_id="c")
    await units.append("fast", turn("start"), "start", core_id="c")
    collection = racy_db[UNITS]
    release = asyncio.Event()
    push = collection.update_one

    async def update_one(query: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        if query.get("_id") == "slow":
            await release.wait()
        return await push(query, *args, **kwargs)

    collection.update_one = update_one
    slow = asyncio.create_task(units.append("slow", turn("late"), "late", core_id="c"))
    await asyncio.sleep(0)

    await asyncio.wait_for(units.append("fast", turn("quick"), "quick", core_id="c"), timeout=5)

    assert not slow.done()
    release.set()
    assert (await slow).summary == "late"


async def test_an_append_that_keeps_losing_gives_up_after_its_patience_and_writes_nothing(
    racy_db: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    units = MemoryUnitRepository(racy_db)
    await units.append("u", turn("start"), "start", core_id="c")
    before = await racy_db[UNITS].find_one({"_id": "u"})
    monkeypatch.setattr("partner_repo.units._append.APPEND_PATIENCE_S", 0.05)

    async def always_beaten(*args: Any, **kwargs: Any) -> Any:
        return types.SimpleNamespace(matched_count=0, modified_count=0)  # another writer got there first

    racy_db[UNITS].update_one = always_beaten
    with pytest.raises(ConflictError, match=r"lost the race for 0\.05 s"):
        await MemoryUnitRepository(racy_db).append("u", turn("late"), "late", core_id="c")

    assert await racy_db[UNITS].find_one({"_id": "u"}) == before


async def test_a_repository_that_lost_a_race_reads_before_pushing_while_the_unit_is_contended(
    racy_db: Any,
) -> None:
    """Otherwise the last winner, pushing to the head it remembers in one round trip, beats every writer that
    has to read first, round after round."""
    mine, theirs = MemoryUnitRepository(racy_db), MemoryUnitRepository(racy_db)
    await mine.append("u", turn("a"), "a", core_id="c")
    await theirs.append("u", turn("b"), "b", core_id="c")
    await mine.append("u", turn("c"), "c", core_id="c")  # its remembered head was stale: it lost once
    collection = racy_db[UNITS]
    collection.calls.clear()

    await mine.append("u", turn("d"), "d", core_id="c")

    assert collection.calls == ["find_one", "update_one"]


async def test_a_repository_goes_back_to_one_round_trip_once_the_contention_is_over(
    racy_db: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    mine, theirs = MemoryUnitRepository(racy_db), MemoryUnitRepository(racy_db)
    await mine.append("u", turn("a"), "a", core_id="c")
    await theirs.append("u", turn("b"), "b", core_id="c")
    await mine.append("u", turn("c"), "c", core_id="c")
    monkeypatch.setattr("partner_repo.units._heads.CONTENDED_S", 0.0)
    collection = racy_db[UNITS]
    collection.calls.clear()

    await mine.append("u", turn("d"), "d", core_id="c")

    assert collection.calls == ["update_one"]


async def test_an_append_cancelled_while_waiting_its_turn_does_not_block_the_unit(racy_db: Any) -> None:
    units = MemoryUnitRepository(racy_db)
    await units.append("u", turn("start"), "start", core_id="c")
    collection = racy_db[UNITS]
    release = asyncio.Event()
    push = collection.update_one

    async def held_update_one(*args: Any, **kwargs: Any) -> Any:
        await release.wait()
        return await push(*args, **kwargs)

    collection.update_one = held_update_one
    holding = asyncio.create_task(units.append("u", turn("first"), "first", core_id="c"))
    waiting = asyncio.create_task(units.append("u", turn("cancelled"), "cancelled", core_id="c"))
    await asyncio.sleep(0.01)
    waiting.cancel()
    release.set()
    await holding

    await asyncio.wait_for(units.append("u", turn("next"), "next", core_id="c"), timeout=5)

    unit = await units.get("u")
    assert unit is not None and [s.summary for s in unit.complete_slices()] == ["start", "first", "next"]
    assert waiting.cancelled()
