"""Stopping a long-running command (``listen``, ``roll-idle``, ``mcp``) on SIGINT/SIGTERM, at every moment:
cleanly, or at once where it cannot be stopped from inside.

The handlers are installed before the command connects, so a signal is answered while it connects, retries
with backoff, waits on the change stream or delivers: :func:`until_stopped` races each of those against the
signal, and the stop that follows is bounded (a second when nothing is in flight, the drain timeout when
something is). A second signal ends the process at once. Exit codes (docs/cli.md): SIGINT (Ctrl-C) 130,
SIGTERM (the service manager's stop) 0 once stopped. ``mcp`` over stdio ends at once instead
(:func:`end_at_once_on_signals`): its stdin is read in a thread only its client can end.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any, NoReturn, TypeVar

from partner_repo.cli._runtime import EXIT_INTERRUPTED
from partner_repo.mongo import library_logger

T = TypeVar("T")

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
    received = Received()

    def on_signal(sig: signal.Signals) -> None:
        if received.signal is not None:
            library_logger("partner_repo.cli.signals").warning("%s again: stopping at once", sig.name)
            exit_now(received.exit_code)
        received.signal = sig
        stop.set()

    with _on_signals(on_signal):
        yield received


@contextlib.contextmanager
def end_at_once_on_signals(say: str) -> Iterator[None]:
    """End the process at once on SIGINT/SIGTERM while the block runs (logging ``say`` first), as if no
    handler were installed: for work that cannot be stopped cleanly from inside, such as a read of stdin
    blocked in a thread (``mcp`` over stdio) that only the other end can finish by closing the pipe.

    The signal is raised again with its default action, so the process ends as killed by it (what its
    parent expects of SIGTERM); work cut short must be safe to cut (the library's writes are fenced).
    """

    def end(sig: signal.Signals) -> None:
        library_logger("partner_repo.cli.signals").info("%s: %s", sig.name, say)
        signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)

    with _on_signals(end):
        yield


@contextlib.contextmanager
def _on_signals(handle: Callable[[signal.Signals], None]) -> Iterator[None]:
    """``handle(signal)`` on SIGINT/SIGTERM while the block runs, on the running loop (where it has signal
    handlers)."""
    loop = asyncio.get_running_loop()
    installed: list[signal.Signals] = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, handle, sig)
            installed.append(sig)
    try:
        yield
    finally:
        for sig in installed:
            loop.remove_signal_handler(sig)


async def until_stopped(stop: asyncio.Event, work: Awaitable[T]) -> T | None:
    """``work``'s result, or None once ``stop`` is set first (``work`` is then cancelled, not waited for)."""
    task = asyncio.ensure_future(work)
    task.add_done_callback(_retrieved)
    waiting = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({task, waiting}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        waiting.cancel()
    if task.done():
        return task.result()
    task.cancel()
    return None


async def opened_or_exit(
    stop: asyncio.Event, opening: Awaitable[T], received: Received, log: logging.Logger
) -> T:
    """What ``opening`` (a command's connection) gives, or the end of the process with ``received``'s exit
    code when a signal comes first: a driver thread still connecting (Motor's) is not waited for."""
    opened = await until_stopped(stop, opening)
    if opened is None:
        log.info("stopped before the database answered")
        exit_now(received.exit_code)
    return opened


def _retrieved(task: asyncio.Future[Any]) -> None:
    """Mark what ``task`` raised as seen: it reaches the caller (through ``task.result()``, or out of the
    event loop for a KeyboardInterrupt), so asyncio must not log it again as never retrieved."""
    if not task.cancelled():
        task.exception()


def exit_now(code: int) -> NoReturn:
    """End the process now with ``code``, output flushed: what is left (a driver's threads blocked on a server
    that went away, a stop that did not finish) is not waited for."""
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


__all__ = [
    "STOP_GRACE_S",
    "Received",
    "end_at_once_on_signals",
    "exit_now",
    "opened_or_exit",
    "stop_on_signals",
    "until_stopped",
]
