"""Finding 9 of issue 30: the long-running commands answer SIGINT and SIGTERM at every moment, with real
processes and real signals. Here: while connecting to a server that does not answer (the server that went
away after connecting is in tests/contract/test_signals_after_the_server_went_away.py)."""

from __future__ import annotations

import signal
import time

import pytest

from partner_repo.testing.server import free_port
from tests.signal_support import start, stopped_within


@pytest.mark.parametrize("stop_signal", [signal.SIGINT, signal.SIGTERM])
@pytest.mark.parametrize("command", [["listen", "--recall"], ["roll-idle"]])
def test_a_long_running_command_stops_at_once_while_it_connects(
    command: list[str], stop_signal: signal.Signals
) -> None:
    """Nothing listens on the port: connecting would wait out the 60 s server selection timeout. (A signal
    that comes while Python itself starts, before any of the command's code runs, is Python's.)"""
    uri = f"mongodb://127.0.0.1:{free_port()}/?serverSelectionTimeoutMS=60000&connectTimeoutMS=60000"
    process = start(["--uri", uri, *command])
    time.sleep(6)  # it started (imports take seconds on a loaded machine) and is connecting
    assert process.poll() is None

    code, errors = stopped_within(process, stop_signal, bound=2.0)

    assert code == (130 if stop_signal == signal.SIGINT else 0), errors
    assert "Traceback" not in errors
