"""Running a long-running `partner-repo` command in a process of its own, stopped with a real signal."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

CONNECTING = "Server selection started"
"""What the driver logs (at DEBUG) when the command, its signal handling in place, reaches for its server."""


def start(arguments: list[str]) -> subprocess.Popen[str]:
    environment = {k: v for k, v in os.environ.items() if k not in {"MONGODB_URI", "PARTNER_REPO_DB"}}
    return subprocess.Popen(
        [sys.executable, "-m", "partner_repo", *arguments],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=environment,
    )


def stopped_within(
    process: subprocess.Popen[str], stop_signal: signal.Signals, bound: float
) -> tuple[int, str]:
    """Send ``stop_signal``; the exit code and stderr (failing when it takes longer than ``bound``)."""
    process.send_signal(stop_signal)
    sent = time.monotonic()
    try:
        _, errors = process.communicate(timeout=bound + 10)
    finally:
        if process.poll() is None:
            process.kill()
    took = time.monotonic() - sent
    assert took < bound, f"took {took:.1f}s to stop: {errors}"
    return process.returncode, errors


def start_connecting(arguments: list[str]) -> subprocess.Popen[str]:
    """``start`` with the driver's DEBUG log, returned once the command is connecting (whatever the time the
    machine takes to start Python): a signal sent then meets the command's own handling, never Python's
    start-up. The driver keeps logging; stop the process soon (its stderr pipe is read only then)."""
    process = start(["--log-level", "DEBUG", *arguments])
    assert process.stderr is not None
    for line in process.stderr:
        if CONNECTING in line:
            return process
    raise AssertionError(f"the command ended before connecting: {process.wait()}")
