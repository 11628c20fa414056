"""``append(..., first_position=p)``: the append lands only while the unit has taken no position at or after
``p``, and moves the unit's mark to the increment's end; a clear's mark fences it the same way."""

from __future__ import annotations

from typing import Any

import pytest

from partner_repo import MemoryUnitRepository, StaleIncrement
from partner_repo.mongo import UNITS, bson_size
from tests.unit.rolling.support import numbered


async def stored(memory_db: Any, unit_id: str) -> dict[str, Any]:
    document = await memory_db[UNITS].find_one({"_id": unit_id})
    assert document is not None
    return dict(document)


async def test_a_positioned_append_marks_the_positions_it_took(units: MemoryUnitRepository) -> None:
    await units.append("u", numbered(0, 4), "first", core_id="c", first_position=10)
    await units.append("u", numbered(4, 6), "second", core_id="c", first_position=14)

    head = await units.head("u")
    assert head is not None and head.mark == 16 and head.message_count == 6


async def test_an_append_below_the_mark_is_stale_and_writes_nothing(units: MemoryUnitRepository) -> None:
    await units.append("u", numbered(0, 4), "first", core_id="c", first_position=10)

    with pytest.raises(StaleIncrement, match="taken every position below 14"):
        await units.append("u", numbered(2, 6), "overtaken", core_id="c", first_position=12)

    unit = await units.get("u")
    assert unit is not None and unit.conversation_messages == numbered(0, 4)


async def test_a_gap_after_the_mark_is_admitted(units: MemoryUnitRepository) -> None:
    """Positions a clear emptied from the window without a mark (a window trimmed by another tool) leave a
    gap: the next increment starts after it."""
    await units.append("u", numbered(0, 4), "first", core_id="c", first_position=0)

    await units.append("u", numbered(9, 11), "after a gap", core_id="c", first_position=9)

    head = await units.head("u")
    assert head is not None and head.mark == 11


async def test_an_append_that_takes_no_positions_keeps_the_mark_trusted(units: MemoryUnitRepository) -> None:
    await units.append("u", numbered(0, 4), "rolled", core_id="c", first_position=0)

    await units.append("u", numbered(100, 102), "imported", core_id="c")

    head = await units.head("u")
    assert head is not None and head.mark == 4 and head.message_count == 6


async def test_a_rewritten_unit_has_no_trusted_mark(units: MemoryUnitRepository) -> None:
    await units.append("u", numbered(0, 4), "rolled", core_id="c", first_position=0)
    unit = await units.get("u")
    assert unit is not None

    await units.save(unit)

    head = await units.head("u")
    assert head is not None and head.mark is None


async def test_a_clear_raises_the_mark_of_an_existing_unit(units: MemoryUnitRepository) -> None:
    await units.append("u", numbered(0, 4), "rolled", core_id="c", first_position=0)

    await units.mark_taken("u", core_id="c", until=9)

    with pytest.raises(StaleIncrement):
        await units.append("u", numbered(4, 6), "stalled roller", core_id="c", first_position=4)
    head = await units.head("u")
    assert head is not None and head.mark == 9


async def test_a_reserved_mark_is_no_unit_until_an_append_it_admits(
    units: MemoryUnitRepository, memory_db: Any
) -> None:
    await units.mark_taken("fresh", core_id="c", until=7)
    assert await units.get("fresh") is None and await units.head("fresh") is None
    assert await units.unit_ids("c") == set()

    with pytest.raises(StaleIncrement):
        await units.append("fresh", numbered(0, 3), "stalled roller", core_id="c", first_position=4)
    piece = await units.append("fresh", numbered(7, 9), "after the clear", core_id="c", first_position=7)

    unit = await units.get("fresh")
    assert unit is not None and unit.conversation_messages == numbered(7, 9) and piece.start_index == 0
    head = await units.head("fresh")
    assert head is not None and head.mark == 9


async def test_marks_keep_the_stored_size_exact(units: MemoryUnitRepository, memory_db: Any) -> None:
    await units.mark_taken("u", core_id="c", until=2)
    await units.append("u", numbered(0, 4), "rolled", core_id="c", first_position=2)
    await units.append("u", numbered(4, 6), "imported", core_id="c")
    await units.mark_taken("u", core_id="c", until=3_000_000_000)  # past 2**31: stored in 8 bytes
    await units.append("u", numbered(6, 8), "rolled", core_id="c", first_position=3_000_000_000)

    document = await stored(memory_db, "u")
    assert bson_size(document) == document["size_bytes"]
