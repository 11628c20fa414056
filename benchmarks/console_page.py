"""Section: the operator's console: a core's page at 100 and at 10,000 slices (``partner-repo console``).

One core, its slices in units of 100 (two messages each, one slice a minute), stored in bulk as the
repository stores units; the newest page's slices indexed for recall (their topics label the timeline). The
core's page is requested through the console's own app (``console_app``, every query and the template), a
first view on a fresh console, then repeats; its figures: the median page time, and, on a server, the
documents its queries examined: every ``find`` and ``aggregate`` the first view sent (recorded by a command
listener) run again under ``explain`` (``executionStats``), their ``totalDocsExamined`` added up. The target:
the page at 10,000 slices examines at most 1.3x what it examines at 100. Runs against ``MONGODB_URI`` when
set (SecantusDB in CI's integration layer, or the one ``python -m benchmarks`` starts); never timed on the
embedded backend (its times are the in-memory section's).
"""

from __future__ import annotations

import statistics
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Any

import httpx
from pymongo import monitoring

from benchmarks.backends import describe, mongodb_uri, motor_database
from benchmarks.common import Row, Scale, SectionResult
from benchmarks.recall_explain import CallCounter
from benchmarks.workload import conversation, unit_with_slices
from partner_repo import MemoryCoreRepository, in_memory_database, init_repository
from partner_repo.clock import utc_now
from partner_repo.console import ConsoleOptions, console_app
from partner_repo.events import MemoryUnitRef, RollingResult
from partner_repo.mongo import CORES, UNITS, unit_document
from partner_repo.recall import RecallIndexer

TARGET = 1.3
SIZES = {"full": (100, 10_000), "quick": (20, 400)}
PER_UNIT = 100
CORE = "console-bench"
READS = ("find", "aggregate")


async def run(scale: Scale) -> list[SectionResult]:
    small, large = SIZES.get(scale.name, SIZES["quick"])
    uri = mongodb_uri()
    if uri is None:  # measured on a server; in memory only counted (its times are the in-memory section's)
        return [await _count(small, large)]
    return [await _measure(scale, "mongodb", uri, small, large)]


async def _count(small: int, large: int) -> SectionResult:
    """In memory: the collection calls of the core page's first view at each size, never its time."""
    calls = {size: await count_core_page_calls(size) for size in (small, large)}
    result = SectionResult(
        key="console", title="11. Console: a core's page as its history grows", backend=describe("memory")
    )
    result.rows.append(
        Row(
            f"collection calls of the core page's first view, {small:,} -> {large:,} slices",
            f"{calls[small]} -> {calls[large]}",
            "the same at every size",
            calls[small] == calls[large],
        )
    )
    result.notes.append(
        "times and documents examined are measured on a server (--uri, or the started SecantusDB)"
    )
    result.raw = {
        "sizes": [small, large],
        "per_unit": PER_UNIT,
        "calls": {str(k): v for k, v in calls.items()},
    }
    return result


async def _measure(scale: Scale, backend: str, uri: str | None, small: int, large: int) -> SectionResult:
    figures = {
        size: await measure_core_page(uri, size, repeats=3 if scale.name == "quick" else 15)
        for size in (small, large)
    }
    result = SectionResult(
        key="console", title="11. Console: a core's page as its history grows", backend=describe(backend, uri)
    )
    first, second = figures[small], figures[large]
    growth = second["median_s"] / first["median_s"]
    result.rows.append(
        Row(
            f"core page (timeline of {first['timeline_slices']} slices, topics, window), "
            f"{small:,} -> {large:,} slices",
            f"{first['median_s'] * 1000:,.1f} ms -> {second['median_s'] * 1000:,.1f} ms ({growth:.2f}x); "
            f"first view {first['first_s'] * 1000:,.1f} ms -> {second['first_s'] * 1000:,.1f} ms",
        )
    )
    if uri is not None:  # always, since run() measures on a server only
        ratio = second["docs_examined"] / max(first["docs_examined"], 1)
        result.rows.append(
            Row(
                f"documents the core page's queries examined (explain), {small:,} -> {large:,} slices",
                f"{first['docs_examined']:,} -> {second['docs_examined']:,} ({ratio:.2f}x) in "
                f"{first['queries']} / {second['queries']} queries",
                f"<= {TARGET}x",
                ratio <= TARGET,
            )
        )
    result.raw = {
        "sizes": [small, large],
        "per_unit": PER_UNIT,
        "figures": {str(k): v for k, v in figures.items()},
    }
    return result


class CommandLog(monitoring.CommandListener):
    """The reads a client sent while recording: each ``find`` and ``aggregate`` command as sent."""

    def __init__(self) -> None:
        self.recording = False
        self.commands: list[dict[str, Any]] = []

    def started(self, event: monitoring.CommandStartedEvent) -> None:
        if self.recording and event.command_name in READS:
            self.commands.append(dict(event.command))

    def succeeded(self, event: monitoring.CommandSucceededEvent) -> None:
        pass

    def failed(self, event: monitoring.CommandFailedEvent) -> None:
        pass


