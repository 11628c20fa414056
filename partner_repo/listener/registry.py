"""AfterRolling consumers and the registry that runs them: Partner's ``AfterRollingRegistry``.

A consumer has a ``name`` (it keys the listener's per-consumer progress and dead letters, so it must be
stable across restarts and unique within a registry) and an ``async consume(result)``.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Protocol, runtime_checkable

from partner_repo.errors import InvalidInput
from partner_repo.rolling.result import RollingResult

logger = logging.getLogger(__name__)


@runtime_checkable
class AfterRolling(Protocol):
    """Something that acts on every roll: index the slice, update a profile, notify a service."""

    @property
    def name(self) -> str: ...

    async def consume(self, result: RollingResult) -> None: ...


class AfterRollingRegistry:
    """The consumers of rolls, in registration order."""

    def __init__(self, consumers: list[AfterRolling] | None = None) -> None:
        self._consumers: list[AfterRolling] = []
        for consumer in consumers or []:
            self.register(consumer)

    def register(self, consumer: AfterRolling) -> None:
        """Add a consumer; registering the same consumer again keeps one.

        A *different* consumer under a name already taken is refused: progress and dead letters are kept
        by name, so two consumers sharing one would share (and corrupt) them.
        """
        if not isinstance(consumer, AfterRolling):
            raise InvalidInput(
                f"a consumer needs a `name` and an `async consume(result)`, got {type(consumer).__name__}"
            )
        name = _consumer_name(consumer)
        for existing in self._consumers:
            if existing is consumer:
                return
            if existing.name == name:
                raise InvalidInput(f"another consumer is already registered as {name!r}")
        self._consumers.append(consumer)

    def unregister(self, consumer: AfterRolling | str) -> bool:
        """Remove a consumer (the object or its name); True when it was registered."""
        for index, existing in enumerate(self._consumers):
            if existing is consumer or existing.name == consumer:
                del self._consumers[index]
                return True
        return False

    def consumers(self) -> list[AfterRolling]:
        """The registered consumers in registration order (a copy)."""
        return list(self._consumers)

    def get(self, name: str) -> AfterRolling | None:
        """The consumer registered under ``name``, or None."""
        return next((c for c in self._consumers if c.name == name), None)

    def __len__(self) -> int:
        return len(self._consumers)

    async def trigger(self, result: RollingResult) -> list[str]:
        """Run every consumer in registration order; one that raises does not stop the others.

        Each failure is logged with the consumer's name and the slice id. Returns the names of the consumers
        that failed (empty when all succeeded).
        """
        failed: list[str] = []
        for consumer in list(self._consumers):
            try:
                await consumer.consume(result)
            except BaseException as exc:
                if not raised_by_consumer(exc):
                    raise
                failed.append(consumer.name)
                logger.exception(
                    "AfterRolling consumer %r failed on slice %s (unit %s)",
                    consumer.name,
                    result.slice_id,
                    result.memory_unit.id,
                )
        return failed


def raised_by_consumer(exc: BaseException) -> bool:
    """Whether ``exc``, raised out of ``consume``, is that consumer's failure rather than ours to propagate.

    A consumer may raise anything, ``asyncio.CancelledError`` included (a cancelled inner task, a timeout
    library): that is its failure, retried and dead-lettered like any exception, never a reason to stop
    delivering; so is a ``KeyboardInterrupt`` or ``SystemExit`` raised by its code (a Ctrl-C reaches an
    asyncio program as the cancellation of its main task, and ``partner-repo listen`` handles SIGINT itself,
    so neither comes from outside a consumer). Only the cancellation of the task running it
    (``cancelling()``: the listener stopping) propagates.
    """
    task = asyncio.current_task()
    return task is None or task.cancelling() == 0


def _consumer_name(consumer: AfterRolling) -> str:
    """The consumer's name, checked: a non-blank string."""
    name = getattr(consumer, "name", None)
    if not isinstance(name, str) or not name.strip():
        raise InvalidInput(f"consumer {consumer!r} needs a non-blank string `name`, got {name!r}")
    return name


__all__ = ["AfterRolling", "AfterRollingRegistry"]
