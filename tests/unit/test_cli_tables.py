"""Tables never break an id over lines, however narrow the terminal (or the 80 columns of a pipe): a UUID
split in two cannot be copied. Summaries and errors wrap instead."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from admin_support import T0, at, insert_raw, raw_unit, seed_unit
from cli_support import commands_open
from click.testing import CliRunner

from partner_repo import DeadLetterRepository, in_memory_database, init_repository
from partner_repo.cli import main

SLICE = str(uuid.UUID(int=1))
UNIT = str(uuid.UUID(int=2))
CORE = "agent-" + "7" * 60
BROKEN = "unit-written-by-another-tool-" + "9" * 40
SUMMARY = "A long summary of the trip to Kyoto that wraps over several lines in a narrow terminal, as it may."


@pytest.fixture(autouse=True)
def database(monkeypatch: pytest.MonkeyPatch) -> Any:
    """Every command sees one unit with long ids, a broken unit, and a dead letter naming them."""

    async def seed() -> Any:
        db = await init_repository(in_memory_database("cli_tables"))
        await seed_unit(db, UNIT, CORE, [(SLICE, at(1), SUMMARY)])
        await insert_raw(db, raw_unit(BROKEN, CORE, message_count=7))
        await DeadLetterRepository(db).record(
            group="group-" + "g" * 40,
            consumer="search-indexer-" + "c" * 40,
            unit_id=UNIT,
            core_id=CORE,
            slice_id=SLICE,
            error=RuntimeError("the index is down " * 5),
            attempts=5,
            at=T0,
        )
        return db

    return commands_open(monkeypatch, asyncio.run(seed()))


@pytest.mark.parametrize(
    ("command", "ids"),
    [
        (["slices", "list"], [SLICE, UNIT, CORE]),
        (["slices", "show", SLICE], [SLICE, UNIT, CORE]),
        (["units", "show", UNIT], [SLICE, UNIT, CORE]),
        (["slices", "stats"], [UNIT, CORE]),
        (["check"], [BROKEN, CORE]),
        (["dead-letters", "list"], [SLICE, UNIT, "search-indexer-" + "c" * 40, "group-" + "g" * 40]),
    ],
    ids=lambda value: " ".join(value[:2]) if isinstance(value[0], str) and len(value[0]) < 20 else "",
)
@pytest.mark.parametrize("columns", ["40", "80"])
def test_a_table_never_breaks_an_id_over_lines(command: list[str], ids: list[str], columns: str) -> None:
    result = CliRunner(env={"COLUMNS": columns}).invoke(main, ["--in-memory", *command])

    assert result.exit_code in (0, 1), result.output
    lines = result.stdout.splitlines()
    for identifier in ids:
        assert any(identifier in line for line in lines), (identifier, result.stdout)


def test_a_summary_still_wraps_to_fit_the_terminal() -> None:
    result = CliRunner(env={"COLUMNS": "90"}).invoke(main, ["--in-memory", "slices", "show", SLICE])

    fields = result.stdout.split("\nmessages")[0]
    assert max(len(line.rstrip()) for line in fields.splitlines()) <= 90
    assert SUMMARY not in fields and " ".join(fields.split()).count(SUMMARY) == 1
