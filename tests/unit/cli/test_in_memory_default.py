"""The in-memory default does not pretend to persist: with no database named, commands that write or run until
stopped refuse, read commands say what they read, and the library warns when it falls back to it."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from partner_repo import connect, connect_from_settings, in_memory_database, load_settings
from partner_repo.cli import main

CONSUMER = "partner_repo.listener.examples:print_consumer"
WRITERS = [
    ["import-state", "{state}"],
    ["repair"],
    ["migrate"],
    ["migrate", "--backward"],
    ["roll-idle", "--once"],
    ["dead-letters", "replay", "--consumer", CONSUMER],
    ["resummarize"],
]
DAEMONS = [["listen", "--consumer", CONSUMER], ["roll-idle"]]
READERS = [
    ["slices", "list"],
    ["slices", "stats"],
    ["check"],
    ["migrate", "--status"],
    ["dead-letters", "list"],
]


@pytest.fixture(autouse=True)
def no_database_named(monkeypatch: pytest.MonkeyPatch) -> None:
    """No MONGODB_URI, as on a fresh machine (a developer's own must not leak in)."""
    for name in list(os.environ):
        if name == "MONGODB_URI" or name.startswith("PARTNER_REPO_"):
            monkeypatch.delenv(name)


@pytest.fixture
def state(tmp_path: Path) -> Path:
    """A Partner state directory with one unit, which an import on the in-memory default would lose."""
    units = tmp_path / "core" / "memory"
    units.mkdir(parents=True)
    (tmp_path / "core" / "memory.json").write_text(json.dumps({"memory_unit_uuid_set": ["u1"]}))
    (units / "memory-unitu1.json").write_text(json.dumps({"id": "u1", "messages": [], "slices": []}))
    return tmp_path


def run(arguments: list[str], state: Path | None = None) -> Result:
    filled = [argument.format(state=state) for argument in arguments]
    return CliRunner().invoke(main, filled)


def refusal(result: Result) -> str:
    assert result.exit_code == 2, result.output
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("error: ") and "neither --uri nor MONGODB_URI is set" in line
    assert "--in-memory" in line and "--uri" in line
    return line


@pytest.mark.parametrize("arguments", WRITERS, ids=" ".join)
def test_a_writing_command_refuses_the_implicit_in_memory_database(arguments: list[str], state: Path) -> None:
    line = refusal(run(arguments, state))

    assert "writes to the database" in line and "gone when the command exits" in line


@pytest.mark.parametrize("arguments", DAEMONS, ids=" ".join)
def test_a_command_that_runs_until_stopped_refuses_the_implicit_in_memory_database(
    arguments: list[str],
) -> None:
    assert "runs until stopped" in refusal(run(arguments))


def test_an_import_on_the_implicit_default_imports_nothing_it_would_lose(state: Path) -> None:
    result = run(["import-state", str(state)])

    assert "imported" not in result.output


@pytest.mark.parametrize("arguments", [*WRITERS[:2], ["roll-idle", "--once"]], ids=" ".join)
def test_in_memory_given_explicitly_runs_a_writing_command(arguments: list[str], state: Path) -> None:
    result = run(["--in-memory", *arguments], state)

    assert result.exit_code == 0, result.output
    assert "neither --uri nor MONGODB_URI" not in result.stderr


@pytest.mark.parametrize("arguments", READERS, ids=" ".join)
def test_a_read_command_says_it_reads_the_empty_in_memory_database(arguments: list[str]) -> None:
    result = run(arguments)

    assert result.exit_code == 0, result.output
    assert result.stderr.splitlines()[0] == (
        "note: neither --uri nor MONGODB_URI is set: reading the embedded in-memory database, which is empty "
        "(nothing persists between commands)"
    )


def test_a_read_command_on_in_memory_given_explicitly_says_nothing_more() -> None:
    result = run(["--in-memory", "slices", "list"])

    assert result.exit_code == 0 and "note:" not in result.stderr


def test_the_note_leaves_json_on_stdout_intact() -> None:
    result = run(["slices", "list", "--json"])

    assert json.loads(result.stdout)["items"] == []


def test_in_memory_ignores_mongodb_uri() -> None:
    result = CliRunner(env={"MONGODB_URI": "mongodb://127.0.0.1:1/?serverSelectionTimeoutMS=100"}).invoke(
        main, ["--in-memory", "slices", "list"]
    )

    assert result.exit_code == 0, result.output


def test_in_memory_and_a_uri_exclude_each_other() -> None:
    result = run(["--in-memory", "--uri", "mongodb://db.example.net/", "check"])

    assert result.exit_code == 2
    assert result.stderr.strip() == "error: --in-memory and --uri exclude each other: give one of them"


def test_demo_stays_self_contained() -> None:
    result = CliRunner(env={"COLUMNS": "200"}).invoke(main, ["demo"])

    assert result.exit_code == 0, result.output
    assert "on the embedded in-memory backend" in result.stdout


# -- the library -------------------------------------------------------------------------------------------


async def test_falling_back_to_in_memory_because_mongodb_uri_is_unset_warns(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="partner_repo"):
        await connect_from_settings(load_settings())

    (record,) = [r for r in caplog.records if r.name == "partner_repo.settings"]
    assert record.levelno == logging.WARNING
    assert record.getMessage().startswith("MONGODB_URI is not set: using the embedded in-memory database")


async def test_asking_for_the_in_memory_database_does_not_warn(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG, logger="partner_repo"):
        await connect()
        await connect(None, "scratch")
        in_memory_database()

    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []
