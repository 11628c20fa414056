"""Parallel delivery: up to N slices of different units in flight per consumer, every guarantee kept.

Slices of one unit still go one at a time in slice order; commits (resume tokens, fingerprints) never run
ahead of a slice offered before them, however deliveries finish; retries and dead letters stay per slice; a
consumer's own ``concurrency`` wins over the listener's; ``max_pending`` still bounds what is held.
"""

from __future__ import annotations

import asyncio
import random
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import pytest

from partner_repo import InvalidInput, ListenerCheckpoints, MemorySlice, MemoryUnitRepository, RollingResult
from partner_repo.listener.delivery import DeliveryPipeline
from partner_repo.listener.state import DeadLetterRepository
from tests.conftest import until
from tests.unit.listener.support import QUICK, Recorder, append, quick_listener, registry_of


@dataclass
class Tracker:
    """A consumer that notes when each delivery starts and ends, and can be held per slice."""

    name: str = "tracker"
    concurrency: int | None = None
    pause: float = 0.0
    jitter: bool = False
    holds: dict[str, asyncio.Event] = field(default_factory=dict)
    fail_slices: set[str] = field(default_factory=set)
    busy: set[str] = field(default_factory=set)
    busy_units: list[str] = field(default_factory=list)
    most_at_once: int = 0
    overlaps: list[str] = field(default_factory=list)
    finished: list[tuple[str, str]] = field(default_factory=list)  # (unit id, slice id) in finishing order

    async def consume(self, result: RollingResult) -> None:
        unit_id = result.memory_unit.id
        if unit_id in self.busy_units:
            self.overlaps.append(unit_id)
        self.busy.add(result.slice_id)
        self.busy_units.append(unit_id)
        self.most_at_once = max(self.most_at_once, len(self.busy))
        try:
            hold = self.holds.get(result.slice_id)
            if hold is not None:
                await hold.wait()
            await asyncio.sleep(self.pause * (random.random() if self.jitter else 1.0))
            if result.slice_id in self.fail_slices:
                raise RuntimeError(f"cannot take {result.slice_id}")
            self.finished.append((unit_id, result.slice_id))
        finally:
            self.busy.discard(result.slice_id)
            self.busy_units.remove(unit_id)

    def order_of(self, unit_id: str) -> list[str]:
        return [slice_id for unit, slice_id in self.finished if unit == unit_id]


def ids(pieces: list[MemorySlice]) -> list[str]:
    return [p.id or "" for p in pieces]


async def stored(units: MemoryUnitRepository, unit_count: int, per_unit: int) -> dict[str, list[str]]:
    """``per_unit`` slices appended to each of ``unit_count`` units; unit id -> slice ids in append order."""
    appended: dict[str, list[str]] = defaultdict(list)
    for number in range(unit_count * per_unit):
        unit_id = f"u{number % unit_count:02d}"
        appended[unit_id].append((await append(units, unit_id, minutes=number)).id or "")
    return appended


# -- parallel, and still in order ------------------------------------------------------------------------


async def test_a_consumer_is_handed_up_to_n_slices_of_different_units_at_once(memory_db: Any) -> None:
    units = MemoryUnitRepository(memory_db)
    await stored(units, unit_count=12, per_unit=1)
    tracker = Tracker(pause=0.05)

    async with quick_listener(memory_db, registry_of(tracker), concurrency=4) as listener:
        await listener.flush()

    assert tracker.most_at_once == 4
    assert len(tracker.finished) == 12


async def test_the_default_hands_a_consumer_one_slice_at_a_time(memory_db: Any) -> None:
    units = MemoryUnitRepository(memory_db)
    await stored(units, unit_count=6, per_unit=1)
    tracker = Tracker(pause=0.01)

    async with quick_listener(memory_db, registry_of(tracker)) as listener:
        await listener.flush()

    assert tracker.most_at_once == 1
    assert len(tracker.finished) == 6


