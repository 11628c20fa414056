"""``partner-repo listen`` and ``partner-repo dead-letters list|replay``."""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from partner_repo import (
    DeadLetterRepository,
    MemoryUnitRepository,
    RollingResult,
)
from partner_repo.cli import _listen as listen_module
from partner_repo.cli import main
from tests.unit.cli.support import Seed, run_until_signal
from tests.unit.listener.support import T0, append

DELIVERED: list[str] = []
STOP: list[asyncio.Event] = []


class StoppingConsumer:
    """Importable as ``tests.unit.cli.test_listener:StoppingConsumer``: records a delivery, then stops
    ``listen``."""

    name = "stopper"

    async def consume(self, result: RollingResult) -> None:
        DELIVERED.append(result.slice_id)
        STOP[0].set()


class Healed:
    """Importable as ``tests.unit.cli.test_listener:Healed``: a consumer named like the failed one, that now
    works."""

    name = "indexer"

    async def consume(self, result: RollingResult) -> None:
        DELIVERED.append(result.slice_id)


NOT_A_CONSUMER = 42


@pytest.fixture
def database(every_command_uses: Callable[[Seed], Any]) -> Any:
    """The commands' database: in-memory, holding one slice and one dead letter for it."""

    async def prepare(db: Any) -> None:
        piece = await append(MemoryUnitRepository(db), "u1")
        await DeadLetterRepository(db).record(
            group="default",
            consumer="indexer",
            unit_id="u1",
            core_id="core",
            slice_id=piece.id or "",
            error=RuntimeError("index down"),
            attempts=5,
            at=T0,
        )

    DELIVERED.clear()
    return every_command_uses(prepare)


