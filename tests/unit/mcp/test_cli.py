"""``partner-repo mcp`` refuses what cannot work before it serves anything: a missing SDK (the ``mcp``
extra), an HTTP server reachable from other machines without a bearer token, a weak token, options that do
not fit the transport, a port in use. Each is one line on stderr and exit 2, and no token is ever shown. And
over stdio a signal ends the server at once, even while its client keeps the pipe open."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys

import pytest
from click.testing import CliRunner

from partner_repo.cli import main
from partner_repo.mcp import is_loopback
from tests.unit.mcp.support import ROOT, server_command

TOKEN = "a-Weak-one"


def run(*arguments: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["mcp", "--in-memory", *arguments], env=env)
    return result.exit_code, result.stderr


def test_without_the_sdk_the_command_says_which_extra_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "mcp.server.lowlevel", None)  # as if the extra were not installed

    code, stderr = run()

    assert code == 2
    assert stderr == (
        "error: partner-repo mcp needs the MCP Python SDK (mcp.server.lowlevel cannot be imported): "
        "pip install 'partner-repo[mcp]'\n"
    )


@pytest.mark.parametrize("host", ["0.0.0.0", "192.168.1.20", "::", "mcp.example.com"])
def test_http_on_a_host_other_machines_reach_refuses_to_start_without_a_token(host: str) -> None:
    code, stderr = run("--transport", "http", "--host", host, env={"PARTNER_REPO_MCP_TOKEN": ""})

    assert code == 2
    assert stderr.startswith(f"error: --host {host} is reachable from other machines: give a bearer token")
    assert stderr.count("\n") == 1


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "::1", "[::1]", "localhost", "LOCALHOST"])
def test_loopback_hosts_need_no_token(host: str) -> None:
    assert is_loopback(host)


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "10.0.0.1", "example.com", "localhost.example.com"])
def test_other_hosts_are_not_loopback(host: str) -> None:
    assert not is_loopback(host)


@pytest.mark.parametrize(
    ("token", "says"),
    [
        (TOKEN, "the bearer token must be at least 16 characters"),
        ("long-enough-but has a space", "the bearer token may hold only letters, digits and - . _ ~ + / ="),
    ],
)
def test_a_weak_or_unusable_token_is_refused_without_being_shown(token: str, says: str) -> None:
    given = run("--transport", "http", "--token", token)
    from_environment = run("--transport", "http", env={"PARTNER_REPO_MCP_TOKEN": token})

    for code, stderr in (given, from_environment):
        assert code == 2
        assert stderr.startswith(f"error: {says}")
        assert token not in stderr


@pytest.mark.parametrize("option", [["--port", "9000"], ["--host", "0.0.0.0"], ["--token", "x" * 20]])
def test_http_options_with_stdio_are_a_usage_error(option: list[str]) -> None:
    code, stderr = run(*option)

    assert code == 2
    assert f"Error: only --transport http takes {option[0]}" in stderr


def test_a_blank_core_is_a_usage_error() -> None:
    code, stderr = run("--core", "alice", "--core", " ")

    assert code == 2
    assert "Invalid value for --core: --core must not be empty or blank" in stderr


def test_a_port_in_use_is_one_line() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]

        code, stderr = run("--transport", "http", "--port", str(port), "--log-level", "warning")

    assert code == 2
    assert stderr.startswith(f"error: cannot serve on 127.0.0.1 port {port}: Address already in use")
    assert stderr.count("\n") == 1


def test_over_stdio_sigterm_ends_the_server_at_once_while_its_client_keeps_the_pipe_open() -> None:
    environment = {key: value for key, value in os.environ.items() if key != "MONGODB_URI"}
    process = subprocess.Popen(
        server_command(),
        stdin=subprocess.PIPE,  # held open: the server never sees the end of its input
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env=environment,
    )
    try:
        assert process.stderr is not None
        for line in process.stderr:
            if "serving MCP on stdio" in line:
                break
        process.send_signal(signal.SIGTERM)
        code = process.wait(timeout=30)
        said = process.stderr.read()
    finally:
        if process.poll() is None:
            process.kill()
        assert process.stdin is not None
        process.stdin.close()

    assert code == -signal.SIGTERM
    assert "SIGTERM: ending at once; a client ends the server cleanly by closing its stdin" in said


def test_print_config_gives_the_block_that_starts_this_server_with_absolute_paths_and_no_password() -> None:
    uri = "mongodb://app:pa55w0rd@db.example:27017/agents?replicaSet=rs0"
    result = CliRunner().invoke(main, ["--uri", uri, "mcp", "--core", "alice", "--print-config"])

    server = json.loads(result.stdout)["mcpServers"]["partner-memory"]
    assert result.exit_code == 0
    assert os.path.isabs(server["command"]) and os.path.exists(server["command"])
    assert server["args"][-3:] == ["mcp", "--core", "alice"]
    assert server["env"] == {"MONGODB_URI": "mongodb://app:***@db.example:27017/agents?replicaSet=rs0"}
    assert "pa55w0rd" not in result.output and "in place of ***" in result.stderr


def test_print_config_of_an_in_memory_server_says_so_in_its_arguments() -> None:
    result = CliRunner().invoke(main, ["--in-memory", "mcp", "--print-config"])

    server = json.loads(result.stdout)["mcpServers"]["partner-memory"]
    assert "--in-memory" in server["args"] and "env" not in server


def test_print_config_without_a_database_is_refused_as_serving_would_be() -> None:
    result = CliRunner().invoke(main, ["mcp", "--print-config"], env={"MONGODB_URI": ""})

    assert result.exit_code == 2 and result.stdout == ""
    assert "neither --uri nor MONGODB_URI is set" in result.stderr
