"""import_partner_state on values that can never be stored: text that is not valid Unicode, timestamps that
are no time, and content that breaks parsing itself. Each costs only its own item (or file), is reported with
the file, the item and why, and the import goes on, from the library as from ``partner-repo import-state``; a
database error still stops it."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from pymongo.errors import AutoReconnect

from partner_repo import ImportReport, MemoryUnitRepository, Message, UnitChecker, import_partner_state
from partner_repo.cli import main
from partner_repo.mongo import UNITS

MS = 1_709_280_000_000  # 2024-03-01T08:00:00Z in epoch milliseconds
HALF_AN_EMOJI = "\ud83d"  # json.dumps writes it as the escape "\ud83d", as a truncated UTF-16 pair reads
BAD_TIMES = {
    "NaN": float("nan"),
    "Infinity": float("inf"),
    "-Infinity": float("-inf"),
    "1e300": 1e300,
    "-1e300": -1e300,
    "10**30": 10**30,
    "-10**30": -(10**30),
}


def msg(role: str, content: str) -> dict[str, Any]:
    return {"role": role, "content": content}


def slice_(slice_id: str, start: int, end: int, summary: str, created: Any = MS) -> dict[str, Any]:
    return {
        "id": slice_id,
        "start_index": start,
        "end_index": end,
        "summary": summary,
        "created_timestamp": created,
    }


def unit_file(root: Path, unit_id: str, content: Any) -> str:
    """Writes ``memory-unit<unit_id>.json``; returns its name as the report shows it."""
    directory = root / "core" / "memory"
    directory.mkdir(parents=True, exist_ok=True)
    text = content if isinstance(content, str) else json.dumps(content)
    (directory / f"memory-unit{unit_id}.json").write_text(text, encoding="utf-8")
    return f"core/memory/memory-unit{unit_id}.json"


def issues(report: ImportReport | dict[str, Any], file: str, *, notes: bool = False) -> list[str]:
    """What the report says about ``file``: what was skipped, and the notes (``warnings``) if asked."""
    if isinstance(report, ImportReport):
        report = report.model_dump()
    found = report["skipped"] + (report["warnings"] if notes else [])
    return [f"{i['item']}: {i['reason']}" for i in found if i["file"] == file]


def cli_import(root: Path) -> tuple[int, str, dict[str, Any]]:
    """``import-state`` twice on fresh in-memory databases: its table output, and its ``--json`` report."""
    runner, memory = CliRunner(), {"MONGODB_URI": "", "PARTNER_REPO_DB": ""}
    table = runner.invoke(main, ["--in-memory", "import-state", str(root)], env=memory)
    as_json = runner.invoke(main, ["--in-memory", "import-state", str(root), "--json"], env=memory)
    assert as_json.exit_code == 0, as_json.output
    return table.exit_code, table.output, json.loads(as_json.output)


@pytest.fixture
def unicode_state(tmp_path: Path) -> Path:
    """A state directory where half an emoji sits in a message, a slice id, a summary, the session id, a
    listed unit id and a file name (bytes that are no UTF-8, as a Linux file system may hold)."""
    root = tmp_path / "state"
    listed = ["u-clean", "u-message", "u-slice", f"u-{HALF_AN_EMOJI}"]
    (root / "core").mkdir(parents=True)
    (root / "core" / "memory.json").write_text(
        json.dumps({"memory_session_id": f"s{HALF_AN_EMOJI}", "memory_unit_uuid_set": listed})
    )
    unit_file(root, "u-clean", {"conversation_messages": [msg("user", "all fine \U0001f600")]})
    unit_file(
        root,
        "u-message",
        {
            "update_timestamp": MS,
            "conversation_messages": [
                msg("user", "a"),
                msg("assistant", f"b {HALF_AN_EMOJI}"),
                msg("user", "c"),
            ],
            "memory_slices": [slice_("m-1", 2, 3, "covers c")],
        },
    )
    unit_file(
        root,
        "u-slice",
        {
            "update_timestamp": MS,
            "conversation_messages": [msg("user", "a"), msg("assistant", "b")],
            "memory_slices": [
                slice_(f"id-{HALF_AN_EMOJI}", 0, 1, "bad id"),
                slice_("bad-summary", 0, 1, f"sum {HALF_AN_EMOJI}"),
                slice_("kept", 0, 2, "kept"),
            ],
        },
    )
    (root / "core" / "memory" / os.fsdecode(b"memory-unit\xff.json")).write_text(json.dumps({}))
    return root


UNICODE_ISSUES = {
    "core/memory.json": [
        "memory_session_id: it is not valid Unicode text: a lone surrogate at position 1",
        "memory_unit_uuid_set[3]: it is not valid Unicode text: a lone surrogate at position 2",
    ],
    "core/memory/memory-unitu-message.json": [
        "message 1: content is not valid Unicode text: a lone surrogate at position 2",
        "unit: 1 skipped message(s): slice indexes shifted to the kept messages",
    ],
    "core/memory/memory-unitu-slice.json": [
        "slice 0: id is not valid Unicode text: a lone surrogate at position 3",
        "slice 1: summary is not valid Unicode text: a lone surrogate at position 4",
    ],
    "core/memory/memory-unit\\udcff.json": [
        "unit: the unit id of the file name is not valid Unicode text: a lone surrogate at position 0",
        "unit: not listed in core/memory.json (memory_unit_uuid_set); imported anyway",
    ],
}


async def test_text_that_is_not_valid_unicode_costs_only_its_item(unicode_state: Path, database: Any) -> None:
    report = await import_partner_state(unicode_state, database, core_id="partner")

    units = MemoryUnitRepository(database)
    assert await units.unit_ids("partner") == {"u-clean", "u-message", "u-slice"}
    message = await units.get("u-message")
    assert message is not None
    assert message.conversation_messages == [
        Message(role="user", content="a"),
        Message(role="user", content="c"),
    ]
    assert [(s.start_index, s.end_index) for s in message.complete_slices()] == [(1, 2)]  # still covers "c"
    piece = await units.get("u-slice")
    assert piece is not None and [s.id for s in piece.complete_slices()] == ["kept"]
    for file, expected in UNICODE_ISSUES.items():
        assert sorted(issues(report, file, notes=True)) == sorted(expected), file
    assert report.session_id is None and (await UnitChecker(database).check()).ok
    json.loads(report.model_dump_json())  # the report itself can be shown and serialized


def test_the_cli_imports_the_rest_and_names_each_file(unicode_state: Path) -> None:
    code, output, report = cli_import(unicode_state)

    assert code == 0 and "Traceback" not in output
    assert "imported 3 new unit(s), 5 message(s) (5 without a time), 2 slice(s)" in output
    assert report["units_imported"] == 3
    for file, expected in UNICODE_ISSUES.items():
        skipped = [issue for issue in expected if "imported anyway" not in issue and "shifted" not in issue]
        assert sorted(issues(report, file)) == sorted(skipped), file


# -- timestamps that are no time ---------------------------------------------------------------------------


def time_state(root: Path, field: str, value: Any) -> str:
    """A good unit, and one whose ``field`` (``update_timestamp`` or a slice's ``created_timestamp``) is
    ``value``; returns the bad unit's file name."""
    (root / "core").mkdir(parents=True, exist_ok=True)
    (root / "core" / "memory.json").write_text(json.dumps({"memory_unit_uuid_set": ["good", "bad"]}))
    unit_file(root, "good", {"update_timestamp": MS, "conversation_messages": [msg("user", "fine")]})
    updated = value if field == "update_timestamp" else MS
    created = value if field == "created_timestamp" else MS
    return unit_file(
        root,
        "bad",
        {
            "update_timestamp": updated,
            "conversation_messages": [msg("user", "q"), msg("assistant", "a")],
            "memory_slices": [slice_("s-1", 0, 2, "the turn", created)],
        },
    )


def expected_issue(field: str, shown: str) -> str:
    if field == "update_timestamp":
        return (
            f"update_timestamp: update_timestamp {shown} is not a time (epoch milliseconds within the years "
            "1-9999); the file's modification time is used instead"
        )
    return f"slice 0: created_timestamp {shown} is not a time (epoch milliseconds within the years 1-9999)"


def as_written(value: Any) -> str:
    return json.dumps(value)


@pytest.mark.parametrize("field", ["update_timestamp", "created_timestamp"])
@pytest.mark.parametrize("value", BAD_TIMES.values(), ids=BAD_TIMES.keys())
async def test_a_timestamp_that_is_no_time_is_reported_and_the_rest_imported(
    tmp_path: Path, database: Any, field: str, value: Any
) -> None:
    bad = time_state(tmp_path, field, value)

    report = await import_partner_state(tmp_path, database)

    assert issues(report, bad) == [expected_issue(field, as_written(value))]
    units = MemoryUnitRepository(database)
    assert await units.unit_ids("default") == {"good", "bad"}
    stored = await units.get("bad")
    assert stored is not None and len(stored.conversation_messages) == 2
    if field == "update_timestamp":  # the unit is kept, with the file's time; its slice too
        mtime = os.stat(tmp_path / bad).st_mtime
        assert stored.updated_at is not None and abs(stored.updated_at.timestamp() - mtime) < 0.001
        assert [s.id for s in stored.complete_slices()] == ["s-1"]
    else:  # the slice cannot be placed in time: skipped, as a slice with any broken field
        assert stored.complete_slices() == []


@pytest.mark.parametrize("field", ["update_timestamp", "created_timestamp"])
@pytest.mark.parametrize("value", BAD_TIMES.values(), ids=BAD_TIMES.keys())
def test_the_cli_reports_a_timestamp_that_is_no_time_and_exits_0(
    tmp_path: Path, field: str, value: Any
) -> None:
    bad = time_state(tmp_path, field, value)

    code, output, report = cli_import(tmp_path)

    assert code == 0 and "Traceback" not in output and "imported 2 new unit(s)" in output
    assert issues(report, bad) == [expected_issue(field, as_written(value))]


def test_a_very_long_bad_number_is_quoted_shortened(tmp_path: Path) -> None:
    bad = time_state(tmp_path, "update_timestamp", 10**100)

    _, _, report = cli_import(tmp_path)

    assert issues(report, bad) == [expected_issue("update_timestamp", "1000000000000000... (101 digits)")]


# -- the safety net: whatever else one file's content raises ------------------------------------------------


async def test_content_that_breaks_parsing_is_reported_for_its_file_and_the_import_goes_on(
    tmp_path: Path, database: Any
) -> None:
    unit_file(tmp_path, "good", {"conversation_messages": [msg("user", "fine")]})
    digits = unit_file(tmp_path, "digits", '{"update_timestamp": ' + "9" * 5000 + "}")
    nested = unit_file(tmp_path, "nested", '{"conversation_messages": ' + "[" * 100_000 + "]" * 100_000 + "}")

    report = await import_partner_state(tmp_path, database)

    assert await MemoryUnitRepository(database).unit_ids("default") == {"good"}
    (too_long,) = issues(report, digits)
    assert too_long.startswith("file: cannot be imported: ValueError: Exceeds the limit (4300 digits)")
    (too_deep,) = issues(report, nested)
    assert too_deep.startswith("file: cannot be imported: RecursionError: maximum recursion depth exceeded")


class UnreachableUnits:
    """A database whose units collection has lost its server: every call fails as the driver fails it."""

    def __init__(self, database: Any) -> None:
        self._database = database

    def __getitem__(self, name: str) -> Any:
        if name != UNITS:
            return self._database[name]

        class Lost:
            def __getattr__(self, attribute: str) -> Any:
                async def fail(*args: Any, **kwargs: Any) -> Any:
                    raise AutoReconnect("127.0.0.1:27017: connection refused")

                return fail

        return Lost()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._database, name)


async def test_a_database_error_is_not_taken_for_a_bad_file_and_stops_the_import(
    tmp_path: Path, memory_db: Any
) -> None:
    unit_file(tmp_path, "good", {"conversation_messages": [msg("user", "fine")]})

    with pytest.raises(AutoReconnect):
        await import_partner_state(tmp_path, UnreachableUnits(memory_db))
