"""RollingListener: delivers every slice appended to ``memory_units`` to AfterRolling consumers.

It runs one source (the change stream on a replica set; polling where change streams are unavailable) into one
:class:`~partner_repo.listener.delivery._pipeline.DeliveryPipeline`, with per-group checkpoints so a restart
resumes where the group stopped. See ``docs/listener.md`` for the guarantees and how each is kept.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from types import TracebackType
from typing import Any

from partner_repo.errors import GroupLeaseLost, InvalidInput, PartnerRepoError
from partner_repo.listener._options import ListenerOptions, SourceChoice, consumer_concurrency
from partner_repo.listener.delivery import (
    AfterRolling,
    AfterRollingRegistry,
    Backoff,
    DeliveryPipeline,
    ErasureDelivery,
    ReplayReport,
    replay_dead_letters,
)
from partner_repo.listener.observing import SAMPLE_INTERVAL, GuardedObserver, ListenerObserver
from partner_repo.listener.state import (
    DEFAULT_LEASE_TTL,
    DeadLetter,
    DeadLetterRepository,
    ErasureLog,
    GroupCheckpoint,
    GroupLease,
    ListenerCheckpoints,
    ListenerLag,
    StartFrom,
    describe,
    new_owner_id,
)
from partner_repo.listener.stream import (
    GroupSources,
    SourceStopped,
    UnreadableUnits,
    take_history_as_delivered,
)
from partner_repo.mongo import MongoDatabase, library_logger
from partner_repo.units import MemoryUnitRepository

logger = library_logger("partner_repo.listener")

DEFAULT_POLL_INTERVAL = 1.0
"""Seconds between polling passes (and the longest a change-stream read waits before the idle token is
saved)."""


class RollingListener:
    """Watches the database and hands every new slice, as a RollingResult, to the registry's consumers.

    ``group`` names the checkpoint: listeners in different groups each get every slice, and of several
    listeners in one group only the holder of the group's lease delivers (the others stand by and take over
    after ``lease_ttl`` seconds of its silence). ``start_from`` only matters the first time a group starts:
    ``"beginning"`` delivers every slice already stored (a backfill), ``"now"`` only those appended after
    that first start. ``source="polling"`` skips change streams even where they exist. A consumer is tried
    ``max_attempts`` times in all (waiting ``backoff`` between tries; a try longer than ``consume_timeout``
    seconds, when set, counts as failed) before a dead letter is written. At most ``max_pending`` slices are
    held in memory awaiting delivery; beyond that the source waits (the one way a very slow consumer can
    slow the others). ``stop()`` waits up to ``drain_timeout`` seconds for in-flight deliveries. Each
    consumer is handed up to ``concurrency`` slices of different units at once (a consumer's own
    ``concurrency`` attribute wins); a unit's slices always go one at a time, in slice order. ``observer``
    is told what happens (:class:`~partner_repo.listener.observing._observer.ListenerObserver`), for metrics.
    """

    def __init__(
        self,
        database: MongoDatabase,
        registry: AfterRollingRegistry,
        *,
        group: str = "default",
        poll_interval: float = DEFAULT_POLL_INTERVAL,
        start_from: StartFrom = "beginning",
        source: SourceChoice = "auto",
        max_attempts: int = 5,
        backoff: Backoff | None = None,
        max_pending: int = 10_000,
        consume_timeout: float | None = None,
        drain_timeout: float = 30.0,
        lease_ttl: float = DEFAULT_LEASE_TTL,
        concurrency: int = 1,
        observer: ListenerObserver | None = None,
    ) -> None:
        options = ListenerOptions.checked(
            registry,
            group=group,
            poll_interval=poll_interval,
            start_from=start_from,
            source=source,
            max_attempts=max_attempts,
            backoff=backoff,
            max_pending=max_pending,
            consume_timeout=consume_timeout,
            drain_timeout=drain_timeout,
            lease_ttl=lease_ttl,
            concurrency=concurrency,
            observer=observer,
        )
        self._wire(database, registry, options)

    def _wire(
        self, database: MongoDatabase, registry: AfterRollingRegistry, options: ListenerOptions
    ) -> None:
        """The listener's collaborators on ``database``, built from its checked ``options``: what reads (the
        group's sources), what keeps state (checkpoints, dead letters, the group's lease), what observes."""
        self._group = options.group
        self._poll_interval = options.poll_interval
        self._drain_timeout = options.drain_timeout
        self._consume_timeout = options.consume_timeout
        self._max_attempts = options.max_attempts
        self._max_pending = options.max_pending
        self._concurrency = options.concurrency
        self._database = database
        self._registry = registry
        self._start_from = options.start_from
        self._source_choice = options.source
        self._backoff = options.backoff
        self._observer = options.observer
        self._watch = GuardedObserver(options.observer)
        self._units = MemoryUnitRepository(database, majority_reads=True)  # what it hands out stays
        self._checkpoints = ListenerCheckpoints(database, self._group)
        self._dead_letters = DeadLetterRepository(database)
        self._lease = GroupLease(
            self._checkpoints, owner=new_owner_id(), ttl=options.lease_ttl, vitals=self._vitals
        )
        self._unreadable = UnreadableUnits(self._group)
        self._concurrency_of: dict[str, int] = {}
        self._sampler: asyncio.Task[None] | None = None
        self._pipeline: DeliveryPipeline | None = None
        self._erasures: ErasureDelivery | None = None
        self._sources = GroupSources(
            self._group,
            self._units,
            self._checkpoints,
            self._unreadable,
            poll_interval=self._poll_interval,
            backoff=self._backoff,
            report=self._lease.report,
        )
        self._stopping = asyncio.Event()
        self._term_over = asyncio.Event()
        self._active = False
        self._task: asyncio.Task[None] | None = None

    # -- lifecycle ---------------------------------------------------------------------------------------

    @property
    def group(self) -> str:
        return self._group

    @property
    def running(self) -> bool:
        return self._task is not None

    @property
    def source(self) -> str | None:
        """``"change_stream"`` or ``"polling"`` while delivering, else None (stopped, or standing by)."""
        return None if self._pipeline is None else self._pipeline.source

    @property
    def active(self) -> bool:
        """Whether this listener holds its group's lease (a standby waits for the holder to go away)."""
        return self._active

    @property
    def owner(self) -> str:
        """This listener's id in the group lease (host:pid:random)."""
        return self._lease.owner

    async def start(self) -> None:
        """Open the group's checkpoint (creating it on first use) and start delivering in the background."""
        if self._task is not None:
            raise PartnerRepoError(f"listener group {self._group!r} is already running")
        consumers = self._registry.consumers()
        if not consumers:
            raise InvalidInput("register at least one AfterRolling consumer before starting a listener")
        self._concurrency_of = {c.name: consumer_concurrency(c, self._concurrency) for c in consumers}
        checkpoint = await self._open_group()
        active = await self._lease.try_acquire()
        self._pipeline, self._erasures = self._delivery(consumers, checkpoint)
        self._pipeline.start()
        self._stopping = asyncio.Event()
        self._term_over = asyncio.Event()
        self._sources.ready = asyncio.Event()
        self._set_active(active)
        self._task = asyncio.create_task(
            self._run(self._pipeline, self._erasures), name=f"listener:{self._group}"
        )
        if self._observer is not None:
            self._sampler = asyncio.create_task(self._sample(self._pipeline), name=f"sample:{self._group}")
        logger.info(
            "listener group %r started with consumers %s (concurrency %s)%s",
            self._group,
            [c.name for c in consumers],
            self._concurrency_of,
            "" if self._active else " (standing by: another listener holds the group)",
        )

    async def _open_group(self) -> GroupCheckpoint:
        """The group's checkpoint, created on its first start (from the newest erasure on: a new group has
        none of the erased slices to forget); a group started from "now" first takes the history as
        delivered."""
        last_erasure = await ErasureLog(self._database).last_seq()  # a new group's erasure cursor
        checkpoint = await self._checkpoints.open_group(self._start_from, erasure_seq=last_erasure)
        if checkpoint.start_from != self._start_from:
            logger.info(
                "listener group %r exists (started from %r); start_from=%r applies only to new groups",
                self._group,
                checkpoint.start_from,
                self._start_from,
            )
        if checkpoint.baseline_pending:
            await take_history_as_delivered(self._units, self._checkpoints, self._unreadable)
        return checkpoint

    def _delivery(
        self, consumers: list[AfterRolling], checkpoint: GroupCheckpoint
    ) -> tuple[DeliveryPipeline, ErasureDelivery]:
        """What delivers the group's slices and its erasures to ``consumers``, not started yet."""
        pipeline = DeliveryPipeline(
            self._checkpoints,
            self._units,
            self._dead_letters,
            consumers,
            max_attempts=self._max_attempts,
            backoff=self._backoff,
            max_pending=self._max_pending,
            consume_timeout=self._consume_timeout,
            last_delivered_slice_at=checkpoint.last_delivered_slice_at,
            concurrency=self._concurrency_of,
            observer=self._observer,
        )
        erasures = ErasureDelivery(
            self._database,
            self._checkpoints,
            self._dead_letters,
            consumers,
            delivering=pipeline.delivering,
            interval=self._poll_interval,
            max_attempts=self._max_attempts,
            backoff=self._backoff,
            consume_timeout=self._consume_timeout,
        )
        return pipeline, erasures

    async def stop(self, *, drain_timeout: float | None = None) -> bool:
        """Stop reading, let in-flight deliveries finish and save the checkpoint.

        Waits up to ``drain_timeout`` seconds (default: the constructor's). Returns False when deliveries
        were cut short: their checkpoint was not saved, so they are delivered again after a restart.
        """
        if self._task is None or self._pipeline is None:
            return True
        pipeline = self._pipeline
        deadline = time.monotonic() + (self._drain_timeout if drain_timeout is None else drain_timeout)
        self._stopping.set()
        self._term_over.set()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(self._task), max(deadline - time.monotonic(), 0))
        if not self._task.done():
            self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        drained = await pipeline.drain(max(deadline - time.monotonic(), 0))
        await pipeline.close()
        if self._sampler is not None:
            self._sampler.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sampler
            self._sampler = None
        with contextlib.suppress(Exception):  # unreachable: a standby takes over after lease_ttl instead
            await self._lease.release()
        self._set_active(False)
        if pipeline.last_delivered_slice_at is not None:
            with contextlib.suppress(Exception):
                await self._checkpoints.save_last_delivered(pipeline.last_delivered_slice_at)
        if drained:
            logger.info("listener group %r stopped; checkpoint saved", self._group)
        else:
            logger.warning(
                "listener group %r stopped with %d unfinished deliveries; they will be delivered "
                "again when the group restarts",
                self._group,
                pipeline.lag().pending,
            )
        self._task = None
        self._sources.polling = None
        pipeline.source = None
        return drained

    async def __aenter__(self) -> RollingListener:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()

    # -- monitoring and operations -------------------------------------------------------------------------

    def lag(self) -> ListenerLag:
        """How far behind the listener is (pending slices, the newest delivered slice's time)."""
        if self._pipeline is None:
            return ListenerLag(None, 0, {}, None, None, 0, 0)
        return self._pipeline.lag()

    async def flush(self) -> None:
        """Wait until what the source has found is delivered; when polling, run a full pass first.

        Under a change stream, writes whose events have not arrived yet are not waited for. Bound the wait
        with ``asyncio.timeout`` when a consumer may hang. A listener whose lease on the group lapsed while it
        flushed (it stalled past its ttl, and another listener holds the group now) raises
        :class:`~partner_repo.errors.GroupLeaseLost`; one stopped meanwhile returns. Never a
        ``CancelledError`` unless the flush itself was cancelled.
        """
        if self._pipeline is None:
            return
        pipeline = self._pipeline
        while self._active and not self._stopping.is_set():
            term = self._term_over
            await _first_of(self._sources.ready, term)  # a source follows the feed, or the term ended
            if not term.is_set():
                polling = self._sources.polling
                if polling is None:
                    break  # a change stream: what it found is in the pipeline
                try:
                    await polling.request_scan()
                    break
                except SourceStopped:
                    if not term.is_set():
                        continue  # the source failed and the group starts another: ask that one
            if self._stopping.is_set():
                return  # stopped by its owner meanwhile
            raise GroupLeaseLost(self._group)
        await pipeline.wait_idle()
        if self._active and self._erasures is not None:
            await self._erasures.catch_up()  # and every erasure logged so far

    async def dead_letters(self, consumer: str | None = None) -> list[DeadLetter]:
        """This group's dead letters (of one consumer, when given), oldest first."""
        return await self._dead_letters.list(group=self._group, consumer=consumer)

    async def replay_dead_letters(self, consumer: str | None = None) -> ReplayReport:
        """Deliver this group's dead letters again to the registered consumers; see
        :func:`partner_repo.listener.state._dead_letters.replay_dead_letters`."""
        return await replay_dead_letters(self._database, self._registry, group=self._group, consumer=consumer)

    # -- internals ---------------------------------------------------------------------------------------

    async def _run(self, pipeline: DeliveryPipeline, erasures: ErasureDelivery) -> None:
        """Hold the group's lease and run a source while holding it; stand by while another listener does."""
        use_stream = self._source_choice == "auto"
        while not self._stopping.is_set():
            if not self._active:
                pipeline.source = None
                try:
                    if not await self._lease.acquire(self._stopping):
                        return
                except Exception as exc:  # the database is unreachable: keep trying, never give up silently
                    logger.warning(
                        "listener group %r: cannot reach the group lease (%s)", self._group, describe(exc)
                    )
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._stopping.wait(), self._lease.period)
                    continue
                pipeline.forget_progress()  # the other holder delivered meanwhile: re-read the checkpoints
                self._set_active(True)
            self._term_over = asyncio.Event()
            if self._stopping.is_set():
                self._term_over.set()
            self._sources.ready.clear()
            keeper = asyncio.create_task(self._lease.keep(self._term_over), name=f"lease:{self._group}")
            erased = asyncio.create_task(erasures.run(self._term_over), name=f"erasures:{self._group}")
            try:
                use_stream = await self._sources.run(pipeline, self._term_over, use_stream)
            finally:
                for task in (keeper, erased):
                    task.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await task
                self._sources.polling = None
            self._set_active(False)

    def _set_active(self, active: bool) -> None:
        if active != self._active:
            self._active = active
            self._watch.lease_changed(self._group, active)

    def _vitals(self) -> dict[str, Any]:
        """What each heartbeat stores for ``partner-repo listener status``."""
        pipeline, polling = self._pipeline, self._sources.polling
        vitals: dict[str, Any] = {
            "source": None if pipeline is None else pipeline.source,
            "consumers": [{"name": n, "concurrency": c} for n, c in self._concurrency_of.items()],
            "polled_at": None if polling is None else polling.position_at,
        }
        if pipeline is not None:
            lag = pipeline.lag()
            vitals["last_delivered_at"] = lag.last_delivered_at
            vitals["last_delivered_slice_at"] = lag.last_delivered_slice_at
        return vitals

    async def _sample(self, pipeline: DeliveryPipeline) -> None:
        while True:
            self._watch.sampled(self._group, pipeline.lag())
            await asyncio.sleep(SAMPLE_INTERVAL)


async def _first_of(*events: asyncio.Event) -> None:
    """Wait until one of ``events`` is set."""
    waiters = [asyncio.ensure_future(event.wait()) for event in events]
    try:
        await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()


__all__ = ["RollingListener"]