async def test_one_at_a_time_keeps_the_offer_order_across_units(memory_db: Any) -> None:
    units = MemoryUnitRepository(memory_db)
    a1, a2, b1, a3 = [await append(units, unit) for unit in ("a", "a", "b", "a")]
    hold = asyncio.Event()
    tracker = Tracker(holds={a1.id or "": hold})  # everything is offered while a1 is being consumed
    pipeline = pipeline_for(memory_db, units, tracker)
    pipeline.start()
    try:
        await pipeline.offer("a", "core", [a1, a2])
        await pipeline.offer("b", "core", [b1])
        await pipeline.offer("a", "core", [a3])
        hold.set()
        await pipeline.wait_idle()
    finally:
        await pipeline.close()

    assert [slice_id for _, slice_id in tracker.finished] == ids([a1, a2, b1, a3])


async def test_slices_of_one_unit_never_overlap_and_arrive_in_slice_order(memory_db: Any) -> None:
    units = MemoryUnitRepository(memory_db)
    appended = await stored(units, unit_count=5, per_unit=6)
    tracker = Tracker(pause=0.004, jitter=True)

    async with quick_listener(memory_db, registry_of(tracker), concurrency=16) as listener:
        await listener.flush()

    assert tracker.overlaps == []
    assert tracker.most_at_once == 5  # one per unit, never two of one unit
    for unit_id, slice_ids in appended.items():
        assert tracker.order_of(unit_id) == slice_ids


async def test_a_slow_slice_holds_back_only_its_own_unit(memory_db: Any) -> None:
    units = MemoryUnitRepository(memory_db)
    slow = await append(units, "a", minutes=0)
    after_slow = await append(units, "a", minutes=1)
    others = [await append(units, "b", minutes=2 + n) for n in range(3)]
    hold = asyncio.Event()
    tracker = Tracker(holds={slow.id or "": hold})

    async with quick_listener(memory_db, registry_of(tracker), concurrency=2) as listener:
        await until(lambda: len(tracker.finished) == 3)
        assert tracker.order_of("b") == ids(others)
        assert tracker.order_of("a") == []
        hold.set()
        await listener.flush()

    assert tracker.order_of("a") == ids([slow, after_slow])


async def test_a_consumers_own_concurrency_wins_over_the_listeners(memory_db: Any) -> None:
    units = MemoryUnitRepository(memory_db)
    await stored(units, unit_count=8, per_unit=1)
    careful, eager = Tracker("careful", concurrency=1, pause=0.02), Tracker("eager", pause=0.02)

    async with quick_listener(memory_db, registry_of(careful, eager), concurrency=8) as listener:
        await listener.flush()

    assert careful.most_at_once == 1 and eager.most_at_once == 8
    assert len(careful.finished) == len(eager.finished) == 8


# -- commits never pass an undelivered slice ---------------------------------------------------------------


async def test_a_commit_after_a_slow_slice_waits_for_it_though_later_deliveries_finished(
    memory_db: Any,
) -> None:
    units = MemoryUnitRepository(memory_db)
    slow = await append(units, "a")
    fast = [await append(units, "b") for _ in range(3)]
    hold = asyncio.Event()
    tracker = Tracker(holds={slow.id or "": hold})
    committed: list[str] = []

    def commit(name: str) -> Any:
        async def save() -> None:
            committed.append(name)

        return save

    pipeline = pipeline_for(memory_db, units, tracker, concurrency={"tracker": 4})
    pipeline.start()
    try:
        await pipeline.offer("a", "core", [slow], on_commit=commit("token after a"))
        await pipeline.offer("b", "core", fast, on_commit=commit("token after b"))
        await until(lambda: len(tracker.finished) == 3)
        await asyncio.sleep(0.05)
        assert committed == []  # b is delivered, but the token after b would skip a slow slice on a crash
        hold.set()
        await pipeline.wait_idle()
    finally:
        await pipeline.close()

    assert committed == ["token after a", "token after b"]


async def test_a_crash_while_a_slow_slice_is_in_flight_delivers_it_again_at_the_restart(
    memory_db: Any,
) -> None:
    units = MemoryUnitRepository(memory_db)
    slow = await append(units, "a")
    fast = [await append(units, "b") for _ in range(3)]
    tracker = Tracker(holds={slow.id or "": asyncio.Event()})  # never released: the process "dies"
    listener = quick_listener(memory_db, registry_of(tracker), concurrency=4)
    await listener.start()
    await until(lambda: len(tracker.finished) == 3)
    assert not await listener.stop(drain_timeout=0)

    again = Recorder("tracker")
    async with quick_listener(memory_db, registry_of(again), concurrency=4) as restarted:
        await restarted.flush()

    assert again.slice_ids == [slow.id]  # the slow slice, and none of those delivered before the crash
    assert tracker.order_of("b") == ids(fast)


