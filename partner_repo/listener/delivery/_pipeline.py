"""DeliveryPipeline: one way from "these slices of this unit exist" to every consumer, whatever the source.

Sources (the change stream, polling, a catch-up scan) *offer* a unit's slices together with a *commit*: the
checkpoint step (a resume token, a unit fingerprint) that may be saved once those slices are delivered. The
pipeline:

- drops the slices the group already delivered or is delivering (per-unit slice-id sets, see
  :mod:`partner_repo.listener.state._checkpoints`), so an event seen twice, or by two sources, is delivered
  once;
- hands the rest, in slice order (interval order: the order the appends happened, whatever the clocks said),
  to each consumer's :class:`UnitLanes`: per unit one slice at a time, in that order, and up to the consumer's
  concurrency units at once, with workers of its own, so a consumer's retries and backoff only ever delay
  that consumer (and, within it, that unit);
- retries a failing consumer with backoff, then writes a dead letter and lets the consumer move on;
- records per consumer what it finished, and per unit what every consumer finished;
- runs the commits strictly in the order they were offered, each only after every delivery offered before it
  is finished (:class:`OrderedCommits`): a saved resume token or fingerprint never runs ahead of an
  undelivered slice, however many deliveries run at once. A crash therefore re-delivers at most
  the unfinished tail (at least once), and a restart after a commit delivers none of it again.

Lanes: each unit has a *lane* per consumer, its deliveries in the order they were offered (slice order). A
lane is either waiting (in a heap keyed by the offer number of its first delivery) or held by exactly one
worker, which delivers that one delivery and puts the lane back if more wait in it. So two deliveries of one
unit never overlap in a consumer and are never reordered, while up to ``concurrency`` workers deliver
different units at once. The oldest offered delivery of a unit no worker holds always goes first: with
``concurrency=1`` that is the plain offer order, one at a time, and a lane that stays busy (a slow or retried
slice) never starves others.

Commits: a *commit* (a resume token, a unit fingerprint) belongs to one offer: it is *ready* once the offer
is sealed (every delivery it started is counted) and none of those deliveries is outstanding. The commits run
from the oldest: one that is ready waits for every older one, so however deliveries finish (several
consumers, several units at once, a slow slice, retries), a saved position never runs ahead of an undelivered
slice offered before it. Of two ready commits in a row with the same key, only the newer runs (only the
newest resume token needs saving).
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Generic, Protocol, TypeVar

from partner_repo.clock import utc_now
from partner_repo.errors import UnreadableUnit
from partner_repo.events import RollingResult
from partner_repo.listener.delivery._attempts import ConsumerAttempts, retry_storage
from partner_repo.listener.delivery._registry import AfterRolling, consumer_calls
from partner_repo.listener.delivery._results import load_result
from partner_repo.listener.delivery._retry import Backoff
from partner_repo.listener.observing import GuardedObserver, ListenerObserver, Outcome
from partner_repo.listener.state import (
    CommitAction,
    DeadLetterRepository,
    DeliveryKey,
    ListenerCheckpoints,
    ListenerLag,
    UnitProgress,
    in_slice_order,
)
from partner_repo.models import MemorySlice
from partner_repo.mongo import library_logger
from partner_repo.units import MemoryUnitRepository


class _InUnit(Protocol):
    @property
    def unit_id(self) -> str: ...


D = TypeVar("D", bound=_InUnit)


class UnitLanes(Generic[D]):
    """Deliveries of one consumer, handled by ``concurrency`` workers; see the module docstring."""

    def __init__(self, name: str, concurrency: int, handle: Callable[[D], Awaitable[None]]) -> None:
        self.name = name
        self.concurrency = concurrency
        self._handle = handle
        self._lanes: dict[str, deque[tuple[int, D]]] = {}
        self._waiting: list[tuple[int, str]] = []  # (offer number of the lane's first delivery, unit id)
        self._available = asyncio.Semaphore(0)  # its value is len(self._waiting)
        self._numbers = itertools.count()
        self._tasks: list[asyncio.Task[None]] = []
        self.busy = 0
        """Deliveries being handled right now (at most ``concurrency``)."""

    def start(self) -> None:
        for number in range(self.concurrency):
            self._tasks.append(asyncio.create_task(self._work(), name=f"consume:{self.name}:{number}"))

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks.clear()

    def put(self, delivery: D) -> None:
        """Queue ``delivery`` behind the unit's earlier ones (never waits)."""
        entry = (next(self._numbers), delivery)
        lane = self._lanes.get(delivery.unit_id)
        if lane is not None:
            lane.append(entry)
            return
        self._lanes[delivery.unit_id] = deque([entry])
        self._wait(entry[0], delivery.unit_id)

    def _wait(self, number: int, unit_id: str) -> None:
        heapq.heappush(self._waiting, (number, unit_id))
        self._available.release()

    async def _work(self) -> None:
        while True:
            await self._available.acquire()
            _, unit_id = heapq.heappop(self._waiting)
            lane = self._lanes[unit_id]
            self.busy += 1
            try:
                await self._handle(lane[0][1])
            finally:
                self.busy -= 1
                lane.popleft()
                if lane:
                    self._wait(lane[0][0], unit_id)
                else:
                    del self._lanes[unit_id]


