"""``partner-repo forget``: nothing without --yes, a report of what went, the same database every run."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import pytest
from click.testing import CliRunner, Result

from partner_repo import MemoryCoreRepository, MemoryEraser
from partner_repo.cli import main
from partner_repo.mongo import UNITS
from tests.erasure_support import Crash, CrashingDatabase, remember, unit_ids_of
from tests.unit.cli.support import Seed


@pytest.fixture
def cli_db(every_command_uses: Callable[[Seed], Any]) -> Any:
    """One in-memory database every invocation of the test uses, with two cores of rolled memory."""

    async def seed(database: Any) -> None:
        await remember(database, "alice", turns=2, refresh=True)
        await remember(database, "bob", turns=1)
        await MemoryCoreRepository(database).record("alice", [{"role": "user", "content": "live"}])

    return every_command_uses(seed)


def run(*args: str) -> Result:
    return CliRunner(env={"COLUMNS": "250"}).invoke(main, ["--in-memory", *args], catch_exceptions=False)


def test_without_yes_nothing_is_erased_and_what_would_be_is_counted(cli_db: Any) -> None:
    result = run("forget", "alice")

    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == [
        "would erase core 'alice': 2 unit(s), 2 slice(s), 4 message(s) in them, a window of 1 message(s), "
        "0 listener progress entries, 0 dead letter(s)",
        "nothing was changed: add --yes to erase it",
    ]
    assert len(asyncio.run(unit_ids_of(cli_db, "alice"))) == 2


def test_the_preview_of_a_window_only_erasure_counts_the_window(cli_db: Any) -> None:
    result = run("forget", "alice", "--window-only")

    assert result.exit_code == 0
    assert result.output.splitlines()[0] == "would erase the window of core 'alice': a window of 1 message(s)"


def test_the_preview_of_an_erasure_before_a_date_keeps_the_window_and_the_session(cli_db: Any) -> None:
    session = asyncio.run(MemoryCoreRepository(cli_db).session_id("alice"))

    result = run("forget", "alice", "--before", "2999-01-01", "--json")

    preview = json.loads(result.output)
    assert result.exit_code == 0 and (preview["scope"], preview["window_messages"]) == ("before", 0)
    assert (preview["units"], preview["kept_units"]) == (2, [session])


def test_the_preview_of_an_unknown_core_says_there_is_nothing_to_forget(cli_db: Any) -> None:
    result = run("forget", "nobody")

    assert result.exit_code == 0 and result.output.strip() == "nothing to forget for core 'nobody'"


def test_forget_erases_the_core_and_says_what_it_removed(cli_db: Any) -> None:
    result = run("forget", "alice", "--yes")

    assert result.exit_code == 0, result.output
    assert "forgot core alice (erasure " in result.output
    assert "2 unit(s), 2 slice(s), a window of 1 message(s)" in result.output
    assert asyncio.run(unit_ids_of(cli_db, "alice")) == set()
    assert len(asyncio.run(unit_ids_of(cli_db, "bob"))) == 1


def test_forgetting_again_says_there_is_nothing_left(cli_db: Any) -> None:
    run("forget", "alice", "--yes")

    result = run("forget", "alice", "--yes")

    assert result.exit_code == 0 and result.output.strip() == "nothing to forget for core alice"


def test_json_output_is_the_report(cli_db: Any) -> None:
    result = run("forget", "alice", "--yes", "--json")

    report = json.loads(result.stdout)
    assert (report["core_id"], report["units"], report["slices"], report["core_removed"]) == (
        "alice",
        2,
        2,
        True,
    )


def test_before_erases_only_the_older_units(cli_db: Any) -> None:
    result = run("forget", "alice", "--before", "2024-03-01T09:00:30Z", "--yes")

    assert result.exit_code == 0, result.output
    assert "forgot the units before 2024-03-01 09:00:30.000Z of core alice" in result.output
    assert "1 unit(s), 1 slice(s)" in result.output
    assert len(asyncio.run(unit_ids_of(cli_db, "alice"))) == 1


def test_window_only_clears_the_window_and_keeps_the_memory(cli_db: Any) -> None:
    result = run("forget", "alice", "--window-only", "--yes")

    assert result.exit_code == 0 and "cleared the window of core alice: 1 message(s)" in result.output
    assert len(asyncio.run(unit_ids_of(cli_db, "alice"))) == 2


def test_a_rerun_after_a_failure_finishes_the_erasure(cli_db: Any) -> None:
    with pytest.raises(Crash):
        asyncio.run(MemoryEraser(CrashingDatabase(cli_db, UNITS, "delete_many")).forget("alice"))

    listed = run("forget", "--pending")
    result = run("forget", "alice", "--yes")

    assert "core alice (core), pending since" in listed.output
    assert result.exit_code == 0 and ", resumed)" in result.output
    assert run("forget", "--pending").output.strip() == "no unfinished erasures"


def test_pending_with_yes_finishes_every_unfinished_erasure(cli_db: Any) -> None:
    for core_id in ("alice", "bob"):
        with pytest.raises(Crash):
            asyncio.run(MemoryEraser(CrashingDatabase(cli_db, UNITS, "delete_many")).forget(core_id))

    result = run("forget", "--pending", "--yes")

    assert result.exit_code == 0 and result.output.count(", resumed)") == 2
    assert asyncio.run(unit_ids_of(cli_db, "bob")) == set()


@pytest.mark.parametrize(
    ("args", "complaint"),
    [
        (["forget", "--yes"], "give the CORE to forget"),
        (["forget", "alice", "--before", "2024-01-01", "--window-only", "--yes"], "exclude each other"),
        (["forget", "alice", "--before", "yesterday", "--yes"], "not an ISO 8601 date"),
        (["forget", "alice", "--pending"], "--pending takes no CORE"),
    ],
)
def test_usage_errors_are_one_line_and_exit_2(cli_db: Any, args: list[str], complaint: str) -> None:
    result = run(*args)

    assert result.exit_code == 2 and complaint in result.output


def test_forget_refuses_the_implicit_in_memory_database(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MONGODB_URI", raising=False)
    result = CliRunner(env={"COLUMNS": "250"}).invoke(main, ["forget", "alice", "--yes"])

    assert result.exit_code == 2 and "in-memory" in result.output
