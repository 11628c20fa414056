"""Trying again: a consumer's attempts at one delivery, and the listener's own writes through an outage.

A consumer gets ``max_attempts`` tries with backoff, then a dead letter, so one bad slice never blocks it.
The listener's checkpoint and dead-letter writes are retried for ever instead (they are idempotent, and
giving up would lose the delivery's record); only an :class:`~partner_repo.errors.UnreadableUnit` is never
retried, since no retry could change it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from partner_repo.errors import UnreadableUnit
from partner_repo.events import RollingResult
from partner_repo.listener.delivery._registry import AfterRolling, Call, raised_by_consumer
from partner_repo.listener.delivery._retry import Backoff
from partner_repo.listener.observing import ListenerObserver
from partner_repo.listener.state import DeadLetterRepository, DeliveryKey, describe
from partner_repo.mongo import library_logger

logger = library_logger("partner_repo.listener")

T = TypeVar("T")

STORAGE_BACKOFF = Backoff(initial=0.1, multiplier=2.0, maximum=5.0)
"""How checkpoint and dead-letter writes are retried while the database is unreachable (for ever)."""


async def retry_storage(what: str, call: Callable[[], Awaitable[T]]) -> T:
    """``call()``, retried with :data:`STORAGE_BACKOFF` until it succeeds (or raises UnreadableUnit)."""
    attempt = 0
    started = time.monotonic()
    while True:
        try:
            return await call()
        except (asyncio.CancelledError, UnreadableUnit):
            raise
        except Exception as exc:
            attempt += 1
            delay = STORAGE_BACKOFF.delay(attempt)
            logger.warning(
                "listener: %s failed (%s); retrying in %.2fs (failing for %.0fs)",
                what,
                describe(exc),
                delay,
                time.monotonic() - started,
            )
            await asyncio.sleep(delay)


class ConsumerAttempts:
    """Delivers a result to a consumer with retries, and writes the dead letter when every attempt failed."""

    def __init__(
        self,
        dead_letters: DeadLetterRepository,
        group: str,
        *,
        max_attempts: int,
        backoff: Backoff,
        consume_timeout: float | None,
        observer: ListenerObserver | None = None,
    ) -> None:
        self._observer = observer or ListenerObserver()
        self._dead_letters = dead_letters
        self._group = group
        self._max_attempts = max_attempts
        self._backoff = backoff
        self._consume_timeout = consume_timeout

    @property
    def max_attempts(self) -> int:
        return self._max_attempts

    async def deliver(
        self, consumer: AfterRolling, consume: Call, unit_id: str, slice_id: str, result: RollingResult
    ) -> bool:
        """Deliver ``result`` with ``consume`` (the consumer's, as :func:`consumer_calls` decided); False when
        every attempt failed and a dead letter was written instead."""
        error = await self.attempts(
            consumer.name, f"slice {slice_id}", lambda: consume(result), slice_id=slice_id
        )
        if error is None:
            return True
        core_id, key = result.memory_unit.core_id, (slice_id, result.revision)
        await self.dead_letter(consumer, unit_id, core_id, key, error, attempts=self._max_attempts)
        return False

    async def attempts(
        self, consumer: str, what: str, call: Callable[[], Awaitable[object]], *, slice_id: str = ""
    ) -> BaseException | None:
        """Run ``call`` (one delivery of ``what`` to ``consumer``) up to ``max_attempts`` times with backoff;
        None once it succeeded, else the last failure (logged: the caller writes the dead letter). Failed
        attempts are reported to the observer with ``slice_id`` (empty for an erasure)."""
        error: BaseException | None = None
        for attempt in range(1, self._max_attempts + 1):
            try:
                await asyncio.wait_for(call(), self._consume_timeout)
                return None
            except BaseException as exc:  # a consumer's CancelledError is its failure, not our stop
                if not raised_by_consumer(exc):
                    raise
                error = exc
                retrying = attempt < self._max_attempts
                self._observer.attempt_failed(self._group, consumer, slice_id, attempt, retrying)
                if retrying:
                    delay = self._backoff.delay(attempt)
                    logger.warning(
                        "AfterRolling consumer %r failed on %s (attempt %d of %d): %s; retry in %.2fs",
                        consumer,
                        what,
                        attempt,
                        self._max_attempts,
                        describe(exc),
                        delay,
                    )
                    await asyncio.sleep(delay)
        assert error is not None
        logger.error(
            "AfterRolling consumer %r failed on %s %d times; writing a dead letter and moving on",
            consumer,
            what,
            self._max_attempts,
            exc_info=error,
        )
        return error

    async def dead_letter(
        self,
        consumer: AfterRolling,
        unit_id: str,
        core_id: str,
        key: DeliveryKey,
        error: BaseException,
        *,
        attempts: int,
    ) -> None:
        """The dead letter of one delivery: a slice at a revision (a revision's letter is its own)."""
        slice_id, revision = key
        await retry_storage(
            f"dead letter for slice {slice_id}",
            lambda: self._dead_letters.record(
                group=self._group,
                consumer=consumer.name,
                unit_id=unit_id,
                core_id=core_id,
                slice_id=slice_id,
                error=error,
                attempts=attempts,
                revision=revision,
            ),
        )


__all__: list[str] = []  # internal to the listener: nothing here is public API