@dataclass(eq=False)
class Commit:
    action: CommitAction | None
    key: object = None
    outstanding: int = 0
    sealed: bool = False

    @property
    def ready(self) -> bool:
        return self.sealed and self.outstanding == 0


class OrderedCommits:
    """The queue of commits; :meth:`run` saves them in order (see the module docstring)."""

    def __init__(self) -> None:
        self._commits: deque[Commit] = deque()
        self._wake = asyncio.Event()

    def add(self, action: CommitAction | None, key: object = None, *, sealed: bool = False) -> Commit:
        commit = Commit(action=action, key=key, sealed=sealed)
        self._commits.append(commit)
        if sealed:
            self._wake.set()
        return commit

    def seal(self, commit: Commit) -> None:
        commit.sealed = True
        self._wake.set()

    def finished_one(self, commit: Commit) -> None:
        """One of ``commit``'s deliveries is finished."""
        commit.outstanding -= 1
        self._wake.set()

    def __len__(self) -> int:
        return len(self._commits)

    async def run(self, after: Callable[[], None]) -> None:
        """Save ready commits in order, for ever; ``after()`` once each round of saves is done."""
        commits = self._commits
        while True:
            await self._wake.wait()
            self._wake.clear()
            while commits and commits[0].ready:
                commit = commits[0]
                superseded = (
                    len(commits) > 1
                    and commit.key is not None
                    and commits[1].ready
                    and commits[1].key == commit.key
                )
                if commit.action is not None and not superseded:
                    await retry_storage("checkpoint", commit.action)
                commits.popleft()
            after()


logger = library_logger("partner_repo.listener")

PROGRESS_CACHE_UNITS = 4096
"""Per-unit progress kept in memory; older entries are re-read from the checkpoints when needed."""


@dataclass(eq=False)
class _Delivery:
    unit_id: str
    piece: MemorySlice
    progress: UnitProgress
    pending: set[str]
    commit: Commit
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    loaded: bool = False
    result: RollingResult | None = None
    unreadable: UnreadableUnit | None = None

    @property
    def slice_id(self) -> str:
        assert self.piece.id is not None
        return self.piece.id

    @property
    def key(self) -> DeliveryKey:
        """The slice at its revision: a replaced summary is a delivery of its own."""
        return self.slice_id, self.piece.revision