async def docs_examined(database: Any, commands: list[dict[str, Any]]) -> int:
    """The documents ``commands`` examine, by ``explain`` (``executionStats``) of each, added up."""
    total = 0
    for command in commands:
        sent = {
            key: value for key, value in command.items() if not key.startswith(("$", "lsid", "txnNumber"))
        }
        sent.pop("readConcern", None)
        explained = await database.command("explain", sent, verbosity="executionStats")
        total += examined(explained)
    return total


def examined(explained: dict[str, Any]) -> int:
    """``totalDocsExamined`` of one explain: its own ``executionStats``, else its stages' (an aggregation)."""
    own = explained.get("executionStats")
    if isinstance(own, dict):
        return int(own.get("totalDocsExamined", 0))
    total = 0
    for stage in explained.get("stages") or []:
        cursor = stage.get("$cursor") if isinstance(stage, dict) else None
        if isinstance(cursor, dict):
            total += examined(cursor)
    return total


@asynccontextmanager
async def seeded_database(uri: str | None, slices: int, log: CommandLog) -> AsyncIterator[Any]:
    """A fresh database holding :data:`CORE` with ``slices`` slices (on ``uri``, else in memory)."""
    if uri is None:
        yield await seed(await init_repository(in_memory_database(f"bench_{uuid.uuid4().hex[:8]}")), slices)
        return
    async with motor_database(uri, listeners=[log]) as database:
        yield await seed(database, slices)


async def seed(database: Any, slices: int, *, indexed: int = 40) -> Any:
    """:data:`CORE`'s ``slices`` slices in units of :data:`PER_UNIT`, a turn in its window, and its newest
    ``indexed`` slices in the recall index."""
    base = utc_now() - timedelta(days=30)
    messages = conversation(PER_UNIT * 2, seed=29)
    units = []
    for number in range((slices + PER_UNIT - 1) // PER_UNIT):
        count = min(PER_UNIT, slices - number * PER_UNIT)
        units.append(
            unit_with_slices(
                f"{CORE}-u{number:05d}",
                CORE,
                messages[: count * 2],
                messages_per_slice=2,
                first_slice_at=base + timedelta(minutes=number * PER_UNIT),
                slice_every=timedelta(minutes=1),
            )
        )
    for start in range(0, len(units), 50):
        await database[UNITS].insert_many([unit_document(unit) for unit in units[start : start + 50]])
    await MemoryCoreRepository(database).record(CORE, messages[:2])
    newest_unit = units[-1].id  # as the core's last roll left it: its session is the newest unit
    await database[CORES].update_one(
        {"_id": CORE}, {"$set": {"memory_session_id": newest_unit, "last_unit_id": newest_unit}}
    )
    indexer = RecallIndexer(database)
    newest = [(unit, piece) for unit in units for piece in unit.slices if piece is not None][-indexed:]
    for unit, piece in newest:
        start, end = piece.start_index or 0, piece.end_index or 0
        await indexer.consume(
            RollingResult(
                memory_unit=MemoryUnitRef(
                    id=unit.id, core_id=CORE, message_count=len(unit.conversation_messages)
                ),
                memory_slice=piece,
                increment_messages=tuple(unit.conversation_messages[start:end]),
                summary=piece.summary,
                rolling_size=None,
                retain_divisor=None,
            )
        )
    return database


SLICE_BLOCK = 'class="block slice"'
"""How the core page draws a slice on its timeline."""


def _shows_the_timeline(page: httpx.Response) -> None:
    """A measured page must be the real one: a core page that drew its slices."""
    if page.status_code != 200 or SLICE_BLOCK not in page.text:
        raise AssertionError(f"the core page did not show the timeline ({page.status_code})")


async def count_core_page_calls(slices: int) -> int:
    """The collection calls the first view of the core page of a core with ``slices`` slices makes, in
    memory."""
    async with seeded_database(None, slices, CommandLog()) as database:
        counted = CallCounter(database)
        app = console_app(counted, ConsoleOptions(lag_sample_s=0))
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
            counted.start()
            page = await http.get("/core", params={"id": CORE})
            calls = counted.stop()
        _shows_the_timeline(page)
        return len(calls)


async def measure_core_page(uri: str | None, slices: int, *, repeats: int) -> dict[str, Any]:
    """The core page of a core with ``slices`` slices: first view, median of ``repeats`` more, and (on a
    server) the documents its first view's queries examined."""
    log = CommandLog()
    async with seeded_database(uri, slices, log) as database:
        app = console_app(database, ConsoleOptions(lag_sample_s=0))
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
            log.recording = True
            started = time.perf_counter()
            first = await http.get("/core", params={"id": CORE})
            first_s = time.perf_counter() - started
            log.recording = False
            _shows_the_timeline(first)
            durations = []
            for _ in range(repeats):
                started = time.perf_counter()
                (await http.get("/core", params={"id": CORE})).raise_for_status()
                durations.append(time.perf_counter() - started)
        figures: dict[str, Any] = {
            "slices": slices,
            "first_s": first_s,
            "median_s": statistics.median(durations),
            "runs_s": durations,
            "timeline_slices": first.text.count(SLICE_BLOCK),
            "queries": len(log.commands),
        }
        if uri is not None:
            figures["docs_examined"] = await docs_examined(database, log.commands)
            figures["commands"] = [next(iter(command)) for command in log.commands]
        return figures
