"""Running ``partner-repo`` command lines: parsing those found in docs and config files, signalling a
long-running command in a process of its own, and stopping ``listen`` run in-process."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import click
import pytest

from partner_repo.cli import main

Seed = Callable[[Any], Awaitable[object]]
"""What puts a test's data into its commands' database (``async def seed(database)``): see the
``every_command_uses`` fixture (``tests/unit/cli/conftest.py``)."""


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


def run_until_signal(
    arguments: list[str],
    *,
    running: str,
    stop_signal: signal.Signals,
    console_script: bool = False,
    cwd: Path | None = None,
) -> tuple[int, str]:
    """Run ``partner-repo ARGUMENTS`` on the in-memory database in a process of its own; once a stderr line
    says it is ``running`` (its signal handlers are installed), send ``stop_signal``. With
    ``console_script``, run the installed ``partner-repo`` script rather than ``python -m partner_repo``
    (which puts the working directory on ``sys.path`` by itself).

    Returns the exit code and the rest of stderr.
    """
    environment = {k: v for k, v in os.environ.items() if k not in {"MONGODB_URI", "PARTNER_REPO_DB"}}
    script = Path(sys.executable).parent / "partner-repo"
    command = [str(script)] if console_script else [sys.executable, "-m", "partner_repo"]
    process = subprocess.Popen(
        [*command, "--in-memory", *arguments],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=environment,
        cwd=cwd,
    )
    try:
        assert process.stderr is not None
        for line in process.stderr:
            if running in line:
                break
        else:
            raise AssertionError(f"{arguments} ended without saying {running!r}")
        process.send_signal(stop_signal)
        _, errors = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
    return process.returncode, errors


def listen_stops(monkeypatch: pytest.MonkeyPatch) -> list[asyncio.Event]:
    """Run ``listen`` in-process without its signal handlers: once it runs, the list returned holds the event
    that stops it (set it from a consumer)."""
    from partner_repo.cli import _listen as listen_module

    stops: list[asyncio.Event] = []

    def capture(stop: asyncio.Event) -> contextlib.nullcontext[None]:
        stops[:] = [stop]
        return contextlib.nullcontext()

    monkeypatch.setattr(listen_module, "stop_on_signals", capture)
    return stops
