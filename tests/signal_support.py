"""Running a long-running `partner-repo` command in a process of its own, stopped with a real signal."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time


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
