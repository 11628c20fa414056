"""``partner-repo resummarize``: placeholder summaries replaced from the command line, one line per slice (or
``--json``), exit 1 when a summary failed again."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from click.testing import CliRunner

from partner_repo import (
    SUMMARY_ON_EXCEPTION,
    MemoryCoreRepository,
    MemoryUnitRepository,
    Message,
    RollingConfig,
    RollingService,
)
from partner_repo.cli import main
from tests.unit.cli.support import Seed
from tests.unit.rolling.support import T0, numbered


async def down(messages: list[Message]) -> str:
    raise RuntimeError("model down")


async def custom_summarizer(messages: list[Message]) -> str:
    """Importable as ``tests.unit.cli.test_resummarize:custom_summarizer`` for the --summarizer option."""
    return f"custom: {len(messages)} messages"


def still_down(messages: list[Message]) -> str:
    """Importable as ``tests.unit.cli.test_resummarize:still_down``: the model is still down."""
    raise RuntimeError("still down")


@pytest.fixture
def database(monkeypatch: pytest.MonkeyPatch, every_command_uses: Callable[[Seed], Any]) -> Any:
    """The command's database: two cores whose last roll stored a placeholder, and one rolled fine."""
    monkeypatch.setenv("PARTNER_REPO_ROLLING_SUMMARIZE_BACKOFF", "0")

    async def prepare(db: Any) -> None:
        cores = MemoryCoreRepository(db)
        config = RollingConfig(summarize_attempts=1)
        for core_id, summarizer in (("alice", down), ("bob", down), ("carol", custom_summarizer)):
            await cores.record(core_id, numbered(0, 4), at=T0)
            await RollingService(db, summarizer, config).roll(core_id, now=T0 + timedelta(minutes=1))

    return every_command_uses(prepare)


def summaries(database: Any) -> dict[str, str]:
    async def read() -> dict[str, str]:
        units = MemoryUnitRepository(database)
        found = {}
        for core_id in ("alice", "bob", "carol"):
            (unit,) = await units.list_units(core_id)
            found[core_id] = unit.complete_slices()[0].summary
        return found

    return asyncio.run(read())


def test_it_replaces_every_placeholder_and_prints_a_line_per_slice(database: Any) -> None:
    result = CliRunner(env={"COLUMNS": "250"}).invoke(
        main,
        ["--in-memory", "resummarize", "--summarizer", "tests.unit.cli.test_resummarize:custom_summarizer"],
    )

    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert len(lines) == 3 and all(line.startswith("replaced slice ") for line in lines[:2])
    assert "(core alice), revision 1: custom: 4 messages" in result.stdout
    assert lines[-1] == "2 replaced, 0 failed again, 0 skipped"
    assert summaries(database) == {core: "custom: 4 messages" for core in ("alice", "bob", "carol")}


def test_core_limits_it_to_that_cores_slices(database: Any) -> None:
    result = CliRunner().invoke(main, ["--in-memory", "resummarize", "--core", "alice"])

    assert result.exit_code == 0, result.output
    assert summaries(database)["bob"] == SUMMARY_ON_EXCEPTION
    assert summaries(database)["alice"] != SUMMARY_ON_EXCEPTION  # the extractive summarizer by default


def test_json_lists_each_slice_and_whether_more_are_left(database: Any) -> None:
    result = CliRunner().invoke(main, ["--in-memory", "resummarize", "--limit", "1", "--json"])

    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["more"] is True
    [piece] = report["slices"]
    assert piece["outcome"] == "replaced" and piece["revision"] == 1 and piece["core_id"] in ("alice", "bob")
    assert set(piece) == {"unit_id", "core_id", "slice_id", "outcome", "revision", "summary", "detail"}


def test_a_summary_that_fails_again_exits_1_and_keeps_the_placeholder(database: Any) -> None:
    result = CliRunner().invoke(
        main, ["--in-memory", "resummarize", "--summarizer", "tests.unit.cli.test_resummarize:still_down"]
    )

    assert result.exit_code == 1, result.output
    assert "failed slice " in result.stdout and "RuntimeError: still down" in result.stdout
    assert "0 replaced, 2 failed again, 0 skipped" in result.stdout
    assert summaries(database)["alice"] == SUMMARY_ON_EXCEPTION


def test_nothing_to_replace_is_said_and_exits_0(database: Any) -> None:
    CliRunner().invoke(main, ["--in-memory", "resummarize"])

    result = CliRunner().invoke(main, ["--in-memory", "resummarize"])

    assert result.exit_code == 0 and result.stdout == "0 replaced, 0 failed again, 0 skipped\n"


@pytest.mark.parametrize(
    "arguments",
    [
        ["--summarizer", "tests.unit.cli.test_resummarize:nothing_here"],
        ["--summarizer", "not a path"],
        ["--limit", "0"],
    ],
)
def test_a_bad_option_is_a_usage_error(database: Any, arguments: list[str]) -> None:
    result = CliRunner().invoke(main, ["--in-memory", "resummarize", *arguments])

    assert result.exit_code == 2, result.output
    assert summaries(database)["alice"] == SUMMARY_ON_EXCEPTION
