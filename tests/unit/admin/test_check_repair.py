"""UnitChecker.check/repair on crafted bad data, inserted raw as another tool would have written it."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest

from partner_repo import (
    MemoryUnitRepository,
    Message,
    SliceQueries,
    UnitChecker,
    UnitViolations,
)
from partner_repo.mongo import UNITS, bson_size
from tests.unit.admin.support import T0, insert_raw, raw_unit, seed_unit


def codes(report: UnitViolations) -> set[str]:
    return {v.code for v in report.violations}


def piece(slice_id: Any, start: Any, end: Any, minutes: float | None, summary: str = "s") -> dict[str, Any]:
    document: dict[str, Any] = {"id": slice_id, "start_index": start, "end_index": end, "summary": summary}
    document["created_at"] = None if minutes is None else T0 + timedelta(minutes=minutes)
    return document


async def stored(database: Any, unit_id: str) -> dict[str, Any]:
    document = await database[UNITS].find_one({"_id": unit_id})
    assert document is not None
    return dict(document)


async def healthy(database: Any) -> None:
    await seed_unit(database, "fine", "c", [("ok1", T0, "fine"), ("ok2", T0 + timedelta(minutes=1), "fine")])


async def versioned_raw(database: Any, unit_id: str, **fields: Any) -> None:
    """A raw unit with a version and exact derived fields, so only the fields given here are wrong."""
    document = raw_unit(unit_id, version=3, **fields)
    document.setdefault("message_count", len(document["conversation_messages"]))
    document.setdefault("slice_count", len(document["slices"]))
    document.setdefault(
        "slice_ids", [s["id"] for s in document["slices"] if isinstance(s, dict) and "id" in s]
    )
    if "size_bytes" not in document:
        document["size_bytes"] = 0
        document["size_bytes"] = bson_size(document)
    await insert_raw(database, document)


# -- check --------------------------------------------------------------------------------------------------


async def test_check_of_units_written_by_the_repository_finds_nothing(database: Any) -> None:
    await healthy(database)
    units = MemoryUnitRepository(database)
    for n in range(5):
        await units.append("appended", [Message(role="user", content=f"m{n}" * n)], f"s{n}", core_id="c")

    report = await UnitChecker(database).check()

    assert report.ok and report.units_checked == 2


@pytest.mark.parametrize(
    ("slices", "updated_at", "expected"),
    [
        ([None, piece("a", 0, 1, 1)], T0, "null_slice"),
        ([piece(None, 0, 1, 1)], T0, "missing_slice_id"),
        ([piece("  ", 0, 1, 1)], T0, "missing_slice_id"),
        ([piece("a", 0, 1, 1), piece("a", 1, 2, 2)], T0, "repeated_slice_id"),
        ([piece("a", 0, 1, None)], T0, "missing_created_at"),
        ([piece("a", 0, 9, 1)], T0, "interval_out_of_range"),
        ([piece("a", -1, 1, 1)], T0, "interval_out_of_range"),
        ([piece("a", 2, 1, 1)], T0, "interval_out_of_range"),
        ([piece("a", None, 1, 1)], T0, "interval_out_of_range"),
        ([piece("a", 1, 2, 5), piece("b", 0, 1, 1)], T0, "slices_unsorted"),
        ([piece("a", 0, 1, 1)], None, "missing_updated_at"),
    ],
)
async def test_check_names_each_rule_normalization_would_apply(
    database: Any, slices: list[Any], updated_at: Any, expected: str
) -> None:
    await healthy(database)
    await versioned_raw(database, "bad", slices=slices, updated_at=updated_at)

    report = await UnitChecker(database).check()

    (found,) = report.units
    assert found.unit_id == "bad" and found.core_id == "c" and found.repairable
    assert expected in codes(found)


async def test_check_reports_wrong_and_missing_derived_fields(database: Any) -> None:
    await versioned_raw(database, "drifted", message_count=7)
    await insert_raw(database, raw_unit("foreign"))

    report = await UnitChecker(database).check()

    by_id = {u.unit_id: u for u in report.units}
    assert any("message_count is 7, the unit has 2" in v.detail for v in by_id["drifted"].violations)
    assert {"derived_fields", "unversioned"} <= codes(by_id["foreign"])


async def test_check_reports_slice_ids_shared_between_units_on_both_units(database: Any) -> None:
    await versioned_raw(database, "a", slices=[piece("shared", 0, 1, 1)])
    await versioned_raw(database, "b", slices=[piece("shared", 0, 2, 2)])

    report = await UnitChecker(database).check()

    details = {
        u.unit_id: [v.detail for v in u.violations if v.code == "duplicate_slice_id"] for u in report.units
    }
    assert details == {
        "a": ["slice id 'shared' is also used by unit 'b'"],
        "b": ["slice id 'shared' is also used by unit 'a'"],
    }


async def test_an_unreadable_unit_is_reported_as_not_repairable(database: Any) -> None:
    await insert_raw(
        database, raw_unit("robot", conversation_messages=[{"role": "robot", "content": "beep"}])
    )

    (found,) = (await UnitChecker(database).check()).units

    assert codes(found) == {"unreadable"} and not found.repairable
    assert "conversation_messages.0.role" in found.violations[0].detail


async def test_check_of_one_core_reads_only_its_units(database: Any) -> None:
    await versioned_raw(database, "mine", updated_at=None)
    await insert_raw(database, raw_unit("theirs", core_id="other", updated_at=None))

    report = await UnitChecker(database).check("c")

    assert report.units_checked == 1 and [u.unit_id for u in report.units] == ["mine"]


class LimitRecordingDatabase:
    """Records the ``limit`` of every query on the units collection."""

    def __init__(self, database: Any) -> None:
        self._database = database
        self.limits: list[int] = []

    def __getitem__(self, name: str) -> Any:
        collection = self._database[name]
        recording = self

        class Collection:
            def find(self, *args: Any, **kwargs: Any) -> Any:
                cursor = collection.find(*args, **kwargs)

                class Cursor:
                    def sort(self, *args: Any) -> Any:
                        cursor.sort(*args)
                        return self

                    def limit(self, n: int) -> Any:
                        if name == UNITS:  # the walk of the units (not of the slice-id claims)
                            recording.limits.append(n)
                        return cursor.limit(n)

                    def __getattr__(self, attribute: str) -> Any:
                        return getattr(cursor, attribute)

                return Cursor()

            def __getattr__(self, attribute: str) -> Any:
                return getattr(collection, attribute)

        return Collection()


async def test_check_streams_in_bounded_batches_and_still_sees_every_unit(memory_db: Any) -> None:
    for n in range(7):
        await versioned_raw(memory_db, f"u{n}", updated_at=None)
    recording = LimitRecordingDatabase(memory_db)

    report = await UnitChecker(recording, batch_units=3).check()

    assert report.units_checked == 7 and len(report.units) == 7
    assert recording.limits == [3, 3, 3]


async def test_violations_yields_the_broken_units_one_by_one(database: Any) -> None:
    await healthy(database)
    await versioned_raw(database, "bad", updated_at=None)

    found = [u.unit_id async for u in UnitChecker(database).violations()]

    assert found == ["bad"]


# -- repair -------------------------------------------------------------------------------------------------


async def test_repair_normalizes_every_broken_unit_and_check_then_passes(database: Any) -> None:
    await healthy(database)
    await versioned_raw(
        database,
        "messy",
        slices=[
            piece("late", 1, 9, 5, "late"),
            None,
            piece(None, -2, 1, None, "no id"),
            piece("dup", 0, 1, 1),
        ],
        slice_count=4,
    )

    report = await UnitChecker(database).repair()

    assert report.ok and [r.unit_id for r in report.repaired] == ["messy"]
    assert {"null_slice", "missing_slice_id", "interval_out_of_range", "missing_created_at"} <= {
        c.code for c in report.repaired[0].changes
    }
    assert (await UnitChecker(database).check()).ok
    unit = await MemoryUnitRepository(database).get("messy")
    assert unit is not None and unit.version == report.repaired[0].version == 4
    assert unit.conversation_messages == [
        Message(role="user", content="hello"),
        Message(role="assistant", content="hi"),
    ]
    assert sorted(s.summary for s in unit.complete_slices()) == ["late", "no id", "s"]


async def test_repair_fixes_drifted_derived_fields(database: Any) -> None:
    await versioned_raw(database, "drifted", message_count=7, size_bytes=1)

    report = await UnitChecker(database).repair()

    assert [r.unit_id for r in report.repaired] == ["drifted"]
    document = await stored(database, "drifted")
    assert document["message_count"] == 2 and document["size_bytes"] > 1
    assert (await UnitChecker(database).check()).ok


async def test_repair_completes_a_unit_written_by_another_tool(database: Any) -> None:
    await insert_raw(database, raw_unit("foreign", slices=[piece("f1", 0, 5, None)]))

    report = await UnitChecker(database).repair()

    (repaired,) = report.repaired
    assert {"unversioned", "derived_fields", "missing_created_at"} <= {c.code for c in repaired.changes}
    assert repaired.version >= 1
    assert (await UnitChecker(database).check()).ok


async def test_repair_gives_shared_slice_ids_to_the_first_unit_and_fresh_ids_to_the_others(
    database: Any,
) -> None:
    for unit_id in ("a", "b", "c"):
        await versioned_raw(
            database, unit_id, slices=[piece("shared", 0, 1, 1, f"from {unit_id}")], slice_count=1
        )

    report = await UnitChecker(database).repair()

    assert report.ok and sorted(r.unit_id for r in report.repaired) == ["b", "c"]
    for repaired in report.repaired:
        (change,) = [c for c in repaired.changes if c.code == "duplicate_slice_id"]
        assert "(kept by unit 'a')" in change.detail
    queries = SliceQueries(database)
    assert (await queries.get("shared")).unit_id == "a"
    assert sorted(v.summary for v in (await queries.find()).items) == ["from a", "from b", "from c"]
    assert (await UnitChecker(database).check()).ok


async def test_repair_leaves_unreadable_units_untouched_and_reports_them(database: Any) -> None:
    bad = raw_unit("robot", conversation_messages=[{"role": "robot", "content": "beep"}])
    await insert_raw(database, bad)

    report = await UnitChecker(database).repair()

    (failure,) = report.failed
    assert failure.unit_id == "robot" and "not a valid unit" in failure.reason
    assert not report.ok and report.repaired == []
    assert await stored(database, "robot") == bad


async def test_repair_refuses_a_versionless_unit_that_looks_complete(database: Any) -> None:
    await insert_raw(database, raw_unit("odd", message_count=2, slice_count=0, slice_ids=[], size_bytes=0))

    (failure,) = (await UnitChecker(database).repair()).failed

    assert failure.unit_id == "odd" and "no version" in failure.reason


async def test_a_second_repair_has_nothing_to_do(database: Any) -> None:
    await versioned_raw(database, "bad", updated_at=None)
    await UnitChecker(database).repair()

    report = await UnitChecker(database).repair()

    assert report.repaired == [] and report.failed == [] and report.units_checked == 1


async def test_repair_racing_appends_loses_no_message_and_no_slice(racy_db: Any) -> None:
    await versioned_raw(racy_db, "busy", slices=[None, piece("s0", 0, 2, None)])
    units = MemoryUnitRepository(racy_db)

    async def appender() -> None:
        for n in range(5):
            await units.append("busy", [Message(role="user", content=f"new {n}")], f"new {n}", core_id="c")

    report, _ = await asyncio.gather(UnitChecker(racy_db).repair(), appender())

    assert report.ok and [r.unit_id for r in report.repaired] == ["busy"]
    unit = await units.get("busy")
    assert unit is not None
    assert [m.content for m in unit.conversation_messages][2:] == [f"new {n}" for n in range(5)]
    appended = {s.summary: (s.start_index, s.end_index) for s in unit.complete_slices() if s.summary != "s"}
    assert appended == {f"new {n}": (2 + n, 3 + n) for n in range(5)}
    assert (await UnitChecker(racy_db).check()).ok


async def test_slice_queries_offers_check_and_repair_too(database: Any) -> None:
    await versioned_raw(database, "bad", updated_at=None)
    queries = SliceQueries(database)

    assert [u.unit_id for u in (await queries.check()).units] == ["bad"]
    assert [u.unit_id for u in (await queries.repair()).repaired] == ["bad"]
    assert (await queries.check()).ok


async def test_check_reads_units_whose_id_is_not_a_string_too(database: Any) -> None:
    from bson import ObjectId

    for n in range(3):
        await versioned_raw(database, f"u{n}")
    odd = raw_unit("placeholder")
    odd["_id"] = ObjectId()
    await insert_raw(database, odd)

    report = await UnitChecker(database, batch_units=2).check()

    assert report.units_checked == 4
    (found,) = report.units
    assert found.unit_id == str(odd["_id"]) and not found.repairable


async def test_repair_goes_on_past_a_foreign_unit_and_completes_a_partly_derived_one(database: Any) -> None:
    """mongosh writes ObjectId ids; an older tool may set ``message_count`` alone: neither stops repair."""
    from bson import ObjectId

    foreign = {"_id": ObjectId(), "core_id": "c", "conversation_messages": [], "slices": [{"summary": "x"}]}
    await insert_raw(database, foreign)
    await insert_raw(
        database, raw_unit("partial", version=2, message_count=len(raw_unit("p")["conversation_messages"]))
    )

    report = await UnitChecker(database).repair()

    assert [r.unit_id for r in report.repaired] == ["partial"]
    assert [f.unit_id for f in report.failed] == [str(foreign["_id"])]
    head = await MemoryUnitRepository(database).head("partial")
    assert head is not None and head.version == 3
    assert (await UnitChecker(database).check()).units[0].unit_id == str(foreign["_id"])


async def test_a_unit_with_only_some_derived_fields_is_completed_on_first_read(database: Any) -> None:
    await insert_raw(database, raw_unit("partial", version=2, message_count=3))

    head = await MemoryUnitRepository(database).head("partial")

    assert head is not None and head.version == 3
    assert (await UnitChecker(database).check()).ok
