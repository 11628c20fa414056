"""Slice-id claims: a caller's own slice id belongs to the first unit that claimed it (docs/sharding.md)."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest

from partner_repo import (
    DuplicateSliceId,
    MemoryEraser,
    MemoryUnit,
    MemoryUnitRepository,
    Message,
    UnitChecker,
)
from partner_repo.clock import utc_now
from partner_repo.mongo import SLICE_ID_CLAIMS, UNITS
from partner_repo.units import ORPHAN_GRACE, SliceIdClaims


def hello(text: str = "hi") -> list[Message]:
    return [Message(role="user", content=text)]


async def claims_of(database: Any) -> dict[str, str]:
    return {d["_id"]: d["unit_id"] async for d in database[SLICE_ID_CLAIMS].find({})}


async def holders_of(database: Any, slice_id: str) -> list[str]:
    return sorted([d["_id"] async for d in database[UNITS].find({"slice_ids": slice_id}, {"_id": 1})])


async def test_an_append_with_its_own_slice_id_claims_it_for_the_unit(memory_db: Any) -> None:
    await MemoryUnitRepository(memory_db).append("u1", hello(), "s", core_id="c", slice_id="mine")

    assert await claims_of(memory_db) == {"mine": "u1"}


async def test_ids_the_library_mints_are_not_claimed(memory_db: Any) -> None:
    units = MemoryUnitRepository(memory_db)
    await units.append("u1", hello(), "minted", core_id="c")
    await units.append("u1", hello(), "for a roll", core_id="c", slice_id="fresh-1", fresh_slice_id=True)

    assert await claims_of(memory_db) == {}


async def test_a_slice_id_claimed_by_another_unit_is_refused_and_nothing_is_written(memory_db: Any) -> None:
    units = MemoryUnitRepository(memory_db)
    await units.append("u1", hello(), "s", core_id="c", slice_id="shared")

    with pytest.raises(DuplicateSliceId, match=r"'shared' is already used by unit 'u1'$"):
        await units.append("u2", hello(), "s", core_id="c", slice_id="shared")

    assert await units.get("u2") is None and await claims_of(memory_db) == {"shared": "u1"}


async def test_a_retried_append_finds_its_own_claim_and_returns_the_stored_slice(memory_db: Any) -> None:
    units = MemoryUnitRepository(memory_db)
    first = await units.append("u1", hello(), "s", core_id="c", slice_id="again")

    repeated = await MemoryUnitRepository(memory_db).append("u1", hello(), "s", core_id="c", slice_id="again")

    assert repeated == first and (await units.require("u1")).conversation_messages == hello()


async def test_an_append_refused_for_its_core_claims_nothing(memory_db: Any) -> None:
    units = MemoryUnitRepository(memory_db)
    await units.append("u1", hello(), "s", core_id="c")

    with pytest.raises(Exception, match="belongs to core 'c'"):
        await units.append("u1", hello(), "s", core_id="other", slice_id="mine")

    assert await claims_of(memory_db) == {}


async def test_save_claims_every_slice_id_and_refuses_one_claimed_elsewhere(
    memory_db: Any,
) -> None:
    units = MemoryUnitRepository(memory_db)
    await units.append("u1", hello(), "s", core_id="c", slice_id="taken")
    unit = MemoryUnit.model_validate(
        {
            "id": "u2",
            "core_id": "c",
            "conversation_messages": [m.model_dump() for m in hello() * 2],
            "slices": [
                {"id": "own", "summary": "a", "start_index": 0, "end_index": 1},
                {"id": "taken", "summary": "b", "start_index": 1, "end_index": 2},
            ],
        }
    )

    with pytest.raises(DuplicateSliceId, match="'taken' is already used by unit 'u1'"):
        await units.save(unit)
    unit.slices[1].id = "free"  # type: ignore[union-attr]
    await units.save(unit)

    assert await claims_of(memory_db) == {"taken": "u1", "own": "u2", "free": "u2"}


async def test_concurrent_appends_of_one_id_to_different_units_store_it_in_exactly_one(racy_db: Any) -> None:
    async def append(n: int) -> str:
        try:
            await MemoryUnitRepository(racy_db).append(
                f"u{n}", hello(), "s", core_id="c", slice_id="contested"
            )
        except DuplicateSliceId:
            return "refused"
        return f"u{n}"

    outcomes = await asyncio.gather(*(append(n) for n in range(12)))

    winners = [o for o in outcomes if o != "refused"]
    assert len(winners) == 1 and await holders_of(racy_db, "contested") == winners
    assert await claims_of(racy_db) == {"contested": winners[0]}


async def test_a_claim_left_by_an_interrupted_write_blocks_nothing_of_its_unit(
    memory_db: Any,
) -> None:
    await SliceIdClaims(memory_db).claim("u1", ["left"])  # the process died before the unit write

    stored = await MemoryUnitRepository(memory_db).append("u1", hello(), "s", core_id="c", slice_id="left")

    assert stored.id == "left" and await holders_of(memory_db, "left") == ["u1"]


async def test_an_orphan_claim_keeps_the_id_from_other_units_and_says_why(memory_db: Any) -> None:
    await SliceIdClaims(memory_db).claim("u1", ["left"])

    with pytest.raises(DuplicateSliceId, match="which does not hold it: a write that did not finish"):
        await MemoryUnitRepository(memory_db).append("u2", hello(), "s", core_id="c", slice_id="left")


async def test_check_reports_an_orphan_claim_and_repair_releases_it_once_old(memory_db: Any) -> None:
    await SliceIdClaims(memory_db).claim("u1", ["old"], at=utc_now() - ORPHAN_GRACE - timedelta(seconds=1))
    await SliceIdClaims(memory_db).claim("u1", ["young"])

    report = await UnitChecker(memory_db).check()
    repaired = await UnitChecker(memory_db).repair()

    assert not report.ok
    assert [(o.slice_id, o.releasable) for o in report.orphan_claims] == [("old", True), ("young", False)]
    assert [o.slice_id for o in repaired.released_claims] == ["old"]
    assert await claims_of(memory_db) == {"young": "u1"}
    await MemoryUnitRepository(memory_db).append("u2", hello(), "s", core_id="c", slice_id="old")


async def test_a_claim_held_by_its_unit_is_no_orphan(memory_db: Any) -> None:
    await MemoryUnitRepository(memory_db).append("u1", hello(), "s", core_id="c", slice_id="held")

    assert (await UnitChecker(memory_db).check()).orphan_claims == []


async def test_erasing_a_core_releases_the_claims_of_its_units(memory_db: Any) -> None:
    units = MemoryUnitRepository(memory_db)
    await units.append("u1", hello(), "s", core_id="gone", slice_id="erased-id")
    await units.append("u2", hello(), "s", core_id="kept", slice_id="kept-id")

    await MemoryEraser(memory_db).forget("gone")

    assert await claims_of(memory_db) == {"kept-id": "u2"}


async def test_a_claim_naming_an_erased_unit_is_released_by_repair_at_once(memory_db: Any) -> None:
    await MemoryUnitRepository(memory_db).append("u1", hello(), "s", core_id="gone")
    await MemoryEraser(memory_db).forget("gone")
    await SliceIdClaims(memory_db).claim("u1", ["late"])  # a stalled writer's claim, after the erasure

    repaired = await UnitChecker(memory_db).repair()

    assert [o.slice_id for o in repaired.released_claims] == ["late"] and await claims_of(memory_db) == {}


async def test_deleting_a_unit_releases_its_claims(memory_db: Any) -> None:
    units = MemoryUnitRepository(memory_db)
    await units.append("u1", hello(), "s", core_id="c", slice_id="mine")

    await units.delete("u1")

    assert await claims_of(memory_db) == {}
