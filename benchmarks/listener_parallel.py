"""Section 3, parallel delivery: a consumer that takes 50 ms per slice (an embedding call, an index write), at
several concurrencies, on a server; in memory, what it delivers is checked, never timed.

On the server (``--uri``, ``MONGODB_URI``, or the SecantusDB ``python -m benchmarks`` starts), the sizes below
divided by the scale's ``share`` (10 at the full scale: 200 slices over 20 units, 100 live):

- Throughput: 2,000 slices already stored over 200 units (10 each), delivered by a new listener group (a
  backfill) at concurrency 1, 8, 32 and 128: slices per second from ``start()`` to the last ``consume``
  finished, and the ratio to concurrency 1 (target: >= 20x at 32; one at a time, 50 ms caps it at 20/s).
  The listener polls at its default interval (1 s) where it polls: the first pass finds the whole backfill.
- Latency: slices appended at a steady 100 per second over the 200 units while a listener with concurrency
  32 runs; for each, the time from the append's call to the consumer's call (from the call, not the
  return: a change event may reach the listener before the append's reply reaches the writer).

In memory (``--no-server``): the backfill at the largest concurrency, checked and counted only.

Every run checks what the listener promises, and fails its row otherwise: each slice delivered exactly once,
each unit's slices in append order, and never two slices of one unit in the consumer at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import Counter, defaultdict
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any

from benchmarks.backends import describe, memory_database, mongodb_uri, motor_database
from benchmarks.common import Row, Scale, SectionResult, divided, percentile
from benchmarks.workload import conversation
from partner_repo import MemoryUnitRepository
from partner_repo.events import RollingResult
from partner_repo.listener import AfterRollingRegistry, RollingListener

TITLE = "3. Listener parallel delivery (consumer taking 50 ms a slice)"
TARGET_CONCURRENCY = 32
TARGET_RATIO = 20.0
DELIVERY_TIMEOUT_S = 600.0
CHECK = "each slice once, in unit order"


class SlowConsumer:
    """Sleeps ``seconds`` per slice; notes each call, and any overlap of two slices of one unit."""

    name = "benchmark-slow"

    def __init__(self, seconds: float, expected: int) -> None:
        self.seconds = seconds
        self.expected = expected
        self.calls: list[tuple[str, str]] = []  # (unit id, slice id) in call order
        self.started: dict[str, float] = {}
        self.last_end = 0.0
        self.busy_units: set[str] = set()
        self.overlaps = 0
        self.finished = 0
        self.everything = asyncio.Event()

    async def consume(self, result: RollingResult) -> None:
        unit_id = result.memory_unit.id
        self.started.setdefault(result.slice_id, time.perf_counter())
        self.overlaps += unit_id in self.busy_units
        self.busy_units.add(unit_id)
        try:
            await asyncio.sleep(self.seconds)
        finally:
            self.busy_units.discard(unit_id)
        self.calls.append((unit_id, result.slice_id))
        self.last_end = time.perf_counter()
        self.finished += 1
        if self.finished >= self.expected:
            self.everything.set()


def verified(consumer: SlowConsumer, appended: dict[str, list[str]]) -> bool:
    """Every appended slice delivered exactly once, each unit's in append order, no overlap in a unit."""
    counts = Counter(slice_id for _, slice_id in consumer.calls)
    expected = {slice_id for slice_ids in appended.values() for slice_id in slice_ids}
    if set(counts) != expected or any(n != 1 for n in counts.values()) or consumer.overlaps:
        return False
    order: dict[str, list[str]] = defaultdict(list)
    for unit_id, slice_id in consumer.calls:
        order[unit_id].append(slice_id)
    return all(order[unit_id] == slice_ids for unit_id, slice_ids in appended.items())


