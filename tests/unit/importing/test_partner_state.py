"""import_partner_state on a crafted Partner state directory that exercises every rule of the format."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from partner_repo import (
    ImportReport,
    InvalidInput,
    MemoryCoreRepository,
    MemoryUnitRepository,
    Message,
    UnitChecker,
    import_partner_state,
)
from partner_repo.mongo import CORES, UNITS

MS = 1_709_280_000_000  # 2024-03-01T08:00:00Z in epoch milliseconds
MTIME = datetime(2024, 2, 1, 12, 0, tzinfo=UTC)


def at_ms(offset_minutes: int) -> int:
    return MS + offset_minutes * 60_000


def when(offset_minutes: int) -> datetime:
    return datetime.fromtimestamp(at_ms(offset_minutes) / 1000, UTC)


def msg(role: str, content: str) -> dict[str, Any]:
    return {"role": role, "content": content}


def slice_(slice_id: str, start: int, end: int, summary: str, minutes: int) -> dict[str, Any]:
    return {
        "id": slice_id,
        "start_index": start,
        "end_index": end,
        "summary": summary,
        "created_timestamp": at_ms(minutes),
    }


def write(root: Path, relative: str, content: Any) -> Path:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content if isinstance(content, str) else json.dumps(content), encoding="utf-8")
    return path


def unit_file(root: Path, unit_id: str, content: Any) -> Path:
    return write(root, f"core/memory/memory-unit{unit_id}.json", content)


@pytest.fixture
def state(tmp_path: Path) -> Path:
    """A Partner state directory with one case per rule."""
    root = tmp_path / "partner-state"
    listed = ["u-ok", "u-missing", "u-badjson", "u-notobj", "u-messages", "u-slices", "u-times", "u-zdup"]
    write(root, "core/memory.json", {"memory_session_id": "u-ok", "memory_unit_uuid_set": listed})
    unit_file(
        root,
        "u-ok",
        {
            "id": "u-ok",
            "update_timestamp": at_ms(10),
            "conversation_messages": [msg("user", "hi"), msg("assistant", "hello"), msg("system", "note")],
            "memory_slices": [slice_("ok-2", 2, 3, "a note", 9), slice_("ok-1", 0, 2, "greetings", 5)],
        },
    )
    unit_file(root, "u-badjson", '{"id": "u-badjson", "conversation_messages": [')
    unit_file(root, "u-notobj", [1, 2, 3])
    unit_file(
        root,
        "u-messages",
        {
            "update_timestamp": at_ms(20),
            "conversation_messages": [
                msg("user", "kept 0"),
                {"content": "no role"},
                {"role": "user"},
                msg("function", "unknown role"),
                {"role": "user", "content": 42},
                "not an object",
                msg("assistant", "kept 1"),
                msg("user", "kept 2"),
            ],
            # covers file positions 6..8, i.e. the kept messages 1..3
            "memory_slices": [slice_("m-1", 0, 1, "first", 1), slice_("m-2", 6, 8, "after the skipped", 2)],
        },
    )
    complete = slice_("s-ok", 0, 1, "complete", 1)
    unit_file(
        root,
        "u-slices",
        {
            "update_timestamp": at_ms(30),
            "conversation_messages": [msg("user", "one"), msg("assistant", "two")],
            "memory_slices": [
                complete,
                *(
                    {k: v for k, v in slice_("gone", 0, 1, "x", 2).items() if k != field}
                    for field in complete
                ),
                {**slice_("null-summary", 0, 1, "x", 2), "summary": None},
                {**slice_("typed", 0, 1, "x", 2), "start_index": "0"},
                "not an object",
                {**slice_("zero-time", 0, 2, "no time", 0), "created_timestamp": 0},
                slice_("too-far", 1, 50, "past the end", 3),
            ],
        },
    )
    times = unit_file(
        root,
        "u-times",
        {"update_timestamp": 0, "conversation_messages": [msg("user", "when?")], "memory_slices": []},
    )
    os.utime(times, (MTIME.timestamp(), MTIME.timestamp()))
    unit_file(
        root,
        "u-zdup",
        {
            "id": "something-else",
            "update_timestamp": at_ms(40),
            "conversation_messages": [msg("user", "a"), msg("user", "b")],
            "memory_slices": [
                slice_("ok-1", 0, 1, "reuses u-ok's id", 1),
                slice_("twice", 1, 2, "t", 2),
                slice_("twice", 0, 2, "t again", 3),
            ],
        },
    )
    unit_file(
        root,
        "u-unlisted",
        {"update_timestamp": at_ms(50), "conversation_messages": [msg("user", "stray")], "memory_slices": []},
    )
    write(root, "core/memory/notes.txt", "not a unit file")
    return root


def reasons(report: ImportReport, file_suffix: str) -> list[str]:
    issues = report.skipped + report.warnings
    return [f"{i.item}: {i.reason}" for i in issues if i.file.endswith(file_suffix)]


async def imported(state: Path, database: Any) -> ImportReport:
    return await import_partner_state(state, database, core_id="partner")


async def test_every_importable_unit_is_imported_into_the_core(state: Path, database: Any) -> None:
    report = await imported(state, database)

    ids = await MemoryUnitRepository(database).unit_ids("partner")
    assert ids == {"u-ok", "u-messages", "u-slices", "u-times", "u-zdup", "u-unlisted"}
    assert report.units_imported == report.new == 6
    assert report.messages_imported == 3 + 3 + 2 + 1 + 2 + 1
    assert report.slices_imported == 2 + 2 + 3 + 0 + 3 + 0


async def test_a_clean_unit_is_imported_exactly(state: Path, database: Any) -> None:
    await imported(state, database)

    unit = await MemoryUnitRepository(database).get("u-ok")

    assert unit is not None and unit.core_id == "partner" and unit.updated_at == when(10)
    assert [m.content for m in unit.conversation_messages] == ["hi", "hello", "note"]
    assert [(s.id, s.start_index, s.end_index, s.summary, s.created_at) for s in unit.complete_slices()] == [
        ("ok-1", 0, 2, "greetings", when(5)),
        ("ok-2", 2, 3, "a note", when(9)),
    ]


async def test_messages_without_role_or_content_or_with_an_unknown_role_are_skipped_and_reported(
    state: Path, database: Any
) -> None:
    report = await imported(state, database)

    unit = await MemoryUnitRepository(database).get("u-messages")
    assert unit is not None
    assert unit.conversation_messages == [
        Message(role="user", content="kept 0"),
        Message(role="assistant", content="kept 1"),
        Message(role="user", content="kept 2"),
    ]
    assert reasons(report, "memory-unitu-messages.json") == [
        "message 1: no role",
        "message 2: no content",
        "message 3: unknown role 'function'",
        "message 4: content is a int",
        "message 5: not an object",
        "unit: 5 skipped message(s): slice indexes shifted to the kept messages",
    ]


async def test_slice_indexes_are_shifted_onto_the_kept_messages(state: Path, database: Any) -> None:
    await imported(state, database)

    unit = await MemoryUnitRepository(database).get("u-messages")

    assert unit is not None
    assert [(s.start_index, s.end_index) for s in unit.complete_slices()] == [(0, 1), (1, 3)]


async def test_slices_missing_a_field_or_of_the_wrong_shape_are_skipped_and_reported(
    state: Path, database: Any
) -> None:
    report = await imported(state, database)

    skipped = [r for r in reasons(report, "memory-unitu-slices.json") if r.startswith("slice")]
    assert skipped == [
        "slice 1: missing id",
        "slice 2: missing start_index",
        "slice 3: missing end_index",
        "slice 4: missing summary",
        "slice 5: missing created_timestamp",
        "slice 6: missing summary",
        "slice 7: wrong type for start_index",
        "slice 8: not an object",
    ]


async def test_imported_units_are_normalized_and_the_changes_reported(state: Path, database: Any) -> None:
    report = await imported(state, database)

    unit = await MemoryUnitRepository(database).get("u-slices")
    assert unit is not None
    by_id = {s.id: s for s in unit.complete_slices()}
    assert set(by_id) == {"s-ok", "zero-time", "too-far"}
    assert by_id["zero-time"].created_at == when(30)  # a timestamp <= 0 is missing: the unit's time
    assert (by_id["too-far"].start_index, by_id["too-far"].end_index) == (1, 2)
    notes = reasons(report, "memory-unitu-slices.json")
    assert "unit: normalized: slice 'too-far' covers [1, 50) but the unit has 2 messages" in notes
    assert "unit: normalized: slice 'zero-time' has no created_at" in notes
    assert (await UnitChecker(database).check()).ok


async def test_an_update_timestamp_of_zero_counts_as_missing(state: Path, database: Any) -> None:
    await imported(state, database)

    unit = await MemoryUnitRepository(database).get("u-times")

    assert unit is not None and unit.updated_at == MTIME  # the file's modification time


async def test_a_slice_id_already_used_by_another_unit_gets_a_fresh_id(state: Path, database: Any) -> None:
    report = await imported(state, database)

    unit = await MemoryUnitRepository(database).get("u-zdup")
    assert unit is not None
    summaries = {s.summary: s.id for s in unit.complete_slices()}
    assert summaries["reuses u-ok's id"] not in {"ok-1", None}
    assert len(set(summaries.values())) == 3
    notes = reasons(report, "memory-unitu-zdup.json")
    assert any("slice id 'ok-1' is already used by another unit; stored as" in n for n in notes)
    assert any("appears more than once" in n for n in notes)
    assert any("its id field is 'something-else'" in n for n in notes)


async def test_listed_units_without_a_file_and_broken_files_are_reported_not_fatal(
    state: Path, database: Any
) -> None:
    report = await imported(state, database)

    assert reasons(report, "memory-unitu-missing.json") == [
        "unit: listed in core/memory.json but the file does not exist"
    ]
    (bad_json,) = reasons(report, "memory-unitu-badjson.json")
    assert bad_json.startswith("file: invalid JSON:")
    assert reasons(report, "memory-unitu-notobj.json") == ["file: not a JSON object (a list)"]
    assert reasons(report, "memory-unitu-unlisted.json") == [
        "unit: not listed in core/memory.json (memory_unit_uuid_set); imported anyway"
    ]
    assert all(not i.file.endswith("notes.txt") for i in report.skipped + report.warnings)


async def test_the_core_session_is_set_from_memory_json(state: Path, database: Any) -> None:
    report = await imported(state, database)

    assert report.session_id == "u-ok" and report.session_set
    assert await MemoryCoreRepository(database).session_id("partner") == "u-ok"


async def test_running_the_import_again_changes_nothing_and_reports_zero_new(
    state: Path, database: Any
) -> None:
    await imported(state, database)
    units_before = await database[UNITS].find().sort("_id", 1).to_list(None)
    cores_before = await database[CORES].find().to_list(None)

    again = await imported(state, database)

    assert (again.units_imported, again.messages_imported, again.slices_imported, again.new) == (0, 0, 0, 0)
    assert again.units_unchanged == 6 and not again.session_set
    assert not any("different content" in i.reason for i in again.warnings)
    assert await database[UNITS].find().sort("_id", 1).to_list(None) == units_before
    assert await database[CORES].find().to_list(None) == cores_before


async def test_a_changed_file_is_reported_and_the_stored_unit_left_alone(state: Path, database: Any) -> None:
    await imported(state, database)
    unit_file(
        state, "u-unlisted", {"update_timestamp": at_ms(50), "conversation_messages": [msg("user", "new")]}
    )

    again = await imported(state, database)

    assert any("different content; left unchanged" in r for r in reasons(again, "memory-unitu-unlisted.json"))
    unit = await MemoryUnitRepository(database).get("u-unlisted")
    assert unit is not None and unit.conversation_messages == [Message(role="user", content="stray")]


async def test_a_core_recording_into_its_own_session_keeps_it(state: Path, database: Any) -> None:
    cores, units = MemoryCoreRepository(database), MemoryUnitRepository(database)
    current = await cores.session_id("partner")
    await units.append(current, [Message(role="user", content="live")], "live", core_id="partner")

    report = await imported(state, database)

    assert not report.session_set and await cores.session_id("partner") == current
    assert any("already records into session" in i.reason for i in report.warnings)


async def test_a_fresh_core_with_an_unused_session_adopts_partners(state: Path, database: Any) -> None:
    await MemoryCoreRepository(database).get_or_create("partner")

    report = await imported(state, database)

    assert report.session_set and await MemoryCoreRepository(database).session_id("partner") == "u-ok"


async def test_a_missing_memory_json_is_reported_and_units_still_import(
    tmp_path: Path, database: Any
) -> None:
    unit_file(tmp_path, "only", {"conversation_messages": [msg("user", "x")]})

    report = await import_partner_state(tmp_path, database)

    assert report.units_imported == 1 and report.session_id is None
    assert [(i.file, i.reason) for i in report.skipped] == [("core/memory.json", "does not exist")]
    assert await MemoryCoreRepository(database).get("default") is None


async def test_a_broken_memory_json_is_reported(tmp_path: Path, database: Any) -> None:
    write(tmp_path, "core/memory.json", {"memory_session_id": "", "memory_unit_uuid_set": ["a", 7]})

    report = await import_partner_state(tmp_path, database)

    assert [f"{i.item}: {i.reason}" for i in report.skipped] == [
        "memory_session_id: missing or not a non-blank string",
        "memory_unit_uuid_set[1]: not a unit id: 7",
        "unit: listed in core/memory.json but the file does not exist",
    ]


async def test_unknown_keys_of_a_unit_file_are_reported_for_that_file(tmp_path: Path, database: Any) -> None:
    write(tmp_path, "core/memory.json", {"memory_unit_uuid_set": ["u1", "u2"]})
    unit_file(
        tmp_path, "u1", {"conversation_messages": [msg("user", "x")], "slices": [slice_("s", 0, 1, "x", 1)]}
    )
    unit_file(tmp_path, "u2", {"conversation_messages": [], "memory_slices": []})

    report = await import_partner_state(tmp_path, database)

    assert report.unknown_keys == {"core/memory/memory-unitu1.json": ["slices"]}
    assert report.slices_imported == 0


async def test_unknown_keys_of_memory_json_are_reported(tmp_path: Path, database: Any) -> None:
    write(
        tmp_path, "core/memory.json", {"memory_unit_uuid_set": [], "session": "x", "memory_session_id": "s"}
    )

    report = await import_partner_state(tmp_path, database)

    assert report.unknown_keys == {"core/memory.json": ["session"]}


async def test_a_path_that_is_not_a_directory_is_refused(tmp_path: Path, database: Any) -> None:
    with pytest.raises(InvalidInput, match="not a directory"):
        await import_partner_state(tmp_path / "nowhere", database)


async def test_progress_is_reported_before_the_first_and_after_each_unit_file(
    state: Path, database: Any
) -> None:
    calls: list[tuple[int, int]] = []

    await import_partner_state(state, database, progress=lambda done, total: calls.append((done, total)))

    assert calls == [(n, 8) for n in range(0, 9)]
