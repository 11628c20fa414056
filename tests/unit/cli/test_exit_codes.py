"""Every command follows the one exit-code rule (partner_repo/cli/_exits.py, the table of docs/cli.md): usage
is 2, a bad setting is one line and 2, Ctrl-C is one line and 130, a name that names nothing is one line and
1, help is 0. A new command must be added here (the last test says so)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner, Result

from partner_repo.cli import main
from partner_repo.cli._exits import EXIT_RULE
from partner_repo.cli._runtime import Connection
from partner_repo.cli.reference import commands

CONSUMER = "partner_repo.listener.examples:print_consumer"
EMBEDDER = "tests.recall_support:concepts"
STATE = "{state}"
"""Stands for a Partner state directory (``core/memory.json`` in it), made per test."""

MINIMAL = {
    "partner-repo check": ["check"],
    "partner-repo dead-letters list": ["dead-letters", "list"],
    "partner-repo dead-letters replay": ["dead-letters", "replay", "--consumer", CONSUMER],
    "partner-repo demo": ["demo"],
    "partner-repo forget": ["forget", "alice"],
    "partner-repo import-state": ["import-state", STATE],
    "partner-repo listen": ["listen", "--consumer", CONSUMER],
    "partner-repo listener status": ["listener", "status"],
    "partner-repo mcp": ["mcp"],
    "partner-repo console": ["console"],
    "partner-repo migrate": ["migrate", "--status"],
    "partner-repo recall search": ["recall", "search", "alice", "kyoto"],
    "partner-repo recall reindex": ["recall", "reindex", "--embedder", EMBEDDER],
    "partner-repo recall topics": ["recall", "topics", "alice"],
    "partner-repo repair": ["repair"],
    "partner-repo resummarize": ["resummarize"],
    "partner-repo roll-idle": ["roll-idle", "--once"],
    "partner-repo slices list": ["slices", "list"],
    "partner-repo slices show": ["slices", "show", "s1"],
    "partner-repo slices stats": ["slices", "stats"],
    "partner-repo units show": ["units", "show", "u1"],
}
"""Each command (every leaf of the CLI) with the fewest arguments it runs with."""

NAMES_NOTHING = [
    ["check", "--core", "nope"],
    ["repair", "--core", "nope"],
    ["listener", "status", "--group", "nope"],
    ["recall", "search", "nope", "kyoto"],
    ["recall", "topics", "nope"],
    ["recall", "reindex", "--core", "nope", "--embedder", EMBEDDER],
    ["resummarize", "--core", "nope"],
    ["slices", "list", "--core", "nope"],
    ["slices", "show", "nope"],
    ["slices", "stats", "--core", "nope"],
    ["units", "show", "nope"],
]


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name == "MONGODB_URI" or name.startswith("PARTNER_REPO_"):
            monkeypatch.delenv(name)


@pytest.fixture
def state(tmp_path: Path) -> str:
    (tmp_path / "core" / "memory").mkdir(parents=True)
    (tmp_path / "core" / "memory.json").write_text(json.dumps({"memory_unit_uuid_set": []}))
    return str(tmp_path)


def run(arguments: list[str], state: str, **environment: str) -> Result:
    filled = [state if argument == STATE else argument for argument in arguments]
    return CliRunner(env=environment).invoke(main, ["--in-memory", *filled], prog_name="partner-repo")


LOG_LINE = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z ")
"""A log record (``--log-level``): stderr holds them besides the command's one error line."""


def one_line(result: Result) -> str:
    """The one line the command said on stderr, besides its log records."""
    lines = [line for line in result.stderr.splitlines() if not LOG_LINE.match(line)]
    assert len(lines) == 1 and "Traceback" not in result.output, result.output
    return lines[0]


every_command = pytest.mark.parametrize("arguments", list(MINIMAL.values()), ids=list(MINIMAL))


@every_command
def test_help_exits_0(arguments: list[str], state: str) -> None:
    assert run([*arguments, "--help"], state).exit_code == 0


@every_command
def test_an_unknown_option_is_a_usage_error_exit_2(arguments: list[str], state: str) -> None:
    result = run([*arguments, "--no-such-option"], state)

    assert result.exit_code == 2 and "No such option" in result.stderr and "--no-such-option" in result.stderr


@every_command
def test_an_unusable_setting_is_one_line_and_exit_2(arguments: list[str], state: str) -> None:
    result = run(arguments, state, PARTNER_REPO_WRITE_TIMEOUT_MS="soon")

    assert result.exit_code == 2
    assert one_line(result).startswith("error: invalid settings: PARTNER_REPO_WRITE_TIMEOUT_MS: ")


@every_command
def test_ctrl_c_is_one_line_and_exit_130(
    arguments: list[str], state: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def ctrl_c(self: Connection, **options: Any) -> Any:
        raise KeyboardInterrupt

    monkeypatch.setattr(Connection, "open", ctrl_c)

    result = run(arguments, state)

    assert result.exit_code == 130 and one_line(result).startswith("interrupted")


@pytest.mark.parametrize("arguments", NAMES_NOTHING, ids=" ".join)
def test_a_name_that_names_nothing_is_one_line_and_exit_1(arguments: list[str], state: str) -> None:
    result = run(arguments, state)

    assert result.exit_code == 1
    assert one_line(result).startswith("error: no "), result.stderr
    assert result.stdout == ""


def test_the_rule_has_the_codes_the_commands_use() -> None:
    assert [rule.code for rule in EXIT_RULE] == [0, 1, 2, 130, 143]


def test_every_command_is_held_to_the_rule_here() -> None:
    leaves = {path for path, ctx in commands() if not isinstance(ctx.command, click.Group)}

    assert leaves == set(MINIMAL)
