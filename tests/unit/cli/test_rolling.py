"""``partner-repo roll-idle``: the idle scheduler as a command (one pass with --once, else until a signal)."""

from __future__ import annotations

import asyncio
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from partner_repo import MemoryCoreRepository, Message
from partner_repo.cli import main
from tests.unit.cli.support import Seed, run_until_signal
from tests.unit.rolling.support import T0, numbered


async def custom_summarizer(messages: list[Message]) -> str:
    """Importable as ``tests.unit.cli.test_rolling:custom_summarizer`` for the --summarizer option."""
    return f"custom: {len(messages)} messages"


NOT_CALLABLE = 42


@pytest.fixture
def database(every_command_uses: Callable[[Seed], Any]) -> Any:
    """The command's database: an in-memory one with an idle core and a busy one."""

    async def prepare(db: Any) -> None:
        cores = MemoryCoreRepository(db)
        await cores.record("idle-core", numbered(0, 4), at=T0)
        await cores.record("busy-core", numbered(0, 4))

    return every_command_uses(prepare)


def test_once_rolls_the_idle_cores_prints_them_and_exits(database: Any) -> None:
    result = CliRunner(env={"COLUMNS": "250"}).invoke(main, ["--in-memory", "roll-idle", "--once"])

    assert result.exit_code == 0, result.output
    assert "rolled core idle-core: slice " in result.stdout
    assert "[0, 4) of unit " in result.stdout
    assert "busy-core" not in result.stdout
    assert "1 idle core(s) rolled" in result.stderr
    assert asyncio.run(MemoryCoreRepository(database).snapshot("idle-core")) == []


def test_idle_after_defaults_to_the_rolling_settings_from_the_environment(
    database: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PARTNER_REPO_ROLLING_IDLE_AFTER", str(100 * 365 * 24 * 3600))

    result = CliRunner().invoke(main, ["--in-memory", "roll-idle", "--once"])

    assert result.exit_code == 0, result.output
    assert "0 idle core(s) rolled" in result.stderr


def test_the_idle_after_option_wins_over_the_environment(
    database: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PARTNER_REPO_ROLLING_IDLE_AFTER", str(100 * 365 * 24 * 3600))

    result = CliRunner().invoke(main, ["--in-memory", "roll-idle", "--once", "--idle-after", "60"])

    assert result.exit_code == 0, result.output
    assert "1 idle core(s) rolled" in result.stderr


@pytest.mark.parametrize("idle_after", ["PT30M", "pt30m", "0:30:00", "1800"])
def test_idle_after_takes_every_form_the_settings_take(database: Any, idle_after: str) -> None:
    result = CliRunner().invoke(main, ["--in-memory", "roll-idle", "--once", "--idle-after", idle_after])

    assert result.exit_code == 0, result.output
    assert "1 idle core(s) rolled" in result.stderr


def test_an_idle_after_that_is_no_duration_is_a_usage_error_naming_the_forms(database: Any) -> None:
    result = CliRunner().invoke(main, ["--in-memory", "roll-idle", "--once", "--idle-after", "half an hour"])

    assert result.exit_code == 2
    assert "not a duration: give seconds (90, 2.5), ISO 8601 (PT30M) or HH:MM:SS" in result.stderr


def test_once_with_nothing_idle_rolls_nothing(database: Any) -> None:
    result = CliRunner().invoke(
        main, ["--in-memory", "roll-idle", "--once", "--idle-after", str(10 * 365 * 86400)]
    )
    assert result.exit_code == 0
    assert result.stdout == ""
    assert "0 idle core(s) rolled" in result.stderr


def test_the_summarizer_can_be_loaded_from_an_import_path(database: Any) -> None:
    result = CliRunner().invoke(
        main,
        [
            "--in-memory",
            "roll-idle",
            "--once",
            "--summarizer",
            "tests.unit.cli.test_rolling:custom_summarizer",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "custom: 4 messages" in result.stdout


def test_the_summarizer_may_be_a_module_of_the_working_directory(
    database: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "summaries_here.py").write_text(
        "async def short(messages):\n    return f'here: {len(messages)} messages'\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(
        sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))]
    )  # a console script's
    monkeypatch.delitem(sys.modules, "summaries_here", raising=False)

    result = CliRunner().invoke(
        main, ["--in-memory", "roll-idle", "--once", "--summarizer", "summaries_here:short"]
    )

    assert result.exit_code == 0, result.output
    assert "here: 4 messages" in result.stdout


@pytest.mark.parametrize(
    "path",
    [
        "no_colon",
        "no_such_module_here:thing",
        "tests.unit.cli.test_rolling:missing",
        "tests.unit.cli.test_rolling:NOT_CALLABLE",
    ],
)
def test_a_summarizer_that_cannot_be_loaded_is_a_usage_error(database: Any, path: str) -> None:
    result = CliRunner().invoke(main, ["--in-memory", "roll-idle", "--once", "--summarizer", path])
    assert result.exit_code == 2
    assert "--summarizer" in result.output


@pytest.mark.parametrize(
    "option",
    [
        ["--check-interval", "0"],
        ["--check-interval", "PT0S"],
        ["--idle-after", "-1"],
        ["--retain-divisor", "-2"],
    ],
)
def test_impossible_settings_are_usage_errors(database: Any, option: list[str]) -> None:
    assert CliRunner().invoke(main, ["--in-memory", "roll-idle", "--once", *option]).exit_code == 2


@pytest.mark.parametrize("stop_signal", [signal.SIGTERM, signal.SIGINT])
def test_the_scheduler_runs_until_a_signal_and_then_exits_cleanly(stop_signal: signal.Signals) -> None:
    returncode, errors = run_until_signal(
        ["roll-idle", "--check-interval", "0.05"],
        running="rolling idle cores every 0.05s",
        stop_signal=stop_signal,
    )
    assert returncode == (130 if stop_signal == signal.SIGINT else 0), errors  # docs/cli.md: Ctrl-C is 130
    assert "stopped" in errors
