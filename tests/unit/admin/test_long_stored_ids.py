"""Ids over the limit that the library did not write: units another tool stored, and Partner state files.

Stored units keep working as they are (read, appended to, delivered); ``check`` reports each such id and
``repair`` gives slices fresh ids, but leaves a unit whose own ids are too long to be fixed by hand. The
import skips a unit file whose name is not valid text and stores a slice with a too-long id under a fresh
one.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from partner_repo import MemoryUnitRepository, Message, UnitChecker, import_partner_state
from partner_repo.admin._inspection import ID_TOO_LONG
from partner_repo.models import MAX_ID_LENGTH
from partner_repo.mongo import CORES, UNITS
from tests.unit.admin.support import T0, insert_raw, raw_unit

TOO_LONG = "x" * (MAX_ID_LENGTH + 1)


def foreign_slice(slice_id: str) -> dict[str, Any]:
    return {"id": slice_id, "start_index": 0, "end_index": 2, "summary": "elsewhere", "created_at": T0}


async def test_a_stored_unit_with_ids_over_the_limit_reads_and_appends_as_before(memory_db: Any) -> None:
    await insert_raw(memory_db, raw_unit("foreign", slices=[foreign_slice(TOO_LONG)]))
    units = MemoryUnitRepository(memory_db)

    appended = await units.append("foreign", [Message(role="user", content="more")], "next", core_id="c")
    unit = await units.get("foreign")

    assert unit is not None and [s.id for s in unit.complete_slices()] == [TOO_LONG, appended.id]


async def test_check_reports_each_id_over_the_limit(memory_db: Any) -> None:
    await insert_raw(memory_db, raw_unit("slices", slices=[foreign_slice(TOO_LONG)], version=1))
    await insert_raw(memory_db, raw_unit(TOO_LONG, core_id=TOO_LONG, version=1))

    report = await UnitChecker(memory_db).check()

    found = {unit.unit_id: unit for unit in report.units}
    assert [v.detail for v in found["slices"].violations if v.code == ID_TOO_LONG] == [
        f"slice #0 id {TOO_LONG[:32]!r}... ({MAX_ID_LENGTH + 1} characters, at most {MAX_ID_LENGTH} allowed) "
        "is over the limit"
    ]
    assert found["slices"].repairable
    too_long = [v.detail.split(" ")[0:2] for v in found[TOO_LONG].violations if v.code == ID_TOO_LONG]
    assert too_long == [["unit", "id"], ["core", "id"]] and not found[TOO_LONG].repairable


async def test_repair_gives_a_slice_with_an_id_over_the_limit_a_fresh_id(memory_db: Any) -> None:
    await insert_raw(memory_db, raw_unit("slices", slices=[foreign_slice(TOO_LONG)], version=1))

    report = await UnitChecker(memory_db).repair()

    assert report.ok and [r.unit_id for r in report.repaired] == ["slices"]
    unit = await MemoryUnitRepository(memory_db).get("slices")
    assert unit is not None and len(unit.complete_slices()) == 1
    fresh = unit.complete_slices()[0].id
    assert fresh is not None and len(fresh) <= MAX_ID_LENGTH
    assert any(c.code == ID_TOO_LONG and fresh in c.detail for c in report.repaired[0].changes)
    assert (await UnitChecker(memory_db).check()).ok


async def test_repair_leaves_a_unit_whose_own_id_is_over_the_limit_and_says_why(memory_db: Any) -> None:
    document = raw_unit(TOO_LONG, version=1)
    await insert_raw(memory_db, document)

    report = await UnitChecker(memory_db).repair()

    assert [f.unit_id for f in report.failed] == [TOO_LONG]
    assert f"longer than {MAX_ID_LENGTH} characters cannot be renamed" in report.failed[0].reason
    assert await memory_db[UNITS].find_one({"_id": TOO_LONG}) == document


def state_dir(tmp_path: Path, session_id: str, files: dict[str, Any]) -> Path:
    root = tmp_path / "state"
    (root / "core" / "memory").mkdir(parents=True)
    memory = {"memory_session_id": session_id, "memory_unit_uuid_set": list(files)}
    (root / "core" / "memory.json").write_text(json.dumps(memory))
    for unit_id, content in files.items():
        (root / "core" / "memory" / f"memory-unit{unit_id}.json").write_text(json.dumps(content))
    return root


def undecodable_unit_file(root: Path) -> None:
    """A unit file whose name is not UTF-8 (byte 0xff): Python reads it as a lone surrogate."""
    name = os.fsencode(root / "core" / "memory") + b"/memory-unit\xff.json"
    Path(os.fsdecode(name)).write_text(json.dumps(partner_unit_file("s2")))


def partner_unit_file(*slice_ids: str) -> dict[str, Any]:
    return {
        "conversation_messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}],
        "memory_slices": [
            {
                "id": s,
                "start_index": 0,
                "end_index": 2,
                "summary": "s",
                "created_timestamp": 1_709_280_000_000,
            }
            for s in slice_ids
        ],
        "update_timestamp": 1_709_280_000_000,
    }


async def test_the_import_skips_a_unit_file_whose_name_is_not_valid_text(
    memory_db: Any, tmp_path: Path
) -> None:
    # File names hold at most 255 bytes on common file systems, so a name cannot carry an id over the limit;
    # one that is not UTF-8 decodes to a lone surrogate, which no database can store.
    root = state_dir(tmp_path, "ok", {"ok": partner_unit_file("s1")})
    undecodable_unit_file(root)

    report = await import_partner_state(root, memory_db)

    assert report.units_imported == 1
    assert [i.reason for i in report.skipped] == [
        "the unit id of the file name is not valid Unicode text: a lone surrogate at position 0"
    ]
    assert await memory_db[UNITS].distinct("_id") == ["ok"]


async def test_the_import_stores_a_slice_whose_id_is_over_the_limit_under_a_fresh_id(
    memory_db: Any, tmp_path: Path
) -> None:
    root = state_dir(tmp_path, "ok", {"ok": partner_unit_file(TOO_LONG)})

    report = await import_partner_state(root, memory_db)

    unit = await MemoryUnitRepository(memory_db).get("ok")
    assert report.slices_imported == 1 and unit is not None
    fresh = unit.complete_slices()[0].id
    assert fresh is not None and len(fresh) <= MAX_ID_LENGTH
    assert any(
        f"slice 0: its id must be at most {MAX_ID_LENGTH}" in w.reason and fresh in w.reason
        for w in report.warnings
    )


async def test_the_import_skips_a_session_id_over_the_limit_and_imports_the_units(
    memory_db: Any, tmp_path: Path
) -> None:
    root = state_dir(tmp_path, TOO_LONG, {"ok": partner_unit_file("s1")})

    report = await import_partner_state(root, memory_db)

    assert report.units_imported == 1 and report.session_id is None
    assert [i.item for i in report.skipped] == ["memory_session_id"]
    assert await memory_db[CORES].count_documents({}) == 0
