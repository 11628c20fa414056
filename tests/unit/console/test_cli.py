"""``partner-repo console``: what it refuses before serving (one line, exit 2), and a console beyond loopback
started as an operator would, with its token from the environment: a request without the token is refused,
the token signs in, it never reaches the log, and SIGTERM stops the console cleanly."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner, Result

from partner_repo.cli import main
from tests.unit.console.support import TOKEN

ROOT = Path(__file__).resolve().parents[3]
SERVING_AT = re.compile(r"serving the console at http://\S+:(\d+)/")


def run(arguments: Sequence[str], **env: str) -> Result:
    return CliRunner().invoke(main, ["console", *arguments], env={"PARTNER_REPO_CONSOLE_TOKEN": "", **env})


def one_line_error(result: Result) -> str:
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    return lines[0]


def test_without_the_extra_the_command_says_which_extra_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "jinja2", None)  # as if the extra were not installed

    line = one_line_error(run(["--in-memory"]))

    assert line.endswith("pip install 'partner-repo[console]'")


@pytest.mark.parametrize("host", ["0.0.0.0", "192.0.2.10", "console.example.com"])
def test_a_console_other_machines_reach_refuses_to_start_without_a_token(host: str) -> None:
    line = one_line_error(run(["--in-memory", "--host", host]))

    assert "give a bearer token" in line and "PARTNER_REPO_CONSOLE_TOKEN" in line


def test_a_loopback_console_behind_a_proxy_other_machines_reach_needs_a_token_too() -> None:
    line = one_line_error(run(["--in-memory", "--allowed-origin", "https://console.example.com"]))

    assert "https://console.example.com is a name other machines reach" in line


def test_a_weak_token_is_refused_and_not_quoted() -> None:
    line = one_line_error(run(["--in-memory", "--host", "0.0.0.0"], PARTNER_REPO_CONSOLE_TOKEN="tiny-token"))

    assert "at least 16 characters" in line and "tiny-token" not in line


def test_without_a_database_named_the_console_refuses_to_serve_an_empty_memory() -> None:
    line = one_line_error(CliRunner().invoke(main, ["console"], env={"MONGODB_URI": ""}))

    assert "neither --uri nor MONGODB_URI is set" in line


def test_a_console_beyond_loopback_refuses_requests_without_its_token_and_never_logs_it() -> None:
    env = {**os.environ, "PARTNER_REPO_CONSOLE_TOKEN": TOKEN, "PARTNER_REPO_LOG_LEVEL": "INFO"}
    command = [
        sys.executable,
        "-m",
        "partner_repo",
        "--in-memory",
        "console",
        "--host",
        "0.0.0.0",
        "--port",
        "0",
    ]
    with tempfile.TemporaryFile("w+") as log:
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stderr=log)
        try:
            port = _port_from(log, process)
            with httpx.Client(base_url=f"http://127.0.0.1:{port}") as http:
                refused = http.get("/cores")
                signed_in = http.post("/login", data={"token": TOKEN, "next": "/cores"})
                page = http.get("/cores")
        finally:
            process.send_signal(signal.SIGTERM)
            code = process.wait(timeout=30)
        log.seek(0)
        logged = log.read()

    assert refused.status_code == 401 and 'action="/login"' in refused.text
    assert signed_in.status_code == 303 and "HttpOnly" in signed_in.headers["set-cookie"]
    assert page.status_code == 200 and "read-only" in page.text
    assert code == 0
    assert '"GET /cores HTTP/1.1" 401' in logged and TOKEN not in logged


def _port_from(log: tempfile._TemporaryFileWrapper[str], process: subprocess.Popen[bytes]) -> int:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            log.seek(0)
            raise AssertionError(f"the console exited with {process.returncode}: {log.read()}")
        log.seek(0)
        found = SERVING_AT.search(log.read())
        if found is not None:
            return int(found.group(1))
        time.sleep(0.1)
    raise AssertionError("the console did not start serving within 60 s")
