"""The admin commands through click's test runner: output for people and scripts, and exit codes.

The commands connect through ``Connection.open``; here it returns one seeded in-memory database, so every
invocation sees the same data.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from partner_repo.cli import main
from tests.unit.admin.support import at, insert_raw, raw_unit, seed_unit
from tests.unit.cli.support import Seed


@pytest.fixture
def cli_db(every_command_uses: Callable[[Seed], Any]) -> Any:
    """A seeded in-memory database every command invocation of the test uses."""

    async def seed(database: Any) -> None:
        await seed_unit(
            database, "u1", "alice", [("a1", at(1), "Kyoto trip planning"), ("a2", at(5), "Maples")]
        )
        await seed_unit(database, "u2", "bob", [("b1", at(3), "Garden tomatoes")], messages_per_slice=3)

    return every_command_uses(seed)


def run(*args: str) -> Result:
    return CliRunner(env={"COLUMNS": "220"}).invoke(main, ["--in-memory", *args], catch_exceptions=False)


def test_slices_list_prints_a_table_of_slices_newest_first(cli_db: Any) -> None:
    result = run("slices", "list")

    assert result.exit_code == 0
    lines = result.output.splitlines()
    rows = [line for line in lines if any(f" {i} " in line for i in ("a1", "a2", "b1"))]
    assert [next(i for i in ("a2", "b1", "a1") if f" {i} " in row) for row in rows] == ["a2", "b1", "a1"]
    assert "Kyoto trip planning" in result.output and "3 slice(s)" in result.output


def test_slices_list_applies_every_filter(cli_db: Any) -> None:
    result = run(
        "slices",
        "list",
        "--core",
        "alice",
        "--unit",
        "u1",
        "--from",
        "2024-03-01T09:00Z",
        "--to",
        "2024-03-01T09:05:00+00:00",
        "--text",
        "KYOTO",
        "--order",
        "asc",
        "--json",
    )

    assert result.exit_code == 0
    page = json.loads(result.output)
    assert [item["id"] for item in page["items"]] == ["a1"] and page["next_cursor"] is None
    assert page["items"][0]["created_at"] == "2024-03-01T09:01:00Z"


def test_slices_list_json_pages_carry_a_cursor_for_the_next_page(cli_db: Any) -> None:
    first = json.loads(run("slices", "list", "--limit", "2", "--json").output)
    second = json.loads(
        run("slices", "list", "--limit", "2", "--json", "--after", first["next_cursor"]).output
    )

    assert [i["id"] for i in first["items"]] == ["a2", "b1"]
    assert [i["id"] for i in second["items"]] == ["a1"] and second["next_cursor"] is None


def test_slices_list_all_walks_every_page(cli_db: Any) -> None:
    result = run("slices", "list", "--limit", "1", "--all", "--json")

    assert result.exit_code == 0
    document = json.loads(result.output)
    assert [i["id"] for i in document["items"]] == ["a2", "b1", "a1"] and document["next_cursor"] is None


def test_slices_list_all_as_a_table_shows_every_slice(cli_db: Any) -> None:
    result = run("slices", "list", "--limit", "1", "--all")

    assert result.exit_code == 0
    assert "3 slice(s)" in result.output and "--after" not in result.output


def test_a_single_page_table_says_how_to_continue(cli_db: Any) -> None:
    result = run("slices", "list", "--limit", "1")

    assert "1 slice(s)" in result.output and "more: add --after " in result.output


def test_a_forged_cursor_is_a_usage_error(cli_db: Any) -> None:
    result = run("slices", "list", "--after", "bm90LWEtY3Vyc29y.AAAA")

    assert result.exit_code == 2
    assert "Invalid value for --after" in result.output and "Traceback" not in result.output


def test_a_malformed_date_is_a_usage_error(cli_db: Any) -> None:
    result = run("slices", "list", "--from", "yesterday")

    assert result.exit_code == 2 and "is not an ISO 8601 date" in result.output


def test_slices_show_prints_the_slice_and_its_messages(cli_db: Any) -> None:
    result = run("slices", "show", "b1")

    assert result.exit_code == 0
    for text in ("Garden tomatoes", "u2/b1 message 0", "u2/b1 message 2", "bob", "[0, 3): 3 message(s)"):
        assert text in result.output


def test_slices_show_json_carries_the_messages(cli_db: Any) -> None:
    detail = json.loads(run("slices", "show", "a2", "--json").output)

    assert (detail["id"], detail["unit_id"], detail["core_id"]) == ("a2", "u1", "alice")
    assert [m["content"] for m in detail["messages"]] == ["u1/a2 message 0", "u1/a2 message 1"]


def test_slices_show_of_an_unknown_id_exits_1_with_one_line(cli_db: Any) -> None:
    result = run("slices", "show", "nope")

    assert result.exit_code == 1
    assert result.output.strip() == "error: no slice 'nope'"


def test_slices_stats_prints_totals_days_and_largest_units(cli_db: Any) -> None:
    result = run("slices", "stats")

    assert result.exit_code == 0
    assert "units" in result.output and "largest units" in result.output and "of 16 MiB" in result.output


def test_slices_stats_json_for_one_core(cli_db: Any) -> None:
    stats = json.loads(run("slices", "stats", "--core", "alice", "--days", "7", "--json").output)

    assert (stats["core_id"], stats["units"], stats["slices"], stats["messages"]) == ("alice", 1, 2, 4)
    assert len(stats["slices_per_day"]) == 7
    assert [u["unit_id"] for u in stats["largest_units"]] == ["u1"]


def test_units_show_prints_the_unit_without_messages_by_default(cli_db: Any) -> None:
    result = run("units", "show", "u1")

    assert result.exit_code == 0
    assert "alice" in result.output and "Maples" in result.output
    assert "u1/a1 message 0" not in result.output


def test_units_show_with_messages_prints_them(cli_db: Any) -> None:
    result = run("units", "show", "u2", "--messages")

    assert "u2/b1 message 2" in result.output


def test_units_show_json(cli_db: Any) -> None:
    unit = json.loads(run("units", "show", "u1", "--messages", "--json").output)

    assert unit["id"] == "u1" and unit["message_count"] == 4 and len(unit["messages"]) == 4
    assert [s["id"] for s in unit["slices"]] == ["a1", "a2"]


def test_units_show_of_an_unknown_unit_exits_1(cli_db: Any) -> None:
    result = run("units", "show", "nobody")

    assert result.exit_code == 1 and result.output.strip() == "error: no unit 'nobody'"


def test_check_of_sound_data_exits_0(cli_db: Any) -> None:
    result = run("check")

    assert result.exit_code == 0 and "checked 2 unit(s): 0 with violations" in result.output


def test_check_exits_1_and_names_the_violations_then_repair_fixes_them(cli_db: Any) -> None:
    asyncio.run(insert_raw(cli_db, raw_unit("broken", updated_at=None)))

    checked = run("check")
    repaired = run("repair", "--json")
    again = run("check", "--json")

    assert checked.exit_code == 1
    assert "broken" in checked.output and "missing_updated_at" in checked.output
    assert "partner-repo repair" in checked.output
    assert repaired.exit_code == 0
    assert [u["unit_id"] for u in json.loads(repaired.output)["repaired"]] == ["broken"]
    assert again.exit_code == 0 and json.loads(again.output)["units"] == []


def test_repair_exits_1_when_a_unit_cannot_be_repaired(cli_db: Any) -> None:
    asyncio.run(
        insert_raw(cli_db, raw_unit("robot", conversation_messages=[{"role": "robot", "content": "x"}]))
    )

    result = run("repair")

    assert result.exit_code == 1
    assert "not repaired" in result.output and "robot" in result.output


def test_check_of_an_unknown_core_says_so_in_one_line_and_exits_1(cli_db: Any) -> None:
    result = CliRunner().invoke(main, ["--in-memory", "check", "--core", "alcie"])

    assert result.exit_code == 1
    assert result.stderr == "error: no core 'alcie': no core document and no unit has that core id\n"


@pytest.mark.parametrize(
    "arguments",
    [
        ["slices", "list", "--core", "alcie"],
        ["slices", "stats", "--core", "alcie"],
        ["resummarize", "--core", "alcie"],
    ],
    ids=" ".join,
)
def test_an_unknown_core_is_one_line_and_exit_1(cli_db: Any, arguments: list[str]) -> None:
    result = CliRunner().invoke(main, ["--in-memory", *arguments])

    assert result.exit_code == 1
    errors = [line for line in result.stderr.splitlines() if not line[:4].isdigit()]  # not the log lines
    assert errors == ["error: no core 'alcie': no core document and no unit has that core id"]
    assert result.stdout == ""


def test_slices_list_of_an_unknown_unit_is_one_line_and_exit_1(cli_db: Any) -> None:
    result = CliRunner().invoke(main, ["--in-memory", "slices", "list", "--unit", "u9"])

    assert result.exit_code == 1 and result.stderr == "error: no unit 'u9'\n" and result.stdout == ""


def test_a_known_core_with_no_matching_slice_is_an_empty_answer(cli_db: Any) -> None:
    result = run("slices", "list", "--core", "alice", "--text", "nothing like this")

    assert result.exit_code == 0 and "0 slice(s)" in result.output


def test_repair_of_an_unknown_core_says_so_and_exits_1(cli_db: Any) -> None:
    result = CliRunner().invoke(main, ["--in-memory", "repair", "--core", "alcie"])

    assert result.exit_code == 1 and "no core 'alcie'" in result.stderr


def test_check_of_a_core_with_units_but_no_core_document_checks_them(cli_db: Any) -> None:
    result = run("check", "--core", "alice")

    assert result.exit_code == 0 and "checked 1 unit(s)" in result.output


def test_import_state_imports_a_partner_directory_and_reports(cli_db: Any, tmp_path: Path) -> None:
    (tmp_path / "core" / "memory").mkdir(parents=True)
    (tmp_path / "core" / "memory.json").write_text(
        json.dumps({"memory_session_id": "p1", "memory_unit_uuid_set": ["p1", "p2"]})
    )
    (tmp_path / "core" / "memory" / "memory-unitp1.json").write_text(
        json.dumps(
            {"conversation_messages": [{"role": "user", "content": "hi"}, {"role": "robot", "content": "x"}]}
        )
    )

    first = run("import-state", str(tmp_path), "--core", "partner")
    second = run("import-state", str(tmp_path), "--core", "partner", "--json")

    assert first.exit_code == 0
    assert "imported 1 new unit(s), 1 message(s)" in first.output
    assert "unknown role 'robot'" in first.output and "listed in core/memory.json" in first.output
    report = json.loads(second.output)
    assert (report["units_imported"], report["units_unchanged"]) == (0, 1)


def test_import_state_counts_and_shows_the_messages_whose_time_cannot_be_read(
    cli_db: Any, tmp_path: Path
) -> None:
    (tmp_path / "core" / "memory").mkdir(parents=True)
    (tmp_path / "core" / "memory.json").write_text(json.dumps({"memory_unit_uuid_set": ["p1"]}))
    messages = [
        {"role": "user", "content": "hi", "timestamp": "2024-03-01T08:00:00Z"},
        {"role": "assistant", "content": "hello", "timestamp": 1_709_280_000_000},
    ]
    (tmp_path / "core" / "memory" / "memory-unitp1.json").write_text(
        json.dumps({"conversation_messages": messages})
    )

    table = run("import-state", str(tmp_path), "--core", "partner")

    assert "imported 1 new unit(s), 2 message(s) (1 without a time)" in table.output
    assert '"2024-03-01T08:00:00Z" is not a time' in table.output and "message 0" in table.output


def test_import_state_of_a_missing_directory_is_a_usage_error(cli_db: Any, tmp_path: Path) -> None:
    result = run("import-state", str(tmp_path / "nope"))

    assert result.exit_code == 2 and "is not a directory" in result.output


def test_import_state_reports_unknown_keys_per_file_in_its_table_and_json(
    cli_db: Any, tmp_path: Path
) -> None:
    (tmp_path / "core" / "memory").mkdir(parents=True)
    (tmp_path / "core" / "memory.json").write_text(json.dumps({"memory_unit_uuid_set": ["p1"]}))
    (tmp_path / "core" / "memory" / "memory-unitp1.json").write_text(
        json.dumps({"conversation_messages": [], "slices": []})
    )

    table = run("import-state", str(tmp_path), "--core", "partner")
    as_json = run("import-state", str(tmp_path), "--core", "partner", "--json")

    assert "unknown keys, ignored (1 file(s))" in table.output
    assert "core/memory/memory-unitp1.json" in table.output and "slices" in table.output
    assert json.loads(as_json.output)["unknown_keys"] == {"core/memory/memory-unitp1.json": ["slices"]}


def test_import_state_refuses_a_directory_without_memory_json_in_one_line(
    cli_db: Any, tmp_path: Path
) -> None:
    (tmp_path / "core" / "memory").mkdir(parents=True)

    result = CliRunner().invoke(main, ["--in-memory", "import-state", str(tmp_path)])

    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        f"error: {tmp_path} is not a Partner state directory (it has no core/memory.json)"
    ]


def test_an_unreachable_server_prints_one_line_naming_the_host(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MONGODB_URI", raising=False)

    result = CliRunner().invoke(
        main, ["--uri", "mongodb://user:secret@127.0.0.1:1/?serverSelectionTimeoutMS=300", "slices", "list"]
    )

    assert result.exit_code == 2
    (line,) = result.output.strip().splitlines()
    assert line.startswith("error: cannot reach MongoDB at mongodb://user:***@127.0.0.1:1/")
    assert "secret" not in result.output and "Traceback" not in result.output
