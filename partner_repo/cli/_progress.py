"""Progress of long-running commands (``check``, ``repair``, ``import-state``, ``migrate``): a rich bar on
stderr when stderr is a terminal, nothing at all in a pipe or a log file.

The library only calls a :data:`~partner_repo.callables.Progress` callback; drawing is done here.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from partner_repo.callables import Progress as ProgressHook
from partner_repo.cli._runtime import note_interruption


def on_terminal() -> bool:
    """Whether stderr is a terminal (a person watching), rather than a pipe or a file."""
    return sys.stderr.isatty()


@contextlib.contextmanager
def progress_bar(label: str) -> Iterator[ProgressHook | None]:
    """A callback drawing ``label`` and a bar on stderr while the block runs, on a terminal; else None (the
    library then does not even count what it will do)."""
    if not on_terminal():
        yield None
        return
    bar = _Bar(label)
    try:
        yield bar.update
    finally:
        bar.close()


@contextlib.contextmanager
def counted_progress(label: str, interrupted: Callable[[int, int], str]) -> Iterator[ProgressHook]:
    """A callback that always counts (``done``, ``total``), drawing :func:`progress_bar` on a terminal, so
    that a Ctrl-C says how far the command got: ``interrupted(done, total)`` (nothing before the first
    count)."""
    seen: list[int] = []

    def said() -> str | None:
        return interrupted(*seen) if seen else None

    note_interruption(said)
    with progress_bar(label) as bar:

        def update(done: int, total: int) -> None:
            seen[:] = [done, total]
            if bar is not None:
                bar(done, total)

        yield update


class _Bar:
    """A transient rich progress bar, started at the first report (when the total is known)."""

    def __init__(self, label: str) -> None:
        self._label = label
        self._progress: Progress | None = None
        self._task: Any = None

    def update(self, done: int, total: int) -> None:
        if self._progress is None:
            self._progress = Progress(
                TextColumn(self._label),
                BarColumn(),
                MofNCompleteColumn(),
                TimeRemainingColumn(),
                console=Console(stderr=True, force_terminal=True),
                transient=True,
            )
            self._progress.start()
            self._task = self._progress.add_task(self._label, total=total)
        self._progress.update(self._task, completed=done, total=total)

    def close(self) -> None:
        if self._progress is not None:
            self._progress.stop()
