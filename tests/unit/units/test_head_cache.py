"""The heads a repository remembers: its next append to a unit skips the head read, and is never wrong.

The wire tests count the round trips; these check, on the embedded database, that a remembered head which
went stale (another repository wrote, or the unit was deleted and created again) never misplaces messages.
"""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import pytest

from partner_repo import InvalidInput, MemoryUnit, MemoryUnitRepository, Message


def turn(label: str, n: int = 2) -> list[Message]:
    return [Message(role="user", content=f"{label} {i}") for i in range(n)]


def intervals(unit: MemoryUnit) -> list[tuple[int, int]]:
    return [(s.start_index or 0, s.end_index or 0) for s in unit.slices]


async def test_appends_alternating_between_two_repositories_stay_contiguous(memory_db: Any) -> None:
    first, second = MemoryUnitRepository(memory_db), MemoryUnitRepository(memory_db)
    for number in range(6):
        writer = first if number % 2 == 0 else second
        await writer.append("u", turn(f"turn {number}"), f"s{number}", core_id="c")

    unit = await first.get("u")
    assert unit is not None
    assert intervals(unit) == [(i * 2, i * 2 + 2) for i in range(6)]
    assert [m.content for m in unit.conversation_messages][-2:] == ["turn 5 0", "turn 5 1"]


async def test_a_unit_created_again_at_the_same_version_is_appended_after_its_new_messages(
    memory_db: Any,
) -> None:
    remembering, other = MemoryUnitRepository(memory_db), MemoryUnitRepository(memory_db)
    await remembering.append("u", turn("old", 2), "old", core_id="c")  # remembers version 1, 2 messages
    await other.delete("u")
    await other.append("u", turn("new", 3), "new", core_id="c")  # version 1 again, 3 messages

    await remembering.append("u", turn("next", 2), "next", core_id="c")

    unit = await other.get("u")
    assert unit is not None
    assert intervals(unit) == [(0, 3), (3, 5)]
    assert unit.version == 2


async def test_concurrent_appends_through_one_remembering_repository_lose_nothing(racy_db: Any) -> None:
    units = MemoryUnitRepository(racy_db)
    await units.append("u", turn("seed"), "seed", core_id="c")

    await asyncio.gather(*(units.append("u", turn(f"t{n}", 1), f"s{n}", core_id="c") for n in range(20)))
    await units.append("u", turn("last", 1), "last", core_id="c")

    unit = await units.get("u")
    assert unit is not None
    assert len(unit.conversation_messages) == 2 + 20 + 1
    bounds = intervals(unit)
    assert bounds[0] == (0, 2) and bounds[-1] == (22, 23)
    assert all(end == start for (_, end), (start, _) in itertools.pairwise(bounds))


async def test_a_deleted_unit_is_created_again_by_the_next_append(memory_db: Any) -> None:
    units = MemoryUnitRepository(memory_db)
    await units.append("u", turn("before"), "before", core_id="c")
    assert await units.delete("u")

    piece = await units.append("u", turn("after"), "after", core_id="c")

    assert (piece.start_index, piece.end_index) == (0, 2)


@pytest.mark.parametrize("size", [-1, "10", True])
def test_a_head_cache_size_that_is_not_a_count_is_refused(memory_db: Any, size: Any) -> None:
    with pytest.raises(InvalidInput, match="head_cache_size"):
        MemoryUnitRepository(memory_db, head_cache_size=size)


async def test_a_repository_that_remembers_no_heads_still_appends(memory_db: Any) -> None:
    units = MemoryUnitRepository(memory_db, head_cache_size=0)
    for number in range(3):
        await units.append("u", turn(f"t{number}"), f"s{number}", core_id="c")

    unit = await units.get("u")
    assert unit is not None
    assert intervals(unit) == [(0, 2), (2, 4), (4, 6)]


async def test_a_retried_append_with_a_fresh_id_already_stored_appends_nothing(memory_db: Any) -> None:
    units = MemoryUnitRepository(memory_db)
    first = await units.append("u", turn("roll"), "roll", core_id="c", slice_id="roll-1", fresh_slice_id=True)
    await units.head("u")  # the repository now remembers a head that already holds roll-1

    again = await units.append("u", turn("roll"), "roll", core_id="c", slice_id="roll-1", fresh_slice_id=True)

    unit = await units.get("u")
    assert unit is not None
    assert again == first
    assert len(unit.conversation_messages) == 2 and intervals(unit) == [(0, 2)]
