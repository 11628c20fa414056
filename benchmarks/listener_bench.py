"""Section 3: the listener's polling path: throughput and latency on a server, its calls counted in memory.

- Throughput: slices already stored in several units (appended while no listener ran) delivered to a no-op
  consumer by a new listener group (a backfill): slices per second from ``start()`` to the last delivery.
- Latency: slices appended at a steady rate while a listener runs; for each, the time from the append's
  return to the consumer's call. The polling interval bounds it, so it is reported with the figures.

Both run on the server (``--uri``, ``MONGODB_URI``, or the SecantusDB ``python -m benchmarks`` starts; its
sizes divided by the scale's ``share``), through the polling source (the change stream is
:mod:`benchmarks.listener_parallel`'s). In memory (``--no-server``) the backfill is counted, never timed:
every slice delivered, and the collection calls the listener made per delivered slice (a wrapper of the
database counts them).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, Protocol

from benchmarks import listener_parallel
from benchmarks.backends import describe, memory_database, mongodb_uri, motor_database
from benchmarks.common import Row, Scale, SectionResult, divided, percentile
from benchmarks.recall_explain import CallCounter, CommandLog
from benchmarks.workload import conversation
from partner_repo import MemoryUnitRepository
from partner_repo.events import RollingResult
from partner_repo.listener import AfterRollingRegistry, RollingListener

TITLE = "3. Listener throughput and latency (polling)"
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
    uri = mongodb_uri()
    result = await (_on_server(divided(scale), uri) if uri is not None else _in_memory(scale))
    return [result, *await listener_parallel.run(scale)]


async def _on_server(scale: Scale, uri: str) -> SectionResult:
    result = SectionResult(key="listener", title=TITLE, backend=describe("mongodb", uri))
    throughput = await _throughput(scale, lambda: _server(uri))
    latency = await _latency(scale, lambda: _server(uri))
    result.rows.append(
        Row(
            f"backfill of {throughput['slices']:,} slices in {UNITS} units",
            f"{throughput['slices_per_s']:,.0f} slices/s; "
            f"{throughput['calls_per_slice']:.2f} commands a slice",
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
    result.notes.append("no-op consumer; the polling source; appender, poller and consumer in one process")
    return result


async def _in_memory(scale: Scale) -> SectionResult:
    result = SectionResult(key="listener", title=TITLE, backend=describe("memory"))
    throughput = await _throughput(scale, _memory)
    result.rows.append(
        Row(
            f"backfill of {throughput['slices']:,} slices in {UNITS} units: collection calls a slice",
            f"{throughput['calls_per_slice']:.2f} ({throughput['delivered']:,}/{throughput['slices']:,} "
            "delivered)",
            "every slice delivered",
            throughput["delivered"] == throughput["slices"],
        )
    )
    counted = ("slices", "delivered", "units", "calls", "calls_per_slice")
    result.raw = {"throughput": {key: throughput[key] for key in counted}}
    result.notes.append(
        "in memory: counts only, through a wrapper of the database that counts each collection call"
    )
    return result


class Meter(Protocol):
    """What counts an operation's database calls: ``CallCounter`` in memory, ``CommandLog`` on a server."""

    def start(self) -> None: ...

    def stop(self) -> Sequence[Any]: ...


Opened = Callable[[], AbstractAsyncContextManager[tuple[Any, Meter]]]
"""Opens a fresh database and the meter of its calls."""


@asynccontextmanager
async def _server(uri: str) -> AsyncIterator[tuple[Any, Meter]]:
    log = CommandLog()
    async with motor_database(uri, listeners=[log]) as database:
        yield database, log


@asynccontextmanager
async def _memory() -> AsyncIterator[tuple[Any, Meter]]:
    async with memory_database() as database:
        counter = CallCounter(database)
        yield counter, counter


async def _throughput(scale: Scale, opened: Opened) -> dict[str, Any]:
    async with opened() as (database, meter):
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
        meter.start()
        started = time.perf_counter()
        await listener.start()
        try:
            with contextlib.suppress(TimeoutError):  # reported below as delivered < slices
                await asyncio.wait_for(consumer.everything.wait(), DELIVERY_TIMEOUT_S)
        finally:
            await listener.stop()
            calls = len(meter.stop())
        elapsed = max(consumer.arrived.values(), default=started) - started
    return {
        "slices": scale.listener_backfill_slices,
        "delivered": len(consumer.arrived),
        "units": UNITS,
        "calls": calls,
        "calls_per_slice": calls / max(len(consumer.arrived), 1),
        "seconds": elapsed,
        "slices_per_s": len(consumer.arrived) / elapsed if elapsed > 0 else 0.0,
        "poll_interval_s": scale.listener_poll_s,
    }


async def _latency(scale: Scale, opened: Opened) -> dict[str, Any]:
    async with opened() as (database, _):
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
