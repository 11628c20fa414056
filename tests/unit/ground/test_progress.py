"""Long-running work reports progress to a callback: the library counts, the CLI draws a bar on a terminal
only and stays quiet in a pipe."""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

import partner_repo
from partner_repo import UnitChecker, in_memory_database, init_repository, run_migrations
from partner_repo.cli import _progress as cli_progress
from partner_repo.cli import main
from partner_repo.mongo import UNITS
from tests.unit.migrations.support import MIGRATIONS

Calls = list[tuple[int, int]]


def recorder() -> tuple[Calls, Any]:
    calls: Calls = []
    return calls, lambda done, total: calls.append((done, total))


@pytest.fixture
async def three_units() -> Any:
    database = await init_repository(in_memory_database())
    await database[UNITS].insert_many([{"_id": f"u{n}", "core_id": "c"} for n in range(3)])
    return database


async def test_check_tells_progress_each_unit_it_checked(three_units: Any) -> None:
    calls, progress = recorder()

    await UnitChecker(three_units).check(progress=progress)

    assert calls == [(0, 3), (1, 3), (2, 3), (3, 3)]


async def test_repair_tells_progress_each_unit_it_went_through(three_units: Any) -> None:
    calls, progress = recorder()

    await UnitChecker(three_units).repair("c", progress=progress)

    assert calls == [(0, 3), (1, 3), (2, 3), (3, 3)]


async def test_migrations_tell_progress_each_migration_run() -> None:
    database = in_memory_database()
    forward, on_forward = recorder()
    backward, on_backward = recorder()

    await run_migrations(database, MIGRATIONS, progress=on_forward)
    await run_migrations(database, MIGRATIONS, backward=True, progress=on_backward)

    count = len(list(MIGRATIONS.glob("[!_]*.py")))
    assert forward == [(n, count) for n in range(count + 1)]
    assert backward == [(0, 1), (1, 1)]


# -- the command line --------------------------------------------------------------------------------------

COMMANDS = {
    "check": ("checking units", ["check"]),
    "repair": ("repairing units", ["repair"]),
    "import-state": ("importing unit files", ["import-state", "{state}"]),
    "migrate": ("running migrations", ["migrate"]),
}


@pytest.fixture
def state(tmp_path: Path) -> Path:
    units = tmp_path / "core" / "memory"
    units.mkdir(parents=True)
    (tmp_path / "core" / "memory.json").write_text(json.dumps({"memory_unit_uuid_set": ["u1"]}))
    (units / "memory-unitu1.json").write_text(json.dumps({"conversation_messages": []}))
    return tmp_path


def run(command: str, state: Path) -> Result:
    arguments = [argument.format(state=state) for argument in COMMANDS[command][1]]
    return CliRunner().invoke(main, ["--in-memory", "--log-level", "WARNING", *arguments])


@pytest.mark.parametrize("command", COMMANDS)
def test_a_long_running_command_draws_a_progress_bar_on_a_terminal(
    command: str, state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cli_progress, "on_terminal", lambda: True)

    result = run(command, state)

    assert result.exit_code == 0, result.output
    assert COMMANDS[command][0] in result.stderr


@pytest.mark.parametrize("command", COMMANDS)
def test_a_long_running_command_stays_quiet_in_a_pipe(command: str, state: Path) -> None:
    result = run(command, state)

    assert result.exit_code == 0, result.output
    assert result.stderr == ""


def test_the_library_below_the_cli_draws_nothing_itself() -> None:
    root = Path(partner_repo.__file__).parent
    for file in root.rglob("*.py"):
        if file.parent.name == "cli":
            continue
        for node in ast.walk(ast.parse(file.read_text())):
            names = (
                [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else []
            )
            assert not any(n.split(".")[0] == "rich" for n in names), file
