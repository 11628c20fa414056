"""Ready-made consumers: handy for trying the listener out and as templates for real ones.

``partner-repo listen --consumer partner_repo.listener.examples:print_consumer`` prints every roll.
"""

from __future__ import annotations

import logging
import sys
from typing import TextIO

from partner_repo.events import Erasure, RollingResult
from partner_repo.mongo import library_logger


def describe_result(result: RollingResult) -> str:
    """One line: slice id, unit, core, interval, message count and summary."""
    piece = result.memory_slice
    return (
        f"slice {result.slice_id} unit {result.memory_unit.id} core {result.memory_unit.core_id} "
        f"[{piece.start_index}, {piece.end_index}) {len(result.increment_messages)} message(s): "
        f"{result.summary}"
    )


def describe_erasure(erasure: Erasure) -> str:
    """One line: the erasure, its core and how many units and slices it removed (ids only, as received)."""
    return (
        f"erasure {erasure.seq} ({erasure.scope}) core {erasure.core_id}: {len(erasure.unit_ids)} unit(s), "
        f"{len(erasure.slice_ids)} slice(s) erased"
    )


class PrintConsumer:
    """Prints one line per roll (and per erasure) to a stream (standard output by default)."""

    def __init__(self, name: str = "print", stream: TextIO | None = None) -> None:
        self.name = name
        self._stream = stream

    async def consume(self, result: RollingResult) -> None:
        stream = self._stream or sys.stdout
        print(describe_result(result), file=stream, flush=True)

    async def on_erased(self, erasure: Erasure) -> None:
        print(describe_erasure(erasure), file=self._stream or sys.stdout, flush=True)


class LoggingConsumer:
    """Logs one line per roll (and per erasure) at INFO on the ``partner_repo.listener.examples`` logger."""

    def __init__(self, name: str = "log", logger: logging.Logger | None = None) -> None:
        self.name = name
        self._logger = logger or library_logger("partner_repo.listener.examples")

    async def consume(self, result: RollingResult) -> None:
        self._logger.info("rolled: %s", describe_result(result))

    async def on_erased(self, erasure: Erasure) -> None:
        self._logger.info("erased: %s", describe_erasure(erasure))


print_consumer = PrintConsumer()
"""A :class:`PrintConsumer` named ``print``: ``--consumer partner_repo.listener.examples:print_consumer``."""

logging_consumer = LoggingConsumer()
"""A :class:`LoggingConsumer` named ``log``."""


__all__ = ["LoggingConsumer", "PrintConsumer"]