# -- failures stay per slice, per consumer ------------------------------------------------------------------


async def test_a_failing_slice_is_retried_then_dead_lettered_while_other_units_flow(memory_db: Any) -> None:
    units = MemoryUnitRepository(memory_db)
    bad = await append(units, "a")
    after_bad = await append(units, "a")
    others = [await append(units, "b") for _ in range(3)]
    tracker = Tracker(fail_slices={bad.id or ""})

    async with quick_listener(memory_db, registry_of(tracker), concurrency=4, max_attempts=3) as listener:
        await listener.flush()
        letters = await listener.dead_letters()

    assert [(letter.slice_id, letter.attempts) for letter in letters] == [(bad.id, 3)]
    assert tracker.order_of("a") == [after_bad.id]  # after the dead letter, in order
    assert tracker.order_of("b") == ids(others)


async def test_a_stuck_consumer_does_not_delay_a_parallel_one(memory_db: Any) -> None:
    units = MemoryUnitRepository(memory_db)
    appended = await stored(units, unit_count=4, per_unit=2)
    stuck = Recorder("stuck", gate=asyncio.Event())
    parallel = Tracker("parallel", pause=0.01)

    async with quick_listener(memory_db, registry_of(stuck, parallel), concurrency=4):
        await until(lambda: len(parallel.finished) == 8)
        assert stuck.results == []
        assert stuck.gate is not None
        stuck.gate.set()

    for unit_id, slice_ids in appended.items():
        assert parallel.order_of(unit_id) == slice_ids


# -- bounded memory -----------------------------------------------------------------------------------------


async def test_max_pending_still_bounds_what_is_held_with_many_in_flight(memory_db: Any) -> None:
    units = MemoryUnitRepository(memory_db)
    appended = await stored(units, unit_count=20, per_unit=2)
    tracker = Tracker(pause=0.01)
    most_pending = 0

    async with quick_listener(memory_db, registry_of(tracker), concurrency=8, max_pending=5) as listener:
        while len(tracker.finished) < 40:
            most_pending = max(most_pending, listener.lag().pending)
            await asyncio.sleep(0.001)
        await listener.flush()

    assert most_pending == 5 and 1 < tracker.most_at_once <= 5
    for unit_id, slice_ids in appended.items():
        assert tracker.order_of(unit_id) == slice_ids


async def test_lag_counts_the_slices_each_consumer_has_in_flight(memory_db: Any) -> None:
    units = MemoryUnitRepository(memory_db)
    pieces = [await append(units, f"u{n}") for n in range(3)]
    holds = {p.id or "": asyncio.Event() for p in pieces}
    tracker = Tracker(holds=holds)

    async with quick_listener(memory_db, registry_of(tracker), concurrency=8) as listener:
        await until(lambda: listener.lag().in_flight_by_consumer == {"tracker": 3})
        lag = listener.lag()
        for hold in holds.values():
            hold.set()

    assert lag.pending_by_consumer == {"tracker": 3}
    assert lag.oldest_pending_by_consumer == {"tracker": pieces[0].created_at}


# -- bad input ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("concurrency", [0, -1, True, 2.0, "8", 100_000])
def test_a_bad_concurrency_is_refused(memory_db: Any, concurrency: Any) -> None:
    with pytest.raises(InvalidInput, match="concurrency"):
        quick_listener(memory_db, registry_of(Recorder()), concurrency=concurrency)


async def test_a_consumer_declaring_a_bad_concurrency_is_refused_at_start(memory_db: Any) -> None:
    listener = quick_listener(memory_db, registry_of(Tracker(concurrency=0)))

    with pytest.raises(InvalidInput, match="concurrency of consumer 'tracker'"):
        await listener.start()
    assert not listener.running


def pipeline_for(database: Any, units: MemoryUnitRepository, *consumers: Any, **options: Any) -> Any:
    return DeliveryPipeline(
        ListenerCheckpoints(database, "default"),
        units,
        DeadLetterRepository(database),
        list(consumers),
        max_attempts=2,
        backoff=QUICK,
        max_pending=100,
        **options,
    )
