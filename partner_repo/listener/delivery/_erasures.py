"""Delivering erasures: every part of the erasure log, to the group's consumers that have ``on_erased``.

The erasure log (:mod:`partner_repo.listener.state._erasure_log`) is append-only and each part becomes visible
only after every earlier one, so a group needs one number to know what it has delivered: its erasure cursor,
kept on the group's checkpoint with the consumers that finished a later part (:class:`ListenerCheckpoints`).
The holder of the group's lease, while it delivers slices, also follows the log: every ``interval`` seconds
(and on ``flush()``) it delivers each part after the cursor, in log order, then moves the cursor. A group that
was down catches up from its cursor when it starts again, so every consumer hears of every erasure at least
once.

For each part:

1. wait until no delivery of its slices is in flight (one may have loaded a slice before it was erased), so
   ``on_erased`` comes after every ``consume`` of those slices, and none can come after it (the log names
   only erasures that already deleted their units, which can no longer be loaded);
2. hand it to each consumer with ``on_erased`` that has not finished it, with the retries of ``consume``; when
   every attempt fails, a dead letter names the erasure (``dead-letters replay`` hands it over again);
3. remove the group's own progress and dead letters on the erased units once more (a delivery in flight during
   the erasure may have written them after the eraser removed them);
4. move the cursor past it. A crash before that delivers the part again (at least once).

Consumers without ``on_erased`` are left alone; a group none of whose consumers has it does not follow the
log at all (no task, no query: such a listener runs exactly as before), and its cursor stays where it was, so
a consumer with ``on_erased`` added to it later hears of every erasure since.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterable
from functools import partial as partial_call

from partner_repo.events import Erasure, handles_erasures
from partner_repo.listener.delivery._attempts import ConsumerAttempts, retry_storage
from partner_repo.listener.delivery._registry import AfterRolling, consumer_calls
from partner_repo.listener.delivery._retry import Backoff
from partner_repo.listener.state import (
    DeadLetterRepository,
    ErasureLog,
    ListenerCheckpoints,
    describe,
    remove_unit_progress,
)
from partner_repo.mongo import MongoDatabase, library_logger

logger = library_logger("partner_repo.listener")

SETTLE_POLL_S = 0.01
"""How often a part waits for the in-flight deliveries of its slices to finish."""


class ErasureDelivery:
    """Follows the erasure log for one listener group; see the module docstring."""

    def __init__(
        self,
        database: MongoDatabase,
        checkpoints: ListenerCheckpoints,
        dead_letters: DeadLetterRepository,
        consumers: list[AfterRolling],
        *,
        delivering: Callable[[Iterable[str]], bool],
        interval: float,
        max_attempts: int,
        backoff: Backoff,
        consume_timeout: float | None,
    ) -> None:
        self._database = database
        self._log = ErasureLog(database)
        self._checkpoints = checkpoints
        self._dead_letters = dead_letters
        self._consumers = [c for c in consumers if handles_erasures(c)]
        self._on_erased = {c.name: consumer_calls(c).on_erased for c in self._consumers}  # decided once
        self._delivering = delivering
        self._interval = interval
        self._attempts = ConsumerAttempts(
            dead_letters,
            checkpoints.group_name,
            max_attempts=max_attempts,
            backoff=backoff,
            consume_timeout=consume_timeout,
        )
        self._lock = asyncio.Lock()
        self.delivered = 0
        self.dead_lettered = 0

    async def run(self, stopping: asyncio.Event) -> None:
        """Catch up every ``interval`` seconds until ``stopping``; a failed pass is logged and tried again."""
        while self._consumers and not stopping.is_set():
            try:
                await self.catch_up()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                logger.warning("listener: delivering erasures failed (%s); trying again", describe(exc))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stopping.wait(), self._interval)

    async def catch_up(self) -> int:
        """Deliver every part of the log after the group's cursor; returns how many parts."""
        if not self._consumers:
            return 0
        async with self._lock:
            seq, done_by = await retry_storage(
                "reading the erasure cursor", self._checkpoints.erasure_progress
            )
            count = 0
            while True:
                parts = await retry_storage("reading the erasure log", partial_call(self._log.after, seq))
                if not parts:
                    return count
                for erasure in parts:
                    await self._deliver(erasure, done_by.get(erasure.seq, set()))
                    seq = erasure.seq
                    count += 1

    async def _deliver(self, erasure: Erasure, done_by: set[str]) -> None:
        while self._delivering(erasure.unit_ids):  # noqa: ASYNC110 - the pipeline keeps no event per slice
            await asyncio.sleep(SETTLE_POLL_S)
        pending = [c for c in self._consumers if c.name not in done_by]
        await asyncio.gather(*(self._deliver_to(c, erasure, others=len(pending) > 1) for c in pending))
        group, units = self._checkpoints.group_name, erasure.unit_ids
        await retry_storage(
            f"progress on the units of erasure {erasure.seq}",
            lambda: remove_unit_progress(self._database, units, group=group),
        )
        await retry_storage(
            f"dead letters of the units of erasure {erasure.seq}",
            lambda: self._dead_letters.remove_for_units(units, group=group),
        )
        await retry_storage("the erasure cursor", lambda: self._checkpoints.advance_erasures(erasure.seq))
        logger.info(
            "listener group %r: erasure %s (core %r, %d unit(s), %d slice(s)) delivered",
            group,
            erasure.seq,
            erasure.core_id,
            len(erasure.unit_ids),
            len(erasure.slice_ids),
        )

    async def _deliver_to(self, consumer: AfterRolling, erasure: Erasure, *, others: bool) -> None:
        on_erased = self._on_erased[consumer.name]
        assert on_erased is not None  # handles_erasures checked it
        what = f"erasure {erasure.seq} (core {erasure.core_id})"
        error = await self._attempts.attempts(consumer.name, what, lambda: on_erased(erasure))
        if error is None:
            self.delivered += 1
        else:
            self.dead_lettered += 1
            await retry_storage(
                f"dead letter for erasure {erasure.seq}",
                lambda: self._dead_letters.record_erasure(
                    group=self._checkpoints.group_name,
                    consumer=consumer.name,
                    core_id=erasure.core_id,
                    erasure_seq=erasure.seq,
                    error=error,
                    attempts=self._attempts.max_attempts,
                ),
            )
        if others:
            await retry_storage(
                f"progress of consumer {consumer.name!r} on erasure {erasure.seq}",
                lambda: self._checkpoints.mark_erasure_done_by(erasure.seq, consumer.name),
            )


__all__: list[str] = []  # internal to the listener: nothing here is public API
