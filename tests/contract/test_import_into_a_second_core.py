"""Finding 8 of issue 30: one Partner state imported into a second core.

The second core used to take the first core's unit as its session and could never roll again (every append
refused), with ``check`` silent. Now the import is refused before anything is written, naming the core that
owns the unit, or imports a copy under new ids when asked; ``check`` reports a core whose session unit is
another core's, and ``repair`` gives it a fresh session. On the in-memory backend and on a server.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from partner_repo import (
    MemoryCoreRepository,
    MemoryUnitRepository,
    RollingConfig,
    RollingService,
    UnitChecker,
    UnitOfAnotherCore,
    import_partner_state,
)
from tests.contract.rolling_contract_support import T0, numbered, summarize

UNIT = "partner-unit-1"


@pytest.fixture
def state(tmp_path: Path) -> Path:
    """Partner's state directory: one unit of four messages and a slice, its session current."""
    (tmp_path / "core" / "memory").mkdir(parents=True)
    (tmp_path / "core" / "memory.json").write_text(
        json.dumps({"memory_session_id": UNIT, "memory_unit_uuid_set": [UNIT]})
    )
    unit = {
        "conversation_messages": [{"role": m.role, "content": m.content} for m in numbered(0, 4)],
        "memory_slices": [{"id": "slice-1", "start_index": 0, "end_index": 4, "summary": "four messages"}],
    }
    (tmp_path / "core" / "memory" / f"memory-unit{UNIT}.json").write_text(json.dumps(unit))
    return tmp_path


async def rolls(database: Any, core_id: str) -> bool:
    """Whether the core takes a turn and rolls it."""
    await MemoryCoreRepository(database).record(core_id, numbered(100, 104), at=T0)
    service = RollingService(database, summarize, RollingConfig(trigger_limit=2))
    return await service.roll(core_id, now=T0) is not None


async def test_importing_a_state_into_a_second_core_is_refused_before_anything_is_written(
    database: Any, state: Path
) -> None:
    await import_partner_state(state, database, core_id="first")

    with pytest.raises(UnitOfAnotherCore, match=r"belongs to core 'first', not 'second'.*--as-copy"):
        await import_partner_state(state, database, core_id="second")

    assert await MemoryCoreRepository(database).get("second") is None
    assert await MemoryUnitRepository(database).list_units("second") == []
    assert await rolls(database, "first")


async def test_a_copy_imported_into_a_second_core_gets_new_ids_and_rolls(database: Any, state: Path) -> None:
    await import_partner_state(state, database, core_id="first")

    report = await import_partner_state(state, database, core_id="second", as_copy=True)
    again = await import_partner_state(state, database, core_id="second", as_copy=True)

    copies = await MemoryUnitRepository(database).list_units("second")
    assert report.units_imported == 1 and again.units_imported == 0 and again.units_unchanged == 1
    assert [u.id for u in copies] != [UNIT] and len(copies) == 1
    assert copies[0].conversation_messages == numbered(0, 4)
    assert {s.id for s in copies[0].complete_slices()}.isdisjoint({"slice-1"})
    core = await MemoryCoreRepository(database).get("second")
    assert core is not None and core.memory_session_id == copies[0].id
    assert await rolls(database, "second") and await rolls(database, "first")


async def test_check_reports_a_core_whose_session_unit_is_another_cores_and_repair_gives_it_a_fresh_one(
    database: Any, state: Path
) -> None:
    await import_partner_state(state, database, core_id="first")
    await MemoryCoreRepository(database).set_session("second", UNIT)  # as an import before the refusal did
    checker = UnitChecker(database)

    checked = await checker.check()
    repaired = await checker.repair()

    assert [(f.core_id, f.session_id, f.owner) for f in checked.foreign_sessions] == [
        ("second", UNIT, "first")
    ]
    assert not checked.ok
    assert [f.core_id for f in repaired.fresh_sessions] == ["second"]
    assert (await checker.check()).ok
    assert await rolls(database, "second")
