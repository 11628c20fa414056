"""Ready-made consumers: handy for trying the listener out and as templates for real ones.

``partner-repo listen --consumer partner_repo.listener.examples:print_consumer`` prints every roll.
"""

from __future__ import annotations

import logging
import sys
from typing import TextIO

from partner_repo.rolling.result import RollingResult


def describe_result(result: RollingResult) -> str:
    """One line: slice id, unit, core, interval, message count and summary."""
    piece = result.memory_slice
    return (
        f"slice {result.slice_id} unit {result.memory_unit.id} core {result.memory_unit.core_id} "
        f"[{piece.start_index}, {piece.end_index}) {len(result.increment_messages)} message(s): "
        f"{result.summary}"
    )


class PrintConsumer:
    """Prints one line per roll to a stream (standard output by default)."""

    def __init__(self, name: str = "print", stream: TextIO | None = None) -> None:
        self.name = name
        self._stream = stream

    async def consume(self, result: RollingResult) -> None:
        stream = self._stream or sys.stdout
        print(describe_result(result), file=stream, flush=True)


class LoggingConsumer:
    """Logs one line per roll at INFO on the ``partner_repo.listener.examples`` logger."""

    def __init__(self, name: str = "log", logger: logging.Logger | None = None) -> None:
        self.name = name
        self._logger = logger or logging.getLogger(__name__)

    async def consume(self, result: RollingResult) -> None:
        self._logger.info("rolled: %s", describe_result(result))


print_consumer = PrintConsumer()
"""A :class:`PrintConsumer` named ``print``: ``--consumer partner_repo.listener.examples:print_consumer``."""

logging_consumer = LoggingConsumer()
"""A :class:`LoggingConsumer` named ``log``."""


__all__ = ["LoggingConsumer", "PrintConsumer"]
