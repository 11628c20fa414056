"""``append(..., expected_start=n)``: the append lands only while the unit holds exactly ``n`` messages."""

from __future__ import annotations

from typing import Any

import pytest

from partner_repo import MemoryUnitRepository, StaleIncrement
from tests.unit.rolling.support import numbered


async def test_an_append_where_the_increment_was_resolved_lands(units: MemoryUnitRepository) -> None:
    await units.append("u", numbered(0, 4), "first", core_id="c")

    piece = await units.append("u", numbered(4, 6), "second", core_id="c", expected_start=4)

    assert (piece.start_index, piece.end_index) == (4, 6)


async def test_an_append_to_a_unit_that_moved_on_is_refused_and_writes_nothing(
    units: MemoryUnitRepository,
) -> None:
    await units.append("u", numbered(0, 4), "first", core_id="c")
    await units.append("u", numbered(4, 6), "another writer's", core_id="c")

    with pytest.raises(StaleIncrement) as refused:
        await units.append("u", numbered(4, 6), "resolved at 4", core_id="c", expected_start=4)

    assert (refused.value.expected, refused.value.found) == (4, 6)
    unit = await units.get("u")
    assert unit is not None and len(unit.conversation_messages) == 6 and len(unit.slices) == 2


async def test_a_new_unit_is_created_only_while_it_does_not_exist(units: MemoryUnitRepository) -> None:
    await units.append("new", numbered(0, 2), "created", core_id="c", expected_start=0)

    with pytest.raises(StaleIncrement):
        await units.append("new", numbered(0, 2), "created twice", core_id="c", expected_start=0)
    with pytest.raises(StaleIncrement):
        await units.append("gone", numbered(0, 2), "resolved at 3", core_id="c", expected_start=3)
    assert await units.get("gone") is None


async def test_a_repeat_of_a_fenced_append_that_landed_returns_the_stored_slice(
    units: MemoryUnitRepository,
) -> None:
    await units.append("u", numbered(0, 4), "first", core_id="c")
    stored = await units.append("u", numbered(4, 6), "s", core_id="c", slice_id="roll-1", expected_start=4)

    again = await units.append("u", numbered(4, 6), "s", core_id="c", slice_id="roll-1", expected_start=4)

    assert again.id == stored.id == "roll-1"
    unit = await units.get("u")
    assert unit is not None and len(unit.conversation_messages) == 6


async def test_a_remembered_head_is_never_pushed_to_past_the_fence(memory_db: Any) -> None:
    remembering, other = MemoryUnitRepository(memory_db), MemoryUnitRepository(memory_db)
    await remembering.append("u", numbered(0, 4), "first", core_id="c")  # remembers 4 messages
    await other.append("u", numbered(4, 5), "meanwhile", core_id="c")

    with pytest.raises(StaleIncrement):
        await remembering.append("u", numbered(4, 6), "resolved at 4", core_id="c", expected_start=4)


@pytest.mark.parametrize("bad", [-1, 1.5, "4", True])
async def test_the_fence_is_a_message_count(units: MemoryUnitRepository, bad: Any) -> None:
    from partner_repo import InvalidInput

    with pytest.raises(InvalidInput):
        await units.append("u", numbered(0, 2), "s", core_id="c", expected_start=bad)
    assert await units.get("u") is None
