"""Section 3: the listener's throughput and latency through the polling path, on the embedded backend.

- Throughput: slices already stored in several units (appended while no listener ran) delivered to a no-op
  consumer by a new listener group (a backfill): slices per second from ``start()`` to the last delivery.
- Latency: slices appended at a steady rate while a listener runs; for each, the time from the append's
  return to the consumer's call. The polling interval bounds it, so it is reported with the figures.

The embedded backend runs every database call synchronously on the event loop, so appender, poller and
consumer share one thread: the figures include that contention, as a single-process service would see it.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

from benchmarks import listener_parallel
from benchmarks.backends import describe, memory_database
from benchmarks.common import Row, Scale, SectionResult, percentile
from benchmarks.workload import conversation
from partner_repo import MemoryUnitRepository
from partner_repo.events import RollingResult
from partner_repo.listener import AfterRollingRegistry, RollingListener

UNITS = 10
DELIVERY_TIMEOUT_S = 120.0


class Stopwatch:
    """A no-op AfterRolling consumer that only notes when each slice arrived."""

    name = "benchmark-stopwatch"

    def __init__(self) -> None:
        self.arrived: dict[str, float] = {}
        self.everything = asyncio.Event()
        self.expected = 0

    async def consume(self, result: RollingResult) -> None:
        self.arrived.setdefault(result.slice_id, time.perf_counter())
        if len(self.arrived) >= self.expected:
            self.everything.set()


async def run(scale: Scale) -> list[SectionResult]:
    result = SectionResult(
        key="listener", title="3. Listener throughput and latency (polling)", backend=describe("memory")
    )
    throughput = await _throughput(scale)
    latency = await _latency(scale)
    result.rows.append(
        Row(
            f"backfill of {throughput['slices']:,} slices in {UNITS} units",
            f"{throughput['slices_per_s']:,.0f} slices/s",
        )
    )
    result.rows.append(
        Row(
            f"append-to-consume latency at {latency['rate_per_s']:,.0f} slices/s "
            f"(poll every {latency['poll_interval_s'] * 1000:.0f} ms)",
            f"p50 {latency['p50_ms']:,.1f} ms, p99 {latency['p99_ms']:,.1f} ms "
            f"({latency['delivered']}/{latency['slices']} delivered)",
        )
    )
    result.raw = {"throughput": throughput, "latency": latency}
    result.notes.append(
        "no-op consumer; one process: appender, poller and consumer share the event loop (mongomock-motor "
        "answers synchronously)"
    )
    return [result, *await listener_parallel.run(scale)]


async def _throughput(scale: Scale) -> dict[str, Any]:
    async with memory_database() as database:
        units = MemoryUnitRepository(database)
        turn = [m.model_dump() for m in conversation(2, seed=8)]
        for number in range(scale.listener_backfill_slices):
            await units.append(f"unit-{number % UNITS:03d}", turn, f"slice {number}", core_id="bench-core")
        consumer = Stopwatch()
        consumer.expected = scale.listener_backfill_slices
        listener = RollingListener(
            database,
            AfterRollingRegistry([consumer]),
            group="bench-backfill",
            poll_interval=scale.listener_poll_s,
            source="polling",
            start_from="beginning",
        )
        started = time.perf_counter()
        await listener.start()
        try:
            await asyncio.wait_for(consumer.everything.wait(), DELIVERY_TIMEOUT_S)
        finally:
            await listener.stop()
        elapsed = max(consumer.arrived.values()) - started
    return {
        "slices": scale.listener_backfill_slices,
        "units": UNITS,
        "seconds": elapsed,
        "slices_per_s": scale.listener_backfill_slices / elapsed,
        "poll_interval_s": scale.listener_poll_s,
    }


async def _latency(scale: Scale) -> dict[str, Any]:
    async with memory_database() as database:
        units = MemoryUnitRepository(database)
        turn = [m.model_dump() for m in conversation(2, seed=9)]
        consumer = Stopwatch()
        consumer.expected = scale.listener_live_slices
        listener = RollingListener(
            database,
            AfterRollingRegistry([consumer]),
            group="bench-live",
            poll_interval=scale.listener_poll_s,
            source="polling",
            start_from="now",
        )
        appended: dict[str, float] = {}
        period = 1.0 / scale.listener_rate_per_s
        await listener.start()
        try:
            begin = time.perf_counter()
            for number in range(scale.listener_live_slices):
                delay = begin + number * period - time.perf_counter()
                await asyncio.sleep(max(delay, 0))
                piece = await units.append(
                    f"unit-{number % UNITS:03d}", turn, f"slice {number}", core_id="bench-core"
                )
                assert piece.id is not None
                appended[piece.id] = time.perf_counter()
            achieved = scale.listener_live_slices / (time.perf_counter() - begin)
            with contextlib.suppress(TimeoutError):  # reported below as delivered < slices
                await asyncio.wait_for(consumer.everything.wait(), DELIVERY_TIMEOUT_S)
        finally:
            await listener.stop()
    latencies = [(consumer.arrived[i] - t) * 1000 for i, t in appended.items() if i in consumer.arrived]
    return {
        "slices": scale.listener_live_slices,
        "delivered": len(latencies),
        "rate_per_s": scale.listener_rate_per_s,
        "achieved_rate_per_s": achieved,
        "poll_interval_s": scale.listener_poll_s,
        "p50_ms": percentile(latencies, 0.5) if latencies else float("nan"),
        "p99_ms": percentile(latencies, 0.99) if latencies else float("nan"),
        "max_ms": max(latencies) if latencies else float("nan"),
    }