class DeliveryPipeline:
    """Delivers offered slices to every consumer; see the module docstring."""

    def __init__(
        self,
        checkpoints: ListenerCheckpoints,
        units: MemoryUnitRepository,
        dead_letters: DeadLetterRepository,
        consumers: list[AfterRolling],
        *,
        max_attempts: int,
        backoff: Backoff,
        max_pending: int,
        consume_timeout: float | None = None,
        last_delivered_slice_at: datetime | None = None,
        concurrency: Mapping[str, int] | None = None,
        observer: ListenerObserver | None = None,
    ) -> None:
        self._checkpoints = checkpoints
        self._units = units
        self._group = checkpoints.group_name
        self._observer = GuardedObserver(observer)
        self._attempts = ConsumerAttempts(
            dead_letters,
            self._group,
            max_attempts=max_attempts,
            backoff=backoff,
            consume_timeout=consume_timeout,
            observer=self._observer,
        )
        self._consumers = list(consumers)
        self._consume = {c.name: consumer_calls(c).consume for c in consumers}  # sync or async, decided once
        self._max_pending = max_pending
        self._lanes: dict[str, UnitLanes[_Delivery]] = {
            c.name: UnitLanes(c.name, (concurrency or {}).get(c.name, 1), self._handler(c)) for c in consumers
        }
        self._in_flight: dict[tuple[str, DeliveryKey], _Delivery] = {}
        """By unit and delivery: a slice id is a delivery's identity only within its unit."""
        self._progress: OrderedDict[str, UnitProgress] = OrderedDict()
        self._commits = OrderedCommits()
        self._capacity = asyncio.Condition()
        self._idle = asyncio.Event()
        self._idle.set()
        self._tasks: list[asyncio.Task[None]] = []
        self._completions: set[asyncio.Task[None]] = set()
        self._last_slice_at = last_delivered_slice_at
        self._last_delivered_at: datetime | None = None
        self._delivered = 0
        self._dead_lettered = 0
        self.source: str | None = None

    # -- lifecycle ---------------------------------------------------------------------------------------

    def start(self) -> None:
        for lanes in self._lanes.values():
            lanes.start()
        self._tasks.append(asyncio.create_task(self._commits.run(self._check_idle), name="commit"))

    async def drain(self, seconds: float | None) -> bool:
        """Wait until everything offered is delivered and committed; False when ``seconds`` ran out first."""
        try:
            await asyncio.wait_for(self._idle.wait(), seconds)
        except TimeoutError:
            return False
        return True

    async def close(self) -> None:
        """Stop the consumer and commit tasks (an unfinished delivery is simply not checkpointed)."""
        tasks = [*self._tasks, *self._completions]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks.clear()
        for lanes in self._lanes.values():
            await lanes.close()

    @property
    def idle(self) -> bool:
        return self._idle.is_set()

    async def wait_idle(self) -> None:
        await self._idle.wait()

    @property
    def last_delivered_slice_at(self) -> datetime | None:
        return self._last_slice_at

    def lag(self) -> ListenerLag:
        by_consumer = {c.name: 0 for c in self._consumers}
        oldest: dict[str, datetime | None] = dict.fromkeys(by_consumer)
        for delivery in self._in_flight.values():
            created = delivery.piece.created_at
            for name in delivery.pending:
                by_consumer[name] = by_consumer.get(name, 0) + 1
                seen = oldest.get(name)
                if created is not None and (seen is None or created < seen):
                    oldest[name] = created
        return ListenerLag(
            source=self.source,
            pending=len(self._in_flight),
            pending_by_consumer=by_consumer,
            last_delivered_slice_at=self._last_slice_at,
            last_delivered_at=self._last_delivered_at,
            delivered=self._delivered,
            dead_lettered=self._dead_lettered,
            in_flight_by_consumer={name: lanes.busy for name, lanes in self._lanes.items()},
            oldest_pending_by_consumer=oldest,
        )

    # -- offering ----------------------------------------------------------------------------------------

    async def progress(self, unit_id: str) -> UnitProgress:
        """The group's progress on a unit, from memory or the checkpoints."""
        progress = self._progress.get(unit_id)
        if progress is None:
            progress = await self._checkpoints.unit(unit_id)
            self._progress[unit_id] = progress
            while len(self._progress) > PROGRESS_CACHE_UNITS and self._evict_one():
                pass
        else:
            self._progress.move_to_end(unit_id)
        return progress

    def delivering(self, unit_ids: Iterable[str]) -> bool:
        """Whether a slice of any of ``unit_ids`` is still being delivered (an erasure waits for these)."""
        wanted = set(unit_ids)
        return any(unit_id in wanted for unit_id, _ in self._in_flight)

    def forget_progress(self) -> None:
        """Drop the cached progress of units with nothing in flight (another listener may have moved it)."""
        busy = {d.unit_id for d in self._in_flight.values()}
        for unit_id in [u for u in self._progress if u not in busy]:
            del self._progress[unit_id]

    async def offer(
        self,
        unit_id: str,
        core_id: str | None,
        slices: Iterable[MemorySlice],
        *,
        on_commit: CommitAction | None = None,
        commit_key: object = None,
    ) -> int:
        """Deliver the slices of ``unit_id`` not delivered yet, in slice order; then ``on_commit``.

        Returns how many deliveries were started. Waits while ``max_pending`` slices are in flight. A commit
        with a ``commit_key`` is skipped when a later commit with the same key is ready with it (only the
        newest resume token needs saving).
        """
        progress = await self.progress(unit_id)
        if core_id is not None:
            progress.core_id = core_id
        fresh = [
            piece
            for piece in in_slice_order(slices)
            if piece.id is not None
            and not progress.has_delivered(key := (piece.id, piece.revision))
            and (unit_id, key) not in self._in_flight
        ]
        commit = self._commits.add(on_commit, commit_key)
        self._idle.clear()
        started = 0
        try:
            for piece in fresh:
                await self._wait_for_capacity()
                assert piece.id is not None
                key = (piece.id, piece.revision)
                if (unit_id, key) in self._in_flight or progress.has_delivered(key):
                    continue
                pending = {c.name for c in self._consumers} - progress.done_by(key)
                delivery = _Delivery(unit_id, piece, progress, pending, commit)
                commit.outstanding += 1
                started += 1
                self._in_flight[unit_id, key] = delivery
                if not pending:  # every consumer finished it before a crash: only the record is missing
                    task = asyncio.create_task(self._complete(delivery))
                    self._completions.add(task)
                    task.add_done_callback(self._completions.discard)
                    continue
                for consumer in self._consumers:
                    if consumer.name in pending:
                        self._lanes[consumer.name].put(delivery)
        finally:
            self._commits.seal(commit)
        return started

    async def barrier(self, on_commit: CommitAction, *, commit_key: object = None) -> None:
        """Run ``on_commit`` once everything offered so far is delivered (an idle stream's token)."""
        self._idle.clear()
        self._commits.add(on_commit, commit_key, sealed=True)

    async def _wait_for_capacity(self) -> None:
        async with self._capacity:
            await self._capacity.wait_for(lambda: len(self._in_flight) < self._max_pending)

    # -- consumers ---------------------------------------------------------------------------------------

    def _handler(self, consumer: AfterRolling) -> Callable[[_Delivery], Awaitable[None]]:
        async def handle(delivery: _Delivery) -> None:
            try:
                await self._deliver(consumer, delivery)
            except asyncio.CancelledError:
                raise
            except Exception:  # a bug here must not silently stop this consumer's deliveries
                logger.exception(
                    "listener: internal error delivering slice %s to consumer %r",
                    delivery.slice_id,
                    consumer.name,
                )

        return handle

    async def _deliver(self, consumer: AfterRolling, delivery: _Delivery) -> None:
        self._observer.delivery_started(self._group, consumer.name, delivery.slice_id)
        outcome: Outcome = "skipped"
        try:
            result = await self._result(delivery)
            if result is not None:
                delivered = await self._attempts.deliver(
                    consumer, self._consume[consumer.name], delivery.unit_id, delivery.slice_id, result
                )
                outcome = "delivered" if delivered else "dead_lettered"
            elif delivery.unreadable is not None:  # no attempt could succeed: visible, replayable
                core_id, key = delivery.progress.core_id or "", delivery.key
                await self._attempts.dead_letter(
                    consumer, delivery.unit_id, core_id, key, delivery.unreadable, attempts=0
                )
                outcome = "dead_lettered"
            if outcome == "dead_lettered":
                self._dead_lettered += 1
            elif outcome == "delivered":
                self._delivered += 1
            await self._consumer_done(consumer.name, delivery)
        finally:
            self._observer.delivery_finished(self._group, consumer.name, delivery.slice_id, outcome)

    async def _result(self, delivery: _Delivery) -> RollingResult | None:
        async with delivery.lock:
            if not delivery.loaded:
                try:
                    delivery.result = await retry_storage(
                        f"loading slice {delivery.slice_id}",
                        lambda: load_result(
                            self._units, delivery.unit_id, delivery.progress.core_id, delivery.piece
                        ),
                    )
                except UnreadableUnit as exc:
                    delivery.unreadable, delivery.loaded = exc, True
                    logger.warning(
                        "listener: slice %s cannot be delivered (%s); a dead letter is written for each "
                        "consumer, to replay once the unit is repaired",
                        delivery.slice_id,
                        exc,
                    )
                    return None
                delivery.loaded = True
                if delivery.result is None:
                    logger.warning(
                        "listener: slice %s of unit %s is gone (unit deleted or rewritten); skipped",
                        delivery.slice_id,
                        delivery.unit_id,
                    )
                elif delivery.progress.core_id is None:
                    delivery.progress.core_id = delivery.result.memory_unit.core_id
            return delivery.result

    async def _consumer_done(self, name: str, delivery: _Delivery) -> None:
        core_id = delivery.progress.core_id or ""
        if delivery.pending - {name}:
            await retry_storage(
                f"progress of consumer {name!r}",
                lambda: self._checkpoints.mark_consumer_done(
                    delivery.unit_id, core_id, delivery.slice_id, name, delivery.piece.revision
                ),
            )
            delivery.progress.partial.setdefault(delivery.key, set()).add(name)
        delivery.pending.discard(name)
        if not delivery.pending:
            await self._complete(delivery)

    async def _complete(self, delivery: _Delivery) -> None:
        core_id = delivery.progress.core_id or ""
        await retry_storage(
            f"delivery of slice {delivery.slice_id}",
            lambda: self._checkpoints.mark_delivered(
                delivery.unit_id, core_id, delivery.slice_id, delivery.piece.revision
            ),
        )
        delivery.progress.record_delivered(delivery.key)
        delivery.progress.partial.pop(delivery.key, None)
        self._in_flight.pop((delivery.unit_id, delivery.key), None)
        delivery.result = None
        created = delivery.piece.created_at
        if created is not None and (self._last_slice_at is None or created > self._last_slice_at):
            self._last_slice_at = created
        self._last_delivered_at = utc_now()
        self._commits.finished_one(delivery.commit)
        async with self._capacity:
            self._capacity.notify_all()

    def _check_idle(self) -> None:
        if not self._commits and not self._in_flight:
            self._idle.set()

    def _evict_one(self) -> bool:
        busy = {d.unit_id for d in self._in_flight.values()}
        for unit_id in self._progress:
            if unit_id not in busy:
                del self._progress[unit_id]
                return True
        return False


__all__: list[str] = []  # internal to the listener: nothing here is public API