async def run(scale: Scale) -> list[SectionResult]:
    uri = mongodb_uri()
    if uri is None:
        return [await _in_memory(scale)]
    scale = divided(scale)
    result = SectionResult(key="listener", title=TITLE, backend=describe("mongodb", uri))
    throughput = await _throughput(scale, lambda: motor_database(uri), scale.parallel_concurrencies)
    latency = await _latency(scale, lambda: motor_database(uri))
    result.rows.extend(_throughput_rows(scale, throughput))
    result.rows.append(_latency_row(scale, latency))
    result.raw = {"throughput": throughput, "latency": latency}
    result.notes.append(
        f"source: {latency['source']}; where it polls, every 1 s (the default) for the backfills and "
        f"every {scale.listener_poll_s * 1000:.0f} ms for the latency row; each row checks that every "
        "slice was delivered once, in unit order, never two of one unit at once"
    )
    return [result]


async def _in_memory(scale: Scale) -> SectionResult:
    """The backfill at the largest concurrency, on the embedded backend: delivered and checked, not timed."""
    concurrency = max(scale.parallel_concurrencies)
    figures = await _throughput(scale, memory_database, (concurrency,))
    run = figures["runs"][str(concurrency)]
    result = SectionResult(key="listener", title=TITLE, backend=describe("memory"))
    result.rows.append(
        Row(
            f"backfill of {figures['slices']:,} slices in {figures['units']} units, "
            f"concurrency {concurrency}",
            f"{run['delivered']:,}/{figures['slices']:,} delivered",
            CHECK,
            bool(run["verified"]),
        )
    )
    checked = {key: run[key] for key in ("concurrency", "delivered", "source", "verified")}
    sizes = {key: figures[key] for key in ("slices", "units", "consume_s")}
    result.raw = {"throughput": {**sizes, "runs": {str(concurrency): checked}}}
    result.notes.append(f"in memory: checked, not timed; {CHECK}, never two of one unit at once")
    return result


async def _seed(
    units: MemoryUnitRepository, scale: Scale, count: int
) -> AsyncIterator[tuple[str, str, float]]:
    """Append ``count`` slices round-robin over the units: (unit id, slice id, when the append was called)."""
    turn = [m.model_dump() for m in conversation(2, seed=11)]
    for number in range(count):
        unit_id = f"unit-{number % scale.parallel_units:04d}"
        called = time.perf_counter()
        piece = await units.append(unit_id, turn, f"slice {number}", core_id="bench-core")
        assert piece.id is not None
        yield unit_id, piece.id, called


def _listener(database: Any, consumer: SlowConsumer, **options: Any) -> RollingListener:
    return RollingListener(database, AfterRollingRegistry([consumer]), **options)


async def _throughput(
    scale: Scale, open_database: Callable[[], AbstractAsyncContextManager[Any]], concurrencies: Sequence[int]
) -> dict[str, Any]:
    runs: dict[str, Any] = {}
    for concurrency in concurrencies:
        async with open_database() as database:  # each run starts from the same state
            appended: dict[str, list[str]] = defaultdict(list)
            units = MemoryUnitRepository(database)
            async for unit_id, slice_id, _ in _seed(units, scale, scale.parallel_slices):
                appended[unit_id].append(slice_id)
            consumer = SlowConsumer(scale.parallel_consume_s, scale.parallel_slices)
            listener = _listener(database, consumer, group=f"bench-c{concurrency}", concurrency=concurrency)
            started = time.perf_counter()
            await listener.start()
            try:
                with contextlib.suppress(TimeoutError):  # reported below as not verified
                    await asyncio.wait_for(consumer.everything.wait(), DELIVERY_TIMEOUT_S)
                await asyncio.sleep(scale.listener_poll_s * 3)  # a duplicate would arrive by now...
                await listener.flush()  # ...or at this full pass
                source = listener.source
            finally:
                await listener.stop()
            seconds = consumer.last_end - started
            runs[str(concurrency)] = {
                "concurrency": concurrency,
                "seconds": seconds,
                "slices_per_s": consumer.finished / seconds if seconds > 0 else 0.0,
                "delivered": consumer.finished,
                "source": source,
                "verified": verified(consumer, appended),
            }
    return {
        "slices": scale.parallel_slices,
        "units": scale.parallel_units,
        "consume_s": scale.parallel_consume_s,
        "runs": runs,
    }


