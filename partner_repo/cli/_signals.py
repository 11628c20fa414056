"""Stopping a long-running command (``listen``, ``roll-idle``, ``mcp``) on SIGINT/SIGTERM: cleanly, or at once
where it cannot be stopped from inside."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from collections.abc import Callable, Iterator


@contextlib.contextmanager
def stop_on_signals(stop: asyncio.Event) -> Iterator[None]:
    """Set ``stop`` on SIGINT/SIGTERM while the block runs, so the command finishes its work instead of dying.

    Where the platform has no loop signal handlers, nothing is installed and Ctrl-C interrupts as usual.
    """
    with _on_signals(lambda _sig: stop.set()):
        yield


@contextlib.contextmanager
def end_at_once_on_signals(say: str) -> Iterator[None]:
    """End the process at once on SIGINT/SIGTERM while the block runs (logging ``say`` first), as if no
    handler were installed: for work that cannot be stopped cleanly from inside, such as a read of stdin
    blocked in a thread (``mcp`` over stdio) that only the other end can finish by closing the pipe.

    The signal is raised again with its default action, so the process ends as killed by it (what its
    parent expects of SIGTERM); work cut short must be safe to cut (the library's writes are fenced).
    """

    def end(sig: signal.Signals) -> None:
        logging.getLogger("partner_repo.cli.signals").info("%s: %s", sig.name, say)
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