def test_listen_delivers_to_the_consumers_until_stopped(
    database: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    def capture(stop: asyncio.Event) -> contextlib.nullcontext[None]:
        STOP[:] = [stop]
        return contextlib.nullcontext()

    monkeypatch.setattr(listen_module, "stop_on_signals", capture)
    result = CliRunner().invoke(
        main,
        [
            "--in-memory",
            "listen",
            "--consumer",
            "tests.unit.cli.test_listener:StoppingConsumer",
            "--group",
            "cli",
            "--poll-interval",
            "0.01",
        ],
    )

    assert result.exit_code == 0, result.output
    assert len(DELIVERED) == 1
    assert "listening as group 'cli' for stopper" in result.stderr
    assert "stopped: 1 delivered, 0 dead-lettered; checkpoint saved" in result.stderr


def listen_until_the_first_delivery(monkeypatch: pytest.MonkeyPatch, *options: str) -> Any:
    """Run ``listen`` in-process with the shipped ``logging_consumer`` until the first slice is delivered."""

    def capture(stop: asyncio.Event) -> contextlib.nullcontext[None]:
        STOP[:] = [stop]
        return contextlib.nullcontext()

    monkeypatch.setattr(listen_module, "stop_on_signals", capture)
    consumers = [
        "partner_repo.listener.examples:logging_consumer",
        "tests.unit.cli.test_listener:StoppingConsumer",
    ]
    return CliRunner().invoke(
        main,
        [
            *options,
            "--in-memory",
            "listen",
            *(f"--consumer={path}" for path in consumers),
            "--poll-interval",
            "0.01",
        ],
    )


def test_listen_logs_each_roll_the_logging_consumer_receives(
    database: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = listen_until_the_first_delivery(monkeypatch)

    assert result.exit_code == 0, result.output
    assert " INFO    partner_repo.listener.examples: rolled: slice " in result.stderr


def test_listen_logs_the_listeners_own_info_lines(database: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    result = listen_until_the_first_delivery(monkeypatch)

    assert (
        "INFO    partner_repo.listener: listener group 'default': this backend has no change streams"
        in result.stderr
    )
    assert "polling every 0.01s instead" in result.stderr


def test_listen_in_json_keeps_stderr_all_json(database: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    result = listen_until_the_first_delivery(monkeypatch, "--log-format", "json")

    records = [json.loads(line) for line in result.stderr.splitlines()]
    assert any(r["message"].startswith("listening as group 'default'") for r in records)
    assert any(r["logger"] == "partner_repo.listener.examples" for r in records)


def test_listen_finds_a_consumer_module_in_the_working_directory(tmp_path: Path) -> None:
    (tmp_path / "my_consumers_here.py").write_text(
        "from partner_repo.listener.examples import PrintConsumer\n\nmine = PrintConsumer(name='mine')\n"
    )

    returncode, errors = run_until_signal(
        ["listen", "--consumer", "my_consumers_here:mine", "--poll-interval", "0.05"],
        running="listening as group 'default' for mine",
        stop_signal=signal.SIGTERM,
        console_script=True,
        cwd=tmp_path,
    )

    assert returncode == 0, errors


@pytest.mark.parametrize(
    "path", ["nowhere.module:thing", "tests.unit.cli.test_listener:NOT_A_CONSUMER", "no-colon"]
)
def test_listen_refuses_a_consumer_it_cannot_load(path: str) -> None:
    result = CliRunner().invoke(main, ["--in-memory", "listen", "--consumer", path])

    assert result.exit_code == 2
    assert "--consumer" in result.stderr


@pytest.mark.parametrize("stop_signal", [signal.SIGTERM, signal.SIGINT])
def test_listen_runs_until_a_signal_and_then_stops_cleanly(stop_signal: signal.Signals) -> None:
    returncode, errors = run_until_signal(
        ["listen", "--consumer", "partner_repo.listener.examples:print_consumer", "--poll-interval", "0.05"],
        running="listening as group 'default' for print",
        stop_signal=stop_signal,
    )
    assert returncode == (130 if stop_signal == signal.SIGINT else 0), errors  # docs/cli.md: Ctrl-C is 130
    assert "stopped: 0 delivered, 0 dead-lettered; checkpoint saved" in errors


def test_dead_letters_list_shows_a_table(database: Any) -> None:
    result = CliRunner(env={"COLUMNS": "220"}).invoke(main, ["--in-memory", "dead-letters", "list"])

    assert result.exit_code == 0, result.output
    assert "indexer" in result.stdout and "RuntimeError: index down" in result.stdout


def test_dead_letters_list_as_json(database: Any) -> None:
    result = CliRunner().invoke(
        main, ["--in-memory", "dead-letters", "list", "--json", "--consumer", "indexer"]
    )

    (letter,) = json.loads(result.stdout)
    assert (letter["consumer"], letter["unit_id"], letter["attempts"]) == ("indexer", "u1", 5)
    assert letter["failed_at"].startswith("2024-05-01T09:00:00")


def test_dead_letters_list_with_none_says_so(database: Any) -> None:
    result = CliRunner().invoke(main, ["--in-memory", "dead-letters", "list", "--group", "nobody"])

    assert result.exit_code == 0
    assert result.stdout.strip() == "no dead letters"


def test_dead_letters_replay_delivers_and_removes_them(database: Any) -> None:
    result = CliRunner().invoke(
        main, ["--in-memory", "dead-letters", "replay", "--consumer", "tests.unit.cli.test_listener:Healed"]
    )

    assert result.exit_code == 0, result.output
    assert "1 delivered, 0 failed again" in result.stdout
    assert len(DELIVERED) == 1
    assert asyncio.run(DeadLetterRepository(database).list()) == []


def test_dead_letters_replay_leaves_letters_of_consumers_not_given(database: Any) -> None:
    result = CliRunner().invoke(
        main,
        [
            "--in-memory",
            "dead-letters",
            "replay",
            "--consumer",
            "partner_repo.listener.examples:logging_consumer",
        ],
    )

    assert result.exit_code == 0, result.output
    assert "0 delivered, 0 failed again, 1 left (consumer not given)" in result.stdout
    assert len(asyncio.run(DeadLetterRepository(database).list())) == 1


def listen_once(monkeypatch: pytest.MonkeyPatch, *options: str) -> tuple[Any, dict[str, Any]]:
    """Run ``listen`` with the stopping consumer and ``options``; the result and the listener's options."""
    built: dict[str, Any] = {}

    class Recorded(listen_module.RollingListener):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            built.update(kwargs)
            super().__init__(*args, **kwargs)

    def capture(stop: asyncio.Event) -> contextlib.nullcontext[None]:
        STOP[:] = [stop]
        return contextlib.nullcontext()

    monkeypatch.setattr(listen_module, "stop_on_signals", capture)
    monkeypatch.setattr(listen_module, "RollingListener", Recorded)
    arguments = [
        "listen",
        "--consumer",
        "tests.unit.cli.test_listener:StoppingConsumer",
        "--poll-interval",
        "0.01",
    ]
    return CliRunner().invoke(main, ["--in-memory", *arguments, *options]), built


def test_listen_hands_each_consumer_concurrency_slices_at_once(
    database: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    result, options = listen_once(monkeypatch, "--concurrency", "8")

    assert result.exit_code == 0, result.output
    assert options["concurrency"] == 8


def test_listen_takes_its_concurrency_from_the_setting_when_not_given(
    database: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PARTNER_REPO_LISTENER_CONCURRENCY", "16")

    result, options = listen_once(monkeypatch)

    assert result.exit_code == 0, result.output
    assert options["concurrency"] == 16


def test_listen_serves_metrics_on_the_port_given(database: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("prometheus_client", reason="the metrics extra (prometheus_client) is not installed")

    result, options = listen_once(monkeypatch, "--metrics-port", "0")

    assert result.exit_code == 0, result.output
    assert "metrics at http://0.0.0.0:" in result.stderr
    assert options["observer"] is not None
