"""The unit reads behind polling: fingerprints that change with every write, outlines without messages, and a
probe that lets an idle polling pass stop early."""

from __future__ import annotations

from typing import Any

from partner_repo import MemoryUnitRepository
from tests.unit.listener.support import (
    T0,
    CountingUnits,
    Recorder,
    append,
    messages,
    quick_listener,
    registry_of,
    scanning,
)


async def fingerprints(units: MemoryUnitRepository) -> dict[str, Any]:
    return {unit_id: fingerprint async for unit_id, fingerprint in units.fingerprints()}


async def test_every_write_changes_the_fingerprint(memory_db: Any) -> None:
    units = MemoryUnitRepository(memory_db)
    seen = []
    await append(units, "u1")
    seen.append((await fingerprints(units))["u1"])
    await append(units, "u1")
    seen.append((await fingerprints(units))["u1"])
    stored = await units.get("u1")
    assert stored is not None
    await units.save(stored)
    seen.append((await fingerprints(units))["u1"])

    assert len(set(seen)) == 3
    assert [f[0] for f in seen] == [1, 2, 3]  # the version leads


async def test_totals_sum_the_fingerprints(memory_db: Any) -> None:
    units = MemoryUnitRepository(memory_db)
    await append(units, "u1", count=2)
    await append(units, "u2", count=3)
    found = await fingerprints(units)

    assert await units.fingerprint_totals() == (2, *(sum(f[i] for f in found.values()) for i in range(4)))


async def test_an_outline_has_the_slices_and_fingerprint_but_no_messages(memory_db: Any) -> None:
    units = MemoryUnitRepository(memory_db)
    first, second = await append(units, "u1"), await append(units, "u1")

    outline = await units.outline("u1")

    assert outline is not None
    assert (outline.id, outline.core_id) == ("u1", "core")
    assert outline.slices == (first, second)
    assert outline.fingerprint == (await fingerprints(units))["u1"]
    assert await units.outline("missing") is None


async def test_a_unit_written_by_another_tool_is_completed_when_outlined(memory_db: Any) -> None:
    await memory_db["memory_units"].insert_one(
        {
            "_id": "raw",
            "core_id": "core",
            "conversation_messages": [m.model_dump() for m in messages(2)],
            "slices": [{"summary": "no id yet", "start_index": 0, "end_index": 2, "created_at": T0}, None],
        }
    )

    outline = await MemoryUnitRepository(memory_db).outline("raw")

    assert outline is not None
    (piece,) = outline.slices
    assert piece.id and piece.summary == "no id yet"
    assert outline.fingerprint[0] == 1


async def test_slices_of_a_unit_written_by_another_tool_are_delivered(memory_db: Any) -> None:
    recorder = Recorder()
    async with quick_listener(memory_db, registry_of(recorder)) as listener:
        await memory_db["memory_units"].insert_one(
            {
                "_id": "raw",
                "core_id": "core",
                "conversation_messages": [m.model_dump() for m in messages(3)],
                "slices": [{"summary": "imported", "start_index": 0, "end_index": 3}],
            }
        )
        await listener.flush()

    (result,) = recorder.results
    assert result.summary == "imported" and len(result.increment_messages) == 3
    assert result.rolling_size is None


async def test_a_pass_after_nothing_changed_stops_at_the_probe(memory_db: Any) -> None:
    units = CountingUnits(memory_db)
    await append(units, "u1")
    await append(units, "u2")
    scanner, pipeline = scanning(memory_db, units)
    pipeline.start()
    try:
        assert await scanner.scan() == 2
        assert units.outlined == 2
        assert await scanner.scan() == 0
        assert units.outlined == 2  # nothing re-read
        await append(units, "u2")
        assert await scanner.scan() == 1
        assert units.outlined == 3  # only the unit that changed
    finally:
        await pipeline.close()
