"""Run a command (default: the integration suite) against a throwaway MongoDB-compatible server on loopback.

    python -m partner_repo.testing.server                    # pytest -m integration against a fresh server
    python -m partner_repo.testing.server pytest tests -k listener
    python -m partner_repo.testing.server --port 27099 -- python -m benchmarks --quick

The server is SecantusDB (PyPI ``secantusdb``, a MongoDB-compatible server on WiredTiger that presents a
single-node replica set with change streams and transactions). It is GPL-2.0, a test tool only: it lives in
its own virtual environment (``$PARTNER_REPO_TEST_SERVER_VENV``, or ``.test-server/venv`` under the current
directory), installed there on first use from the package index; it is never imported by partner-repo nor
listed among its dependencies, and listens on 127.0.0.1 only, with in-memory storage that vanishes when it
stops. The command runs with ``MONGODB_URI`` pointing at it; the server is stopped when the command ends, and
the command's exit code is returned. Nothing is left behind: stopped with Ctrl-C (exit 130) or SIGTERM (exit
143), this stops the command and the server; when the server dies while the command runs, the command is
stopped and this fails (exit 1) with one line saying so, instead of letting the command hang on a server
that is gone.

Only Python (>= 3.11) and the package index are needed: no Docker, no mongod. This module imports nothing but
the standard library, so ``scripts/test-server`` of the repository runs it with a bare Python.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import venv
from pathlib import Path

SERVER_PACKAGE = "secantusdb==0.7.0b3"
DEFAULT_VENV = Path(".test-server") / "venv"
DEFAULT_COMMAND = [sys.executable, "-m", "pytest", "-m", "integration", "-rxX"]
"""The pytest of the Python that runs this (its venv), not whichever `pytest` comes first on PATH."""
URI_OPTIONS = "directConnection=true&retryWrites=false"
"""``retryWrites=false``: SecantusDB keeps a record per retryable write (mongod keeps one per session) and
scans, past 10,000 records sorts, all of them on every write, so a run of the integration suite slows down
as it goes (410 s against 174 s). A retry happens only after a network error or a failover, which the suite
does not cause; the library's default (on) is what the wire tests and the real-MongoDB workflow run with.
Recorded in tests/emulator_gaps.py."""
READY_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 10.0
WATCH_INTERVAL_S = 0.2
"""How often the server is looked at while the command runs."""
SERVER_DIED = 1
"""The exit code when the server died under the command."""


class Stopped(Exception):
    """This process was asked to stop (SIGTERM): the command and the server are stopped, like for Ctrl-C."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _stopped(signum: int, frame: object) -> None:
    raise Stopped(signum)


def main(argv: list[str] | None = None, *, default_venv: Path = DEFAULT_VENV, prog: str | None = None) -> int:
    """Start the server, run the command against it, stop the server; the command's exit code."""
    parser = argparse.ArgumentParser(
        prog=prog or "python -m partner_repo.testing.server", description=(__doc__ or "").split("\n\n")[0]
    )
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 [default: a free one]")
    parser.add_argument("--log", type=Path, default=None, help="server log file [default: in the venv dir]")
    parser.add_argument(
        "command", nargs=argparse.REMAINDER, help="command to run [default: pytest -m integration]"
    )
    args = parser.parse_args(argv)
    command = [part for part in args.command if part != "--"] or DEFAULT_COMMAND

    environment = Path(os.environ.get("PARTNER_REPO_TEST_SERVER_VENV") or default_venv).absolute()
    server = install(environment)
    port = args.port or free_port()
    log_path = args.log or environment.parent / f"secantusd-{port}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    uri = f"mongodb://127.0.0.1:{port}/?{URI_OPTIONS}"
    previous = signal.signal(signal.SIGTERM, _stopped)
    process = None
    try:
        with open(log_path, "wb") as log:
            process = subprocess.Popen(
                [str(server), "--host", "127.0.0.1", "--port", str(port), "--storage-path", ":memory:"],
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        wait_ready(environment, uri, process, log_path)
        print(f"test-server: SecantusDB ready at {uri} (log: {log_path})", flush=True)
        return run_command(command, uri, process, log_path)
    except KeyboardInterrupt:
        return 130
    except Stopped as asked:
        return 128 + asked.signum
    finally:
        if process is not None:
            stop(process)
        signal.signal(signal.SIGTERM, previous)


def run_command(command: list[str], uri: str, server: subprocess.Popen[bytes], log_path: Path) -> int:
    """Run ``command`` against the server, watching the server: the command's exit code, or
    :data:`SERVER_DIED` (the command stopped) when the server exits first. However this ends (Ctrl-C,
    SIGTERM), the command is not left running."""
    child = subprocess.Popen(command, env={**os.environ, "MONGODB_URI": uri})
    interrupted = False
    try:
        while True:
            try:
                return child.wait(WATCH_INTERVAL_S)
            except subprocess.TimeoutExpired:
                pass
            if server.poll() is not None:
                print(
                    f"test-server: the server exited with {server.returncode} while the command ran "
                    f"(see {log_path}); the command was stopped",
                    file=sys.stderr,
                    flush=True,
                )
                return SERVER_DIED
    except KeyboardInterrupt:
        interrupted = True  # Ctrl-C reached the command too: it is given the time to finish on its own
        raise
    finally:
        end_command(child, ask=not interrupted)


def end_command(child: subprocess.Popen[bytes], *, ask: bool) -> None:
    """Stop ``child`` if it still runs: SIGTERM, then SIGKILL after :data:`STOP_TIMEOUT_S`. Without ``ask``
    (a Ctrl-C at the terminal reached it too) it is first given that long to finish on its own."""
    for step in ("wait", "terminate", "kill") if not ask else ("terminate", "kill"):
        if child.poll() is not None:
            return
        if step == "terminate":
            child.terminate()
        elif step == "kill":
            child.kill()
        try:
            child.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            continue


def install(environment: Path) -> Path:
    """The server executable in ``environment``, installing the pinned package there if needed."""
    server = environment / "bin" / "secantusd-py"
    marker = environment / ".installed"
    if server.exists() and marker.exists() and marker.read_text().strip() == SERVER_PACKAGE:
        return server
    if environment.exists():
        shutil.rmtree(environment)
    print(f"test-server: installing {SERVER_PACKAGE} into {environment}", flush=True)
    venv.EnvBuilder(with_pip=True).create(environment)
    pip = [str(environment / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    subprocess.run([*pip, SERVER_PACKAGE], check=True)
    marker.write_text(SERVER_PACKAGE + "\n")
    return server


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def wait_ready(environment: Path, uri: str, process: subprocess.Popen[bytes], log_path: Path) -> None:
    """Until the server answers ``ping`` (asked with the pymongo of the server's own venv)."""
    ping = (
        "import sys, pymongo\n"
        "client = pymongo.MongoClient(sys.argv[1], serverSelectionTimeoutMS=1000)\n"
        "client.admin.command('ping')\n"
    )
    python = str(environment / "bin" / "python")
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"test-server: the server exited with {process.returncode}; see {log_path}")
        answered = subprocess.run([python, "-c", ping, uri], capture_output=True).returncode == 0
        if answered:
            return
        time.sleep(0.2)
    raise SystemExit(f"test-server: no answer to ping within {READY_TIMEOUT_S:.0f} s; see {log_path}")


def stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is not None:
        return
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


if __name__ == "__main__":
    sys.exit(main())
