"""Every way a command can fail ends in one line on stderr and the documented exit code: an argument that is
no UTF-8 and an option the install cannot serve (2), Ctrl-C (130, saying how far a resumable command got and
whether running it again continues)."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

import partner_repo.importing._importer as importer
from partner_repo import SliceQueries
from partner_repo.admin import UnitChecker
from partner_repo.cli import main
from partner_repo.rolling import RollingService
from tests.unit.admin.support import at, seed_unit
from tests.unit.cli.support import Seed

CONSUMER = "partner_repo.listener.examples:print_consumer"
NOT_UTF8 = "x\udcff"  # what Python makes of the bytes x\xff in sys.argv


def run(*arguments: str) -> Result:
    return CliRunner(env={"MONGODB_URI": "", "COLUMNS": "200"}).invoke(main, list(arguments))


def one_line(result: Result) -> str:
    assert result.stderr.count("\n") == 1, result.stderr
    assert "Traceback" not in result.output
    return result.stderr.strip()


@pytest.fixture
def seeded(every_command_uses: Callable[[Seed], Any]) -> Any:
    async def seed(database: Any) -> None:
        for n in range(3):
            await seed_unit(database, f"u{n}", "alice", [(f"s{n}", at(n), f"summary {n}")])

    return every_command_uses(seed)


@pytest.mark.parametrize(
    "arguments",
    [
        ["--db", NOT_UTF8, "check"],
        ["--in-memory", "check", "--core", NOT_UTF8],
        ["--in-memory", "slices", "show", NOT_UTF8],
        ["--in-memory", "forget", NOT_UTF8, "--yes"],
        ["--log-level", NOT_UTF8, "check"],
    ],
    ids=["--db", "check --core", "slices show", "forget", "--log-level"],
)
def test_an_argument_that_is_not_utf8_is_one_line_and_exit_2(arguments: list[str]) -> None:
    result = run(*arguments)

    position = arguments.index(NOT_UTF8) + 1
    assert result.exit_code == 2
    assert (
        one_line(result) == f"error: argument {position} ('x\\xff') is not valid UTF-8: pass it as UTF-8 text"
    )


def test_listen_with_a_metrics_port_without_the_metrics_extra_is_a_usage_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "prometheus_client", None)  # import fails as if not installed

    result = run("--in-memory", "listen", "--consumer", CONSUMER, "--metrics-port", "0")

    assert result.exit_code == 2
    assert one_line(result) == (
        "error: --metrics-port: metrics need prometheus_client: pip install 'partner-repo[metrics]'"
    )


def test_ctrl_c_exits_130_with_one_line_not_aborted(seeded: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    async def interrupted(*args: Any, **kwargs: Any) -> Any:
        raise KeyboardInterrupt

    monkeypatch.setattr(SliceQueries, "stats", interrupted)

    result = run("--in-memory", "slices", "stats")

    assert result.exit_code == 130 and one_line(result) == "interrupted"


def test_with_json_logs_the_interrupted_line_is_json_too(
    seeded: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def interrupted(*args: Any, **kwargs: Any) -> Any:
        raise KeyboardInterrupt

    monkeypatch.setattr(SliceQueries, "stats", interrupted)

    result = run("--in-memory", "--log-format", "json", "slices", "stats")

    record = json.loads(result.stderr.splitlines()[-1])
    assert result.exit_code == 130
    assert (record["level"], record["logger"], record["message"]) == (
        "WARNING",
        "partner_repo.cli",
        "interrupted",
    )


def test_an_interrupted_import_says_how_far_it_got_and_that_running_it_again_continues(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "core" / "memory").mkdir(parents=True)
    (tmp_path / "core" / "memory.json").write_text(json.dumps({"memory_unit_uuid_set": ["a", "b", "c"]}))
    for unit_id in "abc":
        (tmp_path / "core" / "memory" / f"memory-unit{unit_id}.json").write_text("{}")
    original = importer._import_file

    async def import_two_then_ctrl_c(units: Any, root: Path, file: Path, unit_id: str, *rest: Any) -> None:
        if unit_id == "c":
            raise KeyboardInterrupt
        await original(units, root, file, unit_id, *rest)

    monkeypatch.setattr(importer, "_import_file", import_two_then_ctrl_c)

    result = run("--in-memory", "import-state", str(tmp_path))

    assert result.exit_code == 130
    assert one_line(result) == (
        "interrupted: went through 2 of 3 unit file(s); run the same command again to continue: the units "
        "already imported are left as they are (counted as already present)"
    )


def test_an_interrupted_check_says_how_many_units_it_checked(
    seeded: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def check_one_then_ctrl_c(self: UnitChecker, core_id: Any, *, progress: Any) -> Any:
        progress(0, 3)
        progress(1, 3)
        raise KeyboardInterrupt

    monkeypatch.setattr(UnitChecker, "check", check_one_then_ctrl_c)

    result = run("--in-memory", "check")

    assert result.exit_code == 130
    assert one_line(result) == (
        "interrupted: checked 1 of 3 unit(s) (check only reads: nothing changed); run it again to check them "
        "all, from the start"
    )


def ctrl_c_after_one_page(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """``SliceQueries.find`` reads its first page, then is interrupted by Ctrl-C: the page it read."""
    original = SliceQueries.find
    pages: list[Any] = []

    async def one_page_then_ctrl_c(self: SliceQueries, **options: Any) -> Any:
        if pages:
            raise KeyboardInterrupt
        pages.append(await original(self, **options))
        return pages[0]

    monkeypatch.setattr(SliceQueries, "find", one_page_then_ctrl_c)
    return pages


def test_an_interrupted_streamed_slice_list_gives_the_cursor_to_continue(
    seeded: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    pages = ctrl_c_after_one_page(monkeypatch)

    result = run("--in-memory", "slices", "list", "--all", "--json", "--limit", "2")

    assert result.exit_code == 130
    assert one_line(result) == (
        f"interrupted: printed 2 slice(s); add --after {pages[0].next_cursor} to continue after the last "
        "page printed in full"
    )


def test_an_interrupted_table_slice_list_has_printed_what_it_read_and_gives_the_cursor_to_continue(
    seeded: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = SliceQueries.find
    pages = ctrl_c_after_one_page(monkeypatch)

    result = run("--in-memory", "slices", "list", "--all", "--limit", "2")

    assert result.exit_code == 130
    assert [s.id for s in pages[0].items] == ["s2", "s1"] and "s2" in result.stdout and "s1" in result.stdout
    assert one_line(result) == (
        f"interrupted: printed 2 slice(s); add --after {pages[0].next_cursor} to continue after the last "
        "page printed in full"
    )
    monkeypatch.setattr(SliceQueries, "find", original)
    continued = run("--in-memory", "slices", "list", "--all", "--after", pages[0].next_cursor)
    assert "s0" in continued.stdout and "s1" not in continued.stdout


def test_an_interrupted_roll_idle_once_says_how_many_cores_it_rolled(monkeypatch: pytest.MonkeyPatch) -> None:
    async def ctrl_c(
        self: RollingService, now: Any = None, *, on_rolled: Any = None, on_failed: Any = None
    ) -> Any:
        raise KeyboardInterrupt

    monkeypatch.setattr(RollingService, "roll_idle", ctrl_c)

    result = run("--in-memory", "roll-idle", "--once")

    assert result.exit_code == 130
    assert one_line(result) == (
        "interrupted: 0 idle core(s) rolled, each in full; run it again to roll the cores still idle (a roll "
        "cut short is taken up again once its lease expires)"
    )
