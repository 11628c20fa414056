"""Tables never break an id over lines, however narrow the terminal (or the 80 columns of a pipe): a UUID
split in two cannot be copied. Summaries and errors wrap instead."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest
from click.testing import CliRunner

from partner_repo import DeadLetterRepository
from partner_repo.cli import main
from tests.unit.admin.support import T0, at, insert_raw, raw_unit, seed_unit
from tests.unit.cli.support import Seed

SLICE = str(uuid.UUID(int=1))
UNIT = str(uuid.UUID(int=2))
CORE = "agent-" + "7" * 60
BROKEN = "unit-written-by-another-tool-" + "9" * 40
SUMMARY = "A long summary of the trip to Kyoto that wraps over several lines in a narrow terminal, as it may."


@pytest.fixture(autouse=True)
def database(every_command_uses: Callable[[Seed], Any]) -> Any:
    """Every command sees one unit with long ids, a broken unit, and a dead letter naming them."""

    async def seed(db: Any) -> None:
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

    return every_command_uses(seed)


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


# -- readable at 80 and 120 columns --------------------------------------------------------------------------

AGENT = "agent-" + str(uuid.UUID(int=3))  # a realistic core id: 42 characters


@pytest.fixture
def uuids(every_command_uses: Callable[[Seed], Any]) -> Any:
    """A unit and slice with UUID ids, of a core with a realistic id (every command sees only them)."""

    async def seed(db: Any) -> None:
        await seed_unit(db, UNIT, AGENT, [(SLICE, at(1), SUMMARY)])

    return every_command_uses(seed)


def render(command: list[str], columns: int) -> list[str]:
    result = CliRunner(env={"COLUMNS": str(columns)}).invoke(main, ["--in-memory", *command])
    assert result.exit_code == 0, result.output
    return [line.rstrip() for line in result.stdout.splitlines()]


@pytest.mark.parametrize("command", [["slices", "list"], ["units", "show", UNIT]], ids=" ".join)
@pytest.mark.parametrize("columns", [80, 120])
def test_slice_rows_fit_the_terminal_with_ids_whole_and_a_useful_summary(
    uuids: Any, command: list[str], columns: int
) -> None:
    lines = render(command, columns)

    assert max(len(line) for line in lines) <= columns
    for identifier in (SLICE, UNIT, AGENT):
        assert any(identifier in line for line in lines)
    assert any(SUMMARY[:32] in line for line in lines), "the summary keeps a useful width"


def test_at_80_columns_each_slice_is_a_card_with_each_id_on_a_line_of_its_own(uuids: Any) -> None:
    lines = render(["slices", "list"], 80)

    assert [line.split() for line in lines[:3]] == [["slice", SLICE], ["unit", UNIT], ["core", AGENT]]


def test_at_120_columns_the_ids_are_stacked_in_one_column_of_a_table(uuids: Any) -> None:
    lines = render(["slices", "list"], 120)

    header = next(line for line in lines if "created (UTC)" in line)
    assert "slice / unit / core" in header and "summary" in header
    first = next(number for number, line in enumerate(lines) if SLICE in line)
    assert UNIT in lines[first + 1] and AGENT in lines[first + 2]


def test_slices_stats_leaves_out_days_without_slices_unless_asked() -> None:
    quiet = render(["slices", "stats"], 80)
    every = render(["slices", "stats", "--all-days"], 80)

    assert not any(line.strip().startswith("│ 20") for line in quiet)
    assert any("none in the last 30 days" in line for line in quiet)
    assert sum(line.strip().startswith("│ 20") for line in every) == 30
