"""The root's options (--uri, --db, --in-memory, --log-level, --log-format) work after the command as well as
before it; given after, they win over the root's."""

from __future__ import annotations

from typing import Any

import pytest
from click.testing import CliRunner, Result

from partner_repo.cli import _shared as shared
from partner_repo.cli import main
from partner_repo.cli._runtime import Connection

CONSUMER = "partner_repo.listener.examples:print_consumer"


@pytest.fixture
def opened(monkeypatch: pytest.MonkeyPatch) -> list[Connection]:
    """Every connection a command opens, recorded; it then stops (exit 3) instead of connecting."""
    seen: list[Connection] = []

    async def record(self: Connection, **options: Any) -> Any:
        seen.append(self)
        raise SystemExit(3)

    monkeypatch.setattr(Connection, "open", record)
    return seen


def run(*arguments: str) -> Result:
    return CliRunner(env={"MONGODB_URI": "", "PARTNER_REPO_DB": ""}).invoke(main, list(arguments))


def test_in_memory_after_the_command_runs_a_command_that_runs_until_stopped(opened: list[Connection]) -> None:
    result = run("listen", "--consumer", CONSUMER, "--in-memory")

    assert result.exit_code == 3, result.output
    assert [(c.uri, c.in_memory) for c in opened] == [(None, True)]


def test_the_refusal_suggesting_in_memory_works_as_written(opened: list[Connection]) -> None:
    refused = run("listen", "--consumer", CONSUMER)
    as_suggested = run("listen", "--consumer", CONSUMER, "--in-memory")

    assert refused.exit_code == 2 and "(or --in-memory to run it there anyway)" in refused.stderr
    assert as_suggested.exit_code == 3


def test_uri_and_db_after_a_subcommand_of_a_group_are_used(opened: list[Connection]) -> None:
    result = run("slices", "list", "--uri", "mongodb://db.example:27017/", "--db", "agents")

    assert result.exit_code == 3, result.output
    assert [(c.uri, c.db_name, c.uri_from) for c in opened] == [
        ("mongodb://db.example:27017/", "agents", "--uri")
    ]


def test_an_option_after_the_command_wins_over_the_same_option_before_it(opened: list[Connection]) -> None:
    result = run("--db", "before", "check", "--db", "after")

    assert result.exit_code == 3 and [c.db_name for c in opened] == ["after"]


def test_a_uri_after_the_command_replaces_in_memory_before_it(opened: list[Connection]) -> None:
    result = run("--in-memory", "check", "--uri", "mongodb://db.example/")

    assert result.exit_code == 3
    assert [(c.uri, c.in_memory) for c in opened] == [("mongodb://db.example/", False)]


def test_a_bad_option_value_after_the_command_is_one_line_and_exit_2(opened: list[Connection]) -> None:
    result = run("check", "--uri", "http://nowhere/")

    assert result.exit_code == 2
    assert result.stderr == "error: --uri: 'http://nowhere/' is not a mongodb:// or mongodb+srv:// URI\n"


def test_log_options_after_the_command_set_the_logging(monkeypatch: pytest.MonkeyPatch) -> None:
    configured: list[tuple[str, str]] = []

    def record(level: str, log_format: str) -> Any:
        configured.append((level, log_format))
        return lambda: None

    monkeypatch.setattr(shared, "configure_logging", record)

    result = run("roll-idle", "--once", "--in-memory", "--log-format", "json", "--log-level", "debug")

    assert result.exit_code == 0, result.output
    assert configured == [("INFO", "text"), ("DEBUG", "json")]


def test_root_options_between_a_group_and_its_subcommand_are_used(opened: list[Connection]) -> None:
    result = run("slices", "--uri", "mongodb://db.example/", "--db", "agents", "list")

    assert result.exit_code == 3, result.output
    assert [(c.uri, c.db_name) for c in opened] == [("mongodb://db.example/", "agents")]


def test_in_memory_between_a_group_and_its_subcommand_runs_a_writing_command(
    opened: list[Connection],
) -> None:
    result = run("dead-letters", "--in-memory", "replay", "--consumer", CONSUMER)

    assert result.exit_code == 3, result.output
    assert [(c.uri, c.in_memory) for c in opened] == [(None, True)]


def test_an_option_after_the_subcommand_wins_over_the_same_option_after_the_group(
    opened: list[Connection],
) -> None:
    result = run(
        "--db", "root", "slices", "--in-memory", "--db", "group", "list", "--uri", "mongodb://db.example/"
    )

    assert result.exit_code == 3, result.output
    assert [(c.uri, c.in_memory, c.db_name) for c in opened] == [("mongodb://db.example/", False, "group")]