async def _latency(
    scale: Scale, open_database: Callable[[], AbstractAsyncContextManager[Any]]
) -> dict[str, Any]:
    count = scale.parallel_live_slices
    async with open_database() as database:
        consumer = SlowConsumer(scale.parallel_consume_s, count)
        listener = _listener(
            database,
            consumer,
            group="bench-live",
            start_from="now",
            concurrency=scale.parallel_live_concurrency,
            poll_interval=scale.listener_poll_s,
        )
        appended: dict[str, list[str]] = defaultdict(list)
        called: dict[str, float] = {}
        period = 1.0 / scale.parallel_live_rate_per_s
        await listener.start()
        try:
            begin = time.perf_counter()
            number = 0
            async for unit_id, slice_id, at in _seed(MemoryUnitRepository(database), scale, count):
                called[slice_id] = at
                appended[unit_id].append(slice_id)
                number += 1
                await asyncio.sleep(max(begin + number * period - time.perf_counter(), 0))
            achieved = count / (time.perf_counter() - begin)
            with contextlib.suppress(TimeoutError):  # reported below as not verified
                await asyncio.wait_for(consumer.everything.wait(), DELIVERY_TIMEOUT_S)
            await asyncio.sleep(scale.listener_poll_s * 3)
            await listener.flush()
            source = listener.source
        finally:
            await listener.stop()
    latencies = [(consumer.started[i] - t) * 1000 for i, t in called.items() if i in consumer.started]
    return {
        "slices": count,
        "delivered": consumer.finished,
        "rate_per_s": scale.parallel_live_rate_per_s,
        "achieved_rate_per_s": achieved,
        "concurrency": scale.parallel_live_concurrency,
        "source": source,
        "p50_ms": percentile(latencies, 0.5) if latencies else float("nan"),
        "p99_ms": percentile(latencies, 0.99) if latencies else float("nan"),
        "max_ms": max(latencies) if latencies else float("nan"),
        "verified": verified(consumer, appended),
    }


def _throughput_rows(scale: Scale, figures: dict[str, Any]) -> list[Row]:
    runs = figures["runs"]
    base = runs[str(scale.parallel_concurrencies[0])]["slices_per_s"]
    rows = []
    for key, run in runs.items():
        ratio = run["slices_per_s"] / base if base else 0.0
        run["ratio_to_first"] = ratio
        target, passed = CHECK, bool(run["verified"])
        if run["concurrency"] == TARGET_CONCURRENCY:
            target = f">= {TARGET_RATIO:.0f}x concurrency 1; {CHECK}"
            passed = passed and ratio >= TARGET_RATIO
        rows.append(
            Row(
                f"backfill of {figures['slices']:,} slices in {figures['units']} units, concurrency {key}",
                f"{run['slices_per_s']:,.1f} slices/s ({run['seconds']:,.1f} s); {ratio:,.1f}x concurrency "
                f"{scale.parallel_concurrencies[0]}",
                target,
                passed,
            )
        )
    return rows


def _latency_row(scale: Scale, figures: dict[str, Any]) -> Row:
    return Row(
        f"append-to-consume latency at {figures['rate_per_s']:,.0f} slices/s, concurrency "
        f"{figures['concurrency']} (achieved {figures['achieved_rate_per_s']:,.0f}/s)",
        f"p50 {figures['p50_ms']:,.1f} ms, p99 {figures['p99_ms']:,.1f} ms "
        f"({figures['delivered']}/{figures['slices']} delivered)",
        CHECK,
        bool(figures["verified"]),
    )
