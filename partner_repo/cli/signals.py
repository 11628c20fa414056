"""Stopping a long-running command (``listen``, ``roll-idle``) on SIGINT/SIGTERM, at every moment.

The handlers are installed before the command connects, so a signal is answered while it connects, retries
with backoff, waits on the change stream or delivers: :func:`until_stopped` races each of those against the
signal, and the stop that follows is bounded (a second when nothing is in flight, the drain timeout when
something is). A second signal ends the process at once. Exit codes (docs/cli.md): SIGINT (Ctrl-C) 130,
SIGTERM (the service manager's stop) 0 once stopped.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
from collections.abc import Awaitable, Iterator
from dataclasses import dataclass
from typing import NoReturn, TypeVar

T = TypeVar("T")

EXIT_INTERRUPTED = 130
STOP_GRACE_S = 0.8
"""How long a stop with nothing in flight may take (its last writes) before the command gives up on them."""


@dataclass
class Received:
    """The signal that asked the command to stop (None: none yet)."""

    signal: signal.Signals | None = None

    @property
    def exit_code(self) -> int:
        """130 after SIGINT (Ctrl-C), 0 after SIGTERM or no signal (a clean stop)."""
        return EXIT_INTERRUPTED if self.signal == signal.SIGINT else 0


@contextlib.contextmanager
def stop_on_signals(stop: asyncio.Event) -> Iterator[Received]:
    """Set ``stop`` on SIGINT/SIGTERM while the block runs, so the command finishes its work instead of dying;
    a second signal ends the process at once (with the first one's exit code). Yields what was received.

    Where the platform has no loop signal handlers, nothing is installed and Ctrl-C interrupts as usual.
    """
    loop = asyncio.get_running_loop()
    received = Received()

    def on_signal(sig: signal.Signals) -> None:
        if received.signal is not None:
            logging.getLogger(__name__).warning("%s again: stopping at once", sig.name)
            exit_now(received.exit_code)
        received.signal = sig
        stop.set()

    installed: list[signal.Signals] = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, on_signal, sig)
            installed.append(sig)
    try:
        yield received
    finally:
        for sig in installed:
            loop.remove_signal_handler(sig)


async def until_stopped(stop: asyncio.Event, work: Awaitable[T]) -> T | None:
    """``work``'s result, or None once ``stop`` is set first (``work`` is then cancelled, not waited for)."""
    task = asyncio.ensure_future(work)
    waiting = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({task, waiting}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        waiting.cancel()
    if task.done():
        return task.result()
    task.cancel()
    return None


def exit_now(code: int) -> NoReturn:
    """End the process now with ``code``, output flushed: what is left (a driver's threads blocked on a server
    that went away, a stop that did not finish) is not waited for."""
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


__all__ = ["EXIT_INTERRUPTED", "STOP_GRACE_S", "Received", "exit_now", "stop_on_signals", "until_stopped"]
