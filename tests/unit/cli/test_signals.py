"""Finding 9 of issue 30: every command answers SIGINT and SIGTERM at every moment, with real
processes and real signals. Here: while connecting to a server that does not answer (the server that went
away after connecting is in tests/contract/test_signals_after_the_server_went_away.py)."""

from __future__ import annotations

import signal

import pytest

from partner_repo.testing.server import free_port
from tests.signal_support import start_connecting, stopped_within


@pytest.mark.parametrize("stop_signal", [signal.SIGINT, signal.SIGTERM])
@pytest.mark.parametrize("command", [["listen", "--recall"], ["roll-idle"]])
def test_a_long_running_command_stops_at_once_while_it_connects(
    command: list[str], stop_signal: signal.Signals
) -> None:
    """Nothing listens on the port: connecting would wait out the 60 s server selection timeout. (A signal
    that comes while Python itself starts, before any of the command's code runs, is Python's.)"""
    uri = f"mongodb://127.0.0.1:{free_port()}/?serverSelectionTimeoutMS=60000&connectTimeoutMS=60000"
    process = start_connecting(["--uri", uri, *command])

    code, errors = stopped_within(process, stop_signal, bound=2.0)

    assert code == (130 if stop_signal == signal.SIGINT else 0), errors
    assert "Traceback" not in errors


BATCH_COMMANDS = [
    ["check"],
    ["repair"],
    ["migrate"],
    ["slices", "list", "--all"],
    ["resummarize"],
    ["forget", "alice", "--yes"],
]
"""Commands that do a piece of work and end (not run until stopped), each reaching for its server first."""


def test_a_command_that_does_not_run_until_stopped_ends_on_sigterm_with_one_line_and_143() -> None:
    """SIGTERM (``kill``, a service manager) stops them as Ctrl-C does: what ran cleans up, one line says
    so, and the exit code is the shell's for SIGTERM (128 + 15)."""
    uri = f"mongodb://127.0.0.1:{free_port()}/?serverSelectionTimeoutMS=60000&connectTimeoutMS=60000"
    processes = [start_connecting(["--uri", uri, *command]) for command in BATCH_COMMANDS]

    for command, process in zip(BATCH_COMMANDS, processes, strict=True):
        code, errors = stopped_within(process, signal.SIGTERM, bound=2.0)

        said = [line for line in errors.splitlines() if not line[:4].isdigit()]  # not a log record
        assert (code, said) == (143, ["interrupted"]), (command, errors)
