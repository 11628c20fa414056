"""Running ``partner-repo`` command lines: parsing those found in docs and config files, and signalling a
long-running command in a process of its own."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from typing import Any

import click
import pytest

from partner_repo.cli import main
from partner_repo.cli.app import Connection


def parse_cli(arguments: list[str]) -> click.Context:
    """Parse a ``partner-repo`` command line as click would (options, arguments, subcommands), not run it.

    Raises click's ``UsageError`` for an unknown command or option, a missing argument or a bad value.
    """
    ctx = main.make_context("partner-repo", list(arguments))
    command: click.Command = main
    while isinstance(command, click.Group):
        rest = [*getattr(ctx, "_protected_args", []), *ctx.args]
        if not rest:
            break
        name, sub, rest = command.resolve_command(ctx, rest)
        assert name is not None and sub is not None, arguments
        ctx = sub.make_context(name, rest, parent=ctx)
        command = sub
    return ctx


def run_until_signal(arguments: list[str], *, running: str, stop_signal: signal.Signals) -> tuple[int, str]:
    """Run ``partner-repo ARGUMENTS`` on the in-memory database in a process of its own; once its first stderr
    line says it is ``running`` (its signal handlers are installed), send ``stop_signal``.

    Returns the exit code and the rest of stderr.
    """
    environment = {k: v for k, v in os.environ.items() if k not in {"MONGODB_URI", "PARTNER_REPO_DB"}}
    process = subprocess.Popen(
        [sys.executable, "-m", "partner_repo", *arguments],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=environment,
    )
    try:
        assert process.stderr is not None
        assert running in process.stderr.readline()
        process.send_signal(stop_signal)
        _, errors = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
    return process.returncode, errors


def every_command_uses(database: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """Make every command invocation of the test connect to ``database`` (and never to ``MONGODB_URI``)."""

    async def open_database(self: Connection) -> Any:
        return database

    monkeypatch.setattr(Connection, "open", open_database)
    monkeypatch.delenv("MONGODB_URI", raising=False)
    return database
