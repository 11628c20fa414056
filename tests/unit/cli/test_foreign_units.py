"""Finding 8 of issue 30 at the command line: a state imported into a second core, a core whose session unit
is another core's. Every command that fails says so in one line and exits non-zero."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from partner_repo import MemoryCoreRepository, MemoryUnitRepository
from partner_repo.cli import main
from tests.unit.cli.support import Seed
from tests.unit.rolling.support import T0, numbered

UNIT = "partner-unit-1"


@pytest.fixture
def state(tmp_path: Path) -> Path:
    (tmp_path / "core" / "memory").mkdir(parents=True)
    (tmp_path / "core" / "memory.json").write_text(
        json.dumps({"memory_session_id": UNIT, "memory_unit_uuid_set": [UNIT]})
    )
    unit = {"conversation_messages": [{"role": m.role, "content": m.content} for m in numbered(0, 4)]}
    (tmp_path / "core" / "memory" / f"memory-unit{UNIT}.json").write_text(json.dumps(unit))
    return tmp_path


async def nothing(database: Any) -> None:
    """An empty database: the tests import into it."""


@pytest.fixture
def database(every_command_uses: Callable[[Seed], Any]) -> Any:
    return every_command_uses(nothing)


def run(*arguments: str) -> Any:
    return CliRunner().invoke(main, ["--in-memory", *arguments])


def test_importing_into_a_second_core_is_one_line_naming_the_owner_and_exit_1(
    database: Any, state: Path
) -> None:
    assert run("import-state", str(state), "--core", "first").exit_code == 0

    refused = run("import-state", str(state), "--core", "second")

    assert refused.exit_code == 1
    assert refused.stderr.strip().splitlines() == [
        f"error: unit {UNIT!r} belongs to core 'first', not 'second': import it into that core, or a copy "
        "under new ids (import-state --as-copy)"
    ]
    assert asyncio.run(MemoryCoreRepository(database).get("second")) is None


def test_as_copy_imports_the_state_into_a_second_core_under_new_ids(database: Any, state: Path) -> None:
    assert run("import-state", str(state), "--core", "first").exit_code == 0

    copied = run("import-state", str(state), "--core", "second", "--as-copy")

    assert copied.exit_code == 0, copied.output
    units = asyncio.run(MemoryUnitRepository(database).list_units("second"))
    assert len(units) == 1 and units[0].id != UNIT


def foreign_core(database: Any) -> None:
    """Core ``second`` records into core ``first``'s unit (as an import before the refusal left it)."""

    async def prepare() -> None:
        cores = MemoryCoreRepository(database)
        await MemoryUnitRepository(database).append(UNIT, numbered(0, 2), "s", core_id="first")
        await cores.set_session("second", UNIT)
        await cores.record("second", numbered(10, 14), at=T0)

    asyncio.run(prepare())


def test_roll_idle_once_that_cannot_roll_a_core_exits_1_with_one_line_and_no_traceback(database: Any) -> None:
    foreign_core(database)

    result = run("roll-idle", "--once", "--idle-after", "60")

    assert result.exit_code == 1
    assert "Traceback" not in result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert errors == [
        f"error: 1 idle core(s) could not be rolled; core 'second': unit {UNIT!r} belongs to core 'first', "
        "not 'second'"
    ]


def test_check_reports_the_foreign_session_and_repair_gives_a_fresh_one(database: Any) -> None:
    foreign_core(database)

    checked = run("check")
    repaired = run("repair")

    assert checked.exit_code == 1 and "so it cannot roll" in " ".join(checked.stdout.split())
    assert repaired.exit_code == 0 and "1 core(s) given a fresh session" in " ".join(repaired.stdout.split())
    assert run("check").exit_code == 0
