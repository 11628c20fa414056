"""Every command logs to stderr: text lines by default, JSON lines on request, at --log-level (INFO by
default), masked whichever logger made the record; a command leaves logging as it found it."""

from __future__ import annotations

import io
import json
import logging
import re

import pytest
from click.testing import CliRunner, Result

from partner_repo.cli import main
from partner_repo.cli._logs import configure_logging

SECRET = "s3cr3t-Pa55"
MIGRATION_LINE = "partner_repo.migrating.runner: migrations forward from the start"


def migrate(*options: str, **environment: str) -> Result:
    return CliRunner(env={"MONGODB_URI": "", **environment}).invoke(
        main, [*options, "--in-memory", "migrate"]
    )


def test_info_records_are_shown_on_stderr_by_default() -> None:
    result = migrate()

    assert result.exit_code == 0, result.output
    assert f" INFO    {MIGRATION_LINE}" in result.stderr
    assert MIGRATION_LINE not in result.stdout


def test_a_text_line_starts_with_the_time_in_utc() -> None:
    line = next(line for line in migrate().stderr.splitlines() if MIGRATION_LINE in line)

    assert re.match(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z INFO ", line), line


def test_the_log_level_option_hides_less_severe_records() -> None:
    assert MIGRATION_LINE not in migrate("--log-level", "WARNING").stderr


def test_the_log_level_comes_from_partner_repo_log_level() -> None:
    assert MIGRATION_LINE not in migrate(PARTNER_REPO_LOG_LEVEL="warning").stderr


def test_an_unknown_log_level_is_a_usage_error() -> None:
    assert migrate("--log-level", "LOUD").exit_code == 2


def test_json_lines_are_one_object_per_record() -> None:
    result = migrate("--log-format", "json")

    records = [json.loads(line) for line in result.stderr.splitlines()]
    first = next(r for r in records if r["message"].startswith("migrations forward from the start"))
    assert set(first) == {"time", "level", "logger", "message"}
    assert (first["level"], first["logger"]) == ("INFO", "partner_repo.migrating.runner")
    assert first["time"].endswith("Z")


def test_the_log_format_comes_from_partner_repo_log_format() -> None:
    result = migrate(PARTNER_REPO_LOG_FORMAT="json")

    assert all(json.loads(line) for line in result.stderr.splitlines())


def log_through_the_cli_handler(log_format: str) -> str:
    """What the CLI's handler writes for an error logged with a traceback, both quoting a password; pytest's
    own capture handler formats the traceback first, as any handler before the CLI's may."""
    stream = io.StringIO()
    restore = configure_logging("INFO", log_format, stream)
    try:
        logger = logging.getLogger("someone.else")  # not a partner_repo logger: no record factory masking
        try:
            raise RuntimeError(f"cannot reach mongodb://app:{SECRET}@db.example.net")
        except RuntimeError:
            logger.exception("connecting to mongodb://app:%s@db.example.net failed", SECRET)
    finally:
        restore()
    return stream.getvalue()


@pytest.mark.parametrize("log_format", ["text", "json"])
def test_credentials_are_masked_in_records_of_any_logger(log_format: str) -> None:
    output = log_through_the_cli_handler(log_format)

    assert SECRET not in output and "mongodb://app:***@db.example.net" in output


def test_a_json_record_with_a_traceback_carries_it_as_exc() -> None:
    (line,) = log_through_the_cli_handler("json").splitlines()
    record = json.loads(line)

    assert record["exc"].startswith("Traceback (most recent call last):")
    assert record["exc"].rstrip().endswith("RuntimeError: cannot reach mongodb://app:***@db.example.net")


def test_a_command_leaves_logging_as_it_found_it() -> None:
    root = logging.getLogger()
    before = (list(root.handlers), root.level)

    migrate("--log-level", "DEBUG")

    assert (list(root.handlers), root.level) == before


CONSUMER = "partner_repo.listener.examples:print_consumer"
UNREACHABLE = "mongodb://127.0.0.1:1/?serverSelectionTimeoutMS=200"


@pytest.mark.parametrize(
    ("arguments", "code", "message"),
    [
        (["listen", "--uri", UNREACHABLE, "--consumer", CONSUMER], 2, "cannot reach MongoDB at "),
        (["listen", "--consumer", CONSUMER], 2, "partner-repo listen runs until stopped, but "),
        (["--in-memory", "slices", "show", "nope"], 1, "no slice 'nope'"),
    ],
    ids=["listen, server unreachable", "listen, no database named", "not found"],
)
def test_with_json_logs_the_failure_line_is_json_too(arguments: list[str], code: int, message: str) -> None:
    result = CliRunner(env={"MONGODB_URI": ""}).invoke(
        main, ["--log-format", "json", *arguments], prog_name="partner-repo"
    )

    assert result.exit_code == code, result.output
    records = [json.loads(line) for line in result.stderr.splitlines()]
    assert (records[-1]["level"], records[-1]["logger"]) == ("ERROR", "partner_repo.cli")
    assert records[-1]["message"].startswith(message), records[-1]
