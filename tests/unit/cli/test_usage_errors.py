"""What an operator gets wrong (a setting, an option value, the URI) is one line on stderr and exit 2, at
once, never a traceback."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from partner_repo.cli import main
from partner_repo.cli._runtime import resolve_connection

SECRET = "s3cr3t-Pa55"


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test sees only the variables it sets (a developer's own MONGODB_URI must not leak in)."""
    for name in list(os.environ):
        if name == "MONGODB_URI" or name.startswith("PARTNER_REPO_"):
            monkeypatch.delenv(name)


def run(*arguments: str, **environment: str) -> Result:
    return CliRunner(env=environment).invoke(main, list(arguments))


def one_line_error(result: Result) -> str:
    """The single ``error:`` line of a command that exited 2."""
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert result.exception is None or isinstance(result.exception, SystemExit)
    return lines[0]


def test_a_duration_setting_that_is_no_duration_is_one_line_naming_the_variable() -> None:
    result = run("roll-idle", "--once", PARTNER_REPO_ROLLING_IDLE_AFTER="bogus")

    assert "PARTNER_REPO_ROLLING_IDLE_AFTER: not a duration" in one_line_error(result)


def test_a_rolling_setting_out_of_range_is_one_line_naming_the_variable() -> None:
    result = run("roll-idle", "--once", PARTNER_REPO_ROLLING_TRIGGER_LIMIT="-5")

    assert "PARTNER_REPO_ROLLING_TRIGGER_LIMIT: trigger_limit must be at least 2" in one_line_error(result)


@pytest.mark.parametrize(
    ("variable", "value", "command"),
    [
        ("PARTNER_REPO_WRITE_TIMEOUT_MS", "soon", ["slices", "list"]),
        ("PARTNER_REPO_ADMIN_READ_PREFERENCE", "anywhere", ["check"]),
        ("PARTNER_REPO_ROLLING_LEASE_DURATION", "-PT1M", ["dead-letters", "list"]),
        ("PARTNER_REPO_CREATE_INDEXES", "perhaps", ["migrate", "--status"]),
    ],
)
def test_any_unusable_setting_is_one_line_naming_the_variable(
    variable: str, value: str, command: list[str]
) -> None:
    result = run(*command, **{variable: value})

    assert f"invalid settings: {variable}: " in one_line_error(result)


def test_an_unusable_database_name_option_is_one_line() -> None:
    result = run("--db", "bad.db$", "slices", "list")

    assert one_line_error(result).startswith("error: --db: not a usable database name")


def test_an_unusable_database_name_in_the_environment_is_one_line_naming_the_variable() -> None:
    result = run("slices", "list", PARTNER_REPO_DB="bad.db$")

    assert "PARTNER_REPO_DB: not a usable database name" in one_line_error(result)


def test_a_uri_option_that_is_not_a_mongodb_uri_is_refused_at_once() -> None:
    started = time.monotonic()

    result = run("--uri", "notauri", "slices", "list")

    assert one_line_error(result) == "error: --uri: 'notauri' is not a mongodb:// or mongodb+srv:// URI"
    assert time.monotonic() - started < 2  # not a host name waited on for the server selection timeout


def test_a_mongodb_uri_variable_that_is_not_a_uri_is_refused_at_once() -> None:
    result = run("slices", "list", MONGODB_URI="notauri")

    assert one_line_error(result).startswith("error: MONGODB_URI: 'notauri' is not a mongodb://")


def test_a_refused_uri_is_shown_masked() -> None:
    result = run("--uri", f"app:{SECRET}@db.example.net", "slices", "list")

    assert SECRET not in one_line_error(result)


def test_an_empty_uri_option_counts_as_not_given() -> None:
    from_environment = resolve_connection("", None, {"MONGODB_URI": "mongodb://db.example.net"})
    from_nowhere = resolve_connection("", None, {})

    assert (from_environment.uri, from_environment.uri_from) == ("mongodb://db.example.net", "MONGODB_URI")
    assert from_nowhere.uri is None


def test_an_empty_uri_option_and_an_empty_mongodb_uri_mean_the_same() -> None:
    option = run("--uri", "", "slices", "list", "--json")
    variable = run("slices", "list", "--json", MONGODB_URI="")

    assert option.exit_code == variable.exit_code == 0, option.output + variable.output
    assert option.stdout == variable.stdout and option.stderr == variable.stderr


def test_the_reference_script_prints_its_usage_for_help(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "partner_repo.cli.reference", "--help"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
    )

    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage: python -m partner_repo.cli.reference")
    assert list(tmp_path.iterdir()) == []
