"""Finding 9 of issue 30: ``listen`` and ``roll-idle`` stop on SIGINT/SIGTERM after their server went away.

A SecantusDB server of the test's own is started (from the test server's venv), the command connects and
runs, the server is killed, and a real signal is sent: the command ends within its bound (a second and a
little when nothing is in flight), with the documented exit code and no traceback. It used to hang after
"stopping: finishing in-flight deliveries", retrying for minutes past --drain-timeout.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from partner_repo.testing.server import URI_OPTIONS, free_port, install, stop, wait_ready
from tests.conftest import requires_mongodb
from tests.signal_support import start, stopped_within

pytestmark = pytest.mark.integration

VENV = Path(
    os.environ.get("PARTNER_REPO_TEST_SERVER_VENV") or Path(__file__).parents[2] / ".test-server" / "venv"
)


@pytest.fixture
def own_server(tmp_path: Path) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """A server of this test's own (the integration suite's is shared): its URI and its process."""
    requires_mongodb()
    environment = VENV.absolute()
    executable = install(environment)
    port = free_port()
    uri = f"mongodb://127.0.0.1:{port}/?{URI_OPTIONS}"
    with open(tmp_path / "secantusd.log", "wb") as log:
        process = subprocess.Popen(
            [str(executable), "--host", "127.0.0.1", "--port", str(port), "--storage-path", ":memory:"],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        wait_ready(environment, uri, process, tmp_path / "secantusd.log")
        yield uri, process
    finally:
        stop(process)


def running(process: subprocess.Popen[str], says: str) -> None:
    assert process.stderr is not None
    for line in process.stderr:
        if says in line:
            return
    raise AssertionError(f"the command ended without saying {says!r}")


@pytest.mark.parametrize("stop_signal", [signal.SIGINT, signal.SIGTERM])
@pytest.mark.parametrize(
    ("command", "says"),
    [
        (["listen", "--recall", "--poll-interval", "0.2"], "listening as group"),
        (["roll-idle", "--check-interval", "0.2"], "rolling idle cores every"),
    ],
)
def test_a_long_running_command_stops_on_a_signal_after_its_server_went_away(
    own_server: tuple[str, subprocess.Popen[bytes]],
    command: list[str],
    says: str,
    stop_signal: signal.Signals,
) -> None:
    uri, server = own_server
    process = start(["--uri", uri, *command])
    running(process, says)
    os.killpg(server.pid, signal.SIGKILL)  # the server goes away; the command retries, with backoff
    server.wait()
    time.sleep(2)

    code, errors = stopped_within(process, stop_signal, bound=3.0)

    assert code == (130 if stop_signal == signal.SIGINT else 0), errors
    assert "Traceback" not in errors
