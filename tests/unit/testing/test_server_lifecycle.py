"""The test server runner (``scripts/test-server``, ``python -m partner_repo.testing.server``) never leaves a
server or a command behind: stopped with SIGTERM it stops both; when its server dies, it stops the command
and fails with one clear line instead of letting it hang. Run here against a stand-in server (a script that
only sleeps), so no SecantusDB is needed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from partner_repo.testing.server import SERVER_PACKAGE

STAND_IN = """#!{python}
import os, sys, time
open(os.environ["STAND_IN_PIDS"], "a").write(f"server {{os.getpid()}}\\n")
time.sleep(float(os.environ.get("STAND_IN_LIFETIME", "120")))
sys.exit(3)
"""
COMMAND = (
    "import os, time; open(os.environ['STAND_IN_PIDS'], 'a').write(f'command {os.getpid()}\\n'); "
    "print('command running', flush=True); time.sleep(120)"
)


@pytest.fixture
def environment(tmp_path: Path) -> Path:
    """A server venv holding a stand-in server and a ``python`` whose ping always answers."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    server = venv / "bin" / "secantusd-py"
    server.write_text(STAND_IN.format(python=sys.executable))
    ping = venv / "bin" / "python"
    ping.write_text("#!/bin/sh\nexit 0\n")
    for script in (server, ping):
        script.chmod(0o755)
    (venv / ".installed").write_text(SERVER_PACKAGE + "\n")
    return venv


@pytest.fixture
def pids(environment: Path) -> Iterator[Path]:
    """Where the stand-in server and the command write their pids; whatever is left running is killed after
    the test (a runner that failed to stop them must not leave them behind)."""
    path = environment.parent / "pids"
    yield path
    for pid in running(path).values():
        os.kill(pid, signal.SIGKILL)


def start(venv: Path, pids: Path, **variables: str) -> subprocess.Popen[str]:
    """The runner with the stand-in, once its command runs; stderr goes to ``errors`` beside the venv."""
    process = subprocess.Popen(
        [sys.executable, "-m", "partner_repo.testing.server", "--", sys.executable, "-c", COMMAND],
        env={
            **os.environ,
            "PARTNER_REPO_TEST_SERVER_VENV": str(venv),
            "STAND_IN_PIDS": str(pids),
            **variables,
        },
        stdout=subprocess.PIPE,
        stderr=(venv.parent / "errors").open("w"),
        text=True,
        cwd=venv.parent,
    )
    assert process.stdout is not None
    for line in process.stdout:
        if "command running" in line:
            return process
    raise AssertionError(f"the command never ran: {(venv.parent / 'errors').read_text()}")


def running(pids: Path) -> dict[str, int]:
    """The processes (server, command) that wrote their pid and still run."""
    found = dict(line.split() for line in pids.read_text().splitlines()) if pids.exists() else {}
    alive = {}
    for name, pid in found.items():
        try:
            os.kill(int(pid), 0)
            alive[name] = int(pid)
        except ProcessLookupError:
            continue
    return alive


def ended(process: subprocess.Popen[str], pids: Path, within: float = 20.0) -> dict[str, int]:
    """Wait for the runner to exit, then a moment for what it stopped; what still runs."""
    try:
        process.wait(within)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
    deadline = time.monotonic() + 5
    while running(pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    return running(pids)


def test_sigterm_stops_the_server_and_the_command_and_exits_143(environment: Path, pids: Path) -> None:
    process = start(environment, pids)

    process.send_signal(signal.SIGTERM)

    assert ended(process, pids) == {}
    assert process.returncode == 128 + signal.SIGTERM, (environment.parent / "errors").read_text()


def test_a_server_that_dies_stops_the_command_with_one_clear_line(environment: Path, pids: Path) -> None:
    started = time.monotonic()
    process = start(environment, pids, STAND_IN_LIFETIME="1")

    assert ended(process, pids) == {}
    assert process.returncode == 1 and time.monotonic() - started < 20  # not the command's two minutes
    errors = (environment.parent / "errors").read_text().splitlines()
    (line,) = [line for line in errors if line.startswith("test-server:")]
    assert line.startswith("test-server: the server exited with 3 while the command ran (see ")
    assert line.endswith("); the command was stopped")
