"""RollingResult says where a roll went (unit_id, core_id) and which positions of the core its increment
holds, also when rebuilt from the stored slice in another process (issue 20)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from partner_repo import (
    MemoryCoreRepository,
    MemoryUnitRepository,
    RollingConfig,
    RollingResult,
    RollingService,
)
from tests.unit.rolling.support import T0, RecordingSummarizer, turn

CONFIG = RollingConfig(trigger_limit=4, retain_divisor=2)  # a roll every other turn keeps the last 2


async def rolls_of(database: Any, turns: int) -> list[RollingResult]:
    service = RollingService(database, RecordingSummarizer(), CONFIG)
    results = []
    for number in range(turns):
        result = await service.record_and_roll("agent", turn(number), at=T0 + timedelta(minutes=number))
        if result is not None:
            results.append(result)
    return results


async def test_a_result_names_the_unit_and_the_core_it_rolled(database: Any) -> None:
    session = await MemoryCoreRepository(database).session_id("agent")

    (result,) = await rolls_of(database, 2)

    assert (result.unit_id, result.core_id) == (session, "agent")
    assert (result.unit_id, result.core_id) == (result.memory_unit.id, result.memory_unit.core_id)


async def test_a_result_holds_the_positions_of_its_increment_in_the_core(database: Any) -> None:
    first, second = await rolls_of(database, 3)

    # a new session's first roll stores the whole window, positions 0-3; the trim keeps 2 and 3, and the
    # next roll stores what came after them
    assert (first.first_position, first.end_position) == (0, 4)
    assert (second.first_position, second.end_position) == (4, 6)
    assert second.end_position - second.first_position == len(second.increment_messages)


async def test_a_result_rebuilt_from_the_stored_slice_has_the_same_ids_and_positions(database: Any) -> None:
    _, rolled = await rolls_of(database, 3)
    units = MemoryUnitRepository(database)

    piece = await units.get_slice(rolled.unit_id, rolled.slice_id)
    assert piece is not None
    rebuilt = RollingResult.from_slice(
        rolled.unit_id, "agent", piece, await units.slice_messages(rolled.unit_id, rolled.slice_id)
    )

    assert rebuilt == rolled
    assert (rebuilt.unit_id, rebuilt.core_id, rebuilt.first_position, rebuilt.end_position) == (
        rolled.unit_id,
        "agent",
        4,
        6,
    )


async def test_a_slice_not_from_a_roll_has_no_positions(database: Any) -> None:
    units = MemoryUnitRepository(database)
    piece = await units.append("u1", turn(0), "imported", core_id="agent")

    result = RollingResult.from_slice("u1", "agent", piece, turn(0))

    assert (result.first_position, result.end_position) == (None, None)
    assert (result.unit_id, result.core_id) == ("u1", "agent")
