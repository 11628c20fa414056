"""``partner-repo listen`` and ``partner-repo dead-letters list|replay``."""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
from typing import Any

import pytest
from cli_support import run_until_signal
from click.testing import CliRunner
from listener_support import T0, append

from partner_repo import (
    DeadLetterRepository,
    MemoryUnitRepository,
    RollingResult,
    in_memory_database,
    init_repository,
)
from partner_repo.cli import listen as listen_module
from partner_repo.cli import main
from partner_repo.cli.app import Connection

DELIVERED: list[str] = []
STOP: list[asyncio.Event] = []


class StoppingConsumer:
    """Importable as ``test_listener_cli:StoppingConsumer``: records a delivery, then stops ``listen``."""

    name = "stopper"

    async def consume(self, result: RollingResult) -> None:
        DELIVERED.append(result.slice_id)
        STOP[0].set()


class Healed:
    """Importable as ``test_listener_cli:Healed``: a consumer named like the failed one, that now works."""

    name = "indexer"

    async def consume(self, result: RollingResult) -> None:
        DELIVERED.append(result.slice_id)


NOT_A_CONSUMER = 42


@pytest.fixture
def database(monkeypatch: pytest.MonkeyPatch) -> Any:
    """The commands' database: in-memory, holding one slice and one dead letter for it."""

    async def prepare() -> Any:
        db = await init_repository(in_memory_database("cli_listener"))
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
        return db

    db = asyncio.run(prepare())

    async def open_prepared(self: Connection) -> Any:
        return db

    monkeypatch.setattr(Connection, "open", open_prepared)
    DELIVERED.clear()
    return db


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
            "listen",
            "--consumer",
            "test_listener_cli:StoppingConsumer",
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


@pytest.mark.parametrize("path", ["nowhere.module:thing", "test_listener_cli:NOT_A_CONSUMER", "no-colon"])
def test_listen_refuses_a_consumer_it_cannot_load(path: str) -> None:
    result = CliRunner().invoke(main, ["listen", "--consumer", path])

    assert result.exit_code == 2
    assert "--consumer" in result.stderr


@pytest.mark.parametrize("stop_signal", [signal.SIGTERM, signal.SIGINT])
def test_listen_runs_until_a_signal_and_then_stops_cleanly(stop_signal: signal.Signals) -> None:
    returncode, errors = run_until_signal(
        ["listen", "--consumer", "partner_repo.listener.examples:print_consumer", "--poll-interval", "0.05"],
        running="listening as group 'default' for print",
        stop_signal=stop_signal,
    )
    assert returncode == 0, errors
    assert "stopped: 0 delivered, 0 dead-lettered; checkpoint saved" in errors


def test_dead_letters_list_shows_a_table(database: Any) -> None:
    result = CliRunner(env={"COLUMNS": "220"}).invoke(main, ["dead-letters", "list"])

    assert result.exit_code == 0, result.output
    assert "indexer" in result.stdout and "RuntimeError: index down" in result.stdout


def test_dead_letters_list_as_json(database: Any) -> None:
    result = CliRunner().invoke(main, ["dead-letters", "list", "--json", "--consumer", "indexer"])

    (letter,) = json.loads(result.stdout)
    assert (letter["consumer"], letter["unit_id"], letter["attempts"]) == ("indexer", "u1", 5)
    assert letter["failed_at"].startswith("2024-05-01T09:00:00")


def test_dead_letters_list_with_none_says_so(database: Any) -> None:
    result = CliRunner().invoke(main, ["dead-letters", "list", "--group", "nobody"])

    assert result.exit_code == 0
    assert result.stdout.strip() == "no dead letters"


def test_dead_letters_replay_delivers_and_removes_them(database: Any) -> None:
    result = CliRunner().invoke(main, ["dead-letters", "replay", "--consumer", "test_listener_cli:Healed"])

    assert result.exit_code == 0, result.output
    assert "1 delivered, 0 failed again" in result.stdout
    assert len(DELIVERED) == 1
    assert asyncio.run(DeadLetterRepository(database).list()) == []


def test_dead_letters_replay_leaves_letters_of_consumers_not_given(database: Any) -> None:
    result = CliRunner().invoke(
        main, ["dead-letters", "replay", "--consumer", "partner_repo.listener.examples:logging_consumer"]
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
    arguments = ["listen", "--consumer", "test_listener_cli:StoppingConsumer", "--poll-interval", "0.01"]
    return CliRunner().invoke(main, [*arguments, *options]), built


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
