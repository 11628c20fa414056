"""Run a command (default: the integration suite) against a throwaway MongoDB-compatible server on loopback.

    python -m partner_repo.testing.server                    # pytest -m integration against a fresh server
    python -m partner_repo.testing.server pytest tests -k listener
    python -m partner_repo.testing.server --port 27099 -- python -m benchmarks --quick

The server is SecantusDB (PyPI ``secantusdb``, a MongoDB-compatible server on WiredTiger that presents a
single-node replica set with change streams and transactions). It is GPL-2.0, a test tool only: it lives in
its own virtual environment (``$PARTNER_REPO_TEST_SERVER_VENV``, or ``.test-server/venv`` under the current
directory), installed there on first use from the package index; it is never imported by partner-repo nor
listed among its dependencies, and listens on 127.0.0.1 only, with in-memory storage that vanishes when it
stops. The command runs with ``MONGODB_URI`` pointing at it; the server is stopped when the command ends (or
this is interrupted), and the command's exit code is returned.

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
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [str(server), "--host", "127.0.0.1", "--port", str(port), "--storage-path", ":memory:"],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        wait_ready(environment, uri, process, log_path)
        print(f"test-server: SecantusDB ready at {uri} (log: {log_path})", flush=True)
        return subprocess.call(command, env={**os.environ, "MONGODB_URI": uri})
    except KeyboardInterrupt:
        return 130
    finally:
        stop(process)


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
