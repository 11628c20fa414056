"""Section 4: concurrent appends to one unit: how often the optimistic path retries, and appends per second.

W writers append to one unit at once (W = 1, 8, 32), each through its own repository as separate processes
would; then 32 tasks sharing one repository (it queues their appends to the unit: no race, no retry); then
32 writers append to 32 different units. An append reads the unit's head and pushes guarded by the version it
read; a writer that lost the race re-reads and pushes again. Every attempt sends one update, so retries =
update commands - appends, counted from the driver calls (the embedded backend's call counter, or command
monitoring); the library needs no hook for it. After each run the unit is checked: every message stored once
and the slices tiling them. A writer that keeps losing gives up after the library's patience (10 s) with
``ConflictError`` ("try again"): such an append is refused, not lost, and counted; the row fails.

Appends per second are measured on the scripted server and on the server (``--uri``, ``MONGODB_URI``, or
the SecantusDB ``python -m benchmarks`` starts; there each writer appends
``concurrency_server_appends_per_writer`` turns). In memory only the retries are counted: each call is wrapped
so it yields to the event loop before and after, as a network round trip would
(``benchmarks.backends.YieldingDatabase``); without it mongomock answers synchronously, writers never
interleave, and no race (so no retry) could ever happen.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from benchmarks.backends import (
    YieldingDatabase,
    describe,
    memory_database,
    mongodb_uri,
    motor_database,
    scripted_server,
)
from benchmarks.common import Row, Scale, SectionResult
from benchmarks.monitor import WireMeter
from benchmarks.workload import conversation, seed_unit
from partner_repo import ConflictError, MemoryUnitRepository

SEEDED_MESSAGES = 10


async def run(scale: Scale) -> list[SectionResult]:
    results = []
    async with memory_database() as database:
        yielding = YieldingDatabase(database)
        results.append(
            await _measure(
                scale,
                yielding,
                lambda: yielding.calls.get("update_one", 0),
                describe("memory") + ", every call yielding to the event loop",
                counted_only=True,
            )
        )
    with scripted_server() as uri:
        results.append(await _on_server(scale, uri, describe("wire")))
    real = mongodb_uri()
    if real is not None:  # fewer appends a writer: every lost race costs the server a read and an update
        fewer = replace(scale, concurrency_appends_per_writer=scale.concurrency_server_appends_per_writer)
        results.append(await _on_server(fewer, real, describe("mongodb", real)))
    return results


async def _on_server(scale: Scale, uri: str, backend: str) -> SectionResult:
    meter = WireMeter()
    updates = {"count": 0}

    class UpdateCounter(WireMeter):
        def started(self, event: Any) -> None:
            if event.command_name == "update" and event.command.get("update") == "memory_units":
                updates["count"] += 1

    async with motor_database(uri, listeners=[meter, UpdateCounter()], maxPoolSize=64) as database:
        return await _measure(scale, database, lambda: updates["count"], backend)


async def _measure(
    scale: Scale, database: Any, updates: Callable[[], int], backend: str, *, counted_only: bool = False
) -> SectionResult:
    """The runs on ``database``; ``counted_only`` (in memory): the retries, never the appends per second."""
    result = SectionResult(key="concurrency", title="4. Concurrent appends", backend=backend)
    repository = MemoryUnitRepository(database)
    turn = [m.model_dump() for m in conversation(2, seed=11)]
    per_writer = scale.concurrency_appends_per_writer
    runs: dict[str, Any] = {}
    most = max(scale.concurrency_writers)
    plans = [
        *((writers, 1, False) for writers in scale.concurrency_writers),
        (most, 1, True),
        (most, most, False),
    ]
    for count, units, shared in plans:
        unit_ids = [f"conc-{uuid.uuid4().hex[:10]}" for _ in range(units)]
        for unit_id in unit_ids:
            await seed_unit(
                database, unit_id, "bench-core", conversation(SEEDED_MESSAGES, seed=12), messages_per_slice=10
            )
        # A repository each: writers in separate processes, ordered only by the version guard. Shared: tasks
        # of one service using one repository, which queues their appends to a unit instead of racing.
        writers = [repository if shared else MemoryUnitRepository(database) for _ in range(count)]

        async def writer(
            number: int, unit_ids: list[str] = unit_ids, writers: list[MemoryUnitRepository] = writers
        ) -> int:
            """The writer's appends; how many were refused (``ConflictError``: it lost the race for the
            library's patience, 10 s, and was told to try again: refused, not lost)."""
            unit_id = unit_ids[number % len(unit_ids)]
            refused = 0
            for step in range(per_writer):
                try:
                    await writers[number].append(
                        unit_id, turn, f"writer {number} step {step}", core_id="bench-core"
                    )
                except ConflictError:
                    refused += 1
            return refused

        before = updates()
        started = time.perf_counter()
        refused = sum(await asyncio.gather(*(writer(n) for n in range(count))))
        elapsed = time.perf_counter() - started
        appends = count * per_writer - refused
        retries = updates() - before - appends
        intact = all([await _intact(repository, unit_id) for unit_id in unit_ids])
        key = f"{count} writer{'s' if count > 1 else ''}, {units} unit{'s' if units > 1 else ''}"
        key += ", one shared repository" if shared else ""
        runs[key] = {
            "writers": count,
            "units": units,
            "shared_repository": shared,
            "appends": appends,
            "refused": refused,
            **({} if counted_only else {"seconds": elapsed, "appends_per_s": appends / elapsed}),
            "retries": retries,
            "retries_per_append": retries / max(appends, 1),
            "units_intact": intact,
        }
        rate = "" if counted_only else f"{appends / elapsed:,.0f} appends/s; "
        result.rows.append(
            Row(
                key,
                f"{rate}{retries / max(appends, 1):.2f} retries/append"
                + (f"; {refused} of {count * per_writer} appends refused (ConflictError)" if refused else "")
                + ("" if intact else "; UNIT DAMAGED"),
                "every message stored once",
                intact and not refused,
            )
        )
    result.raw = {"appends_per_writer": per_writer, "runs": runs}
    result.notes.append(
        f"each writer appends {per_writer} turns of 2 messages through its own repository (as separate "
        "processes would) unless the row says one shared repository; retries = update commands - appends"
    )
    return result


async def _intact(repository: MemoryUnitRepository, unit_id: str) -> bool:
    """Every message stored once: the slices (kept in creation-time order) tile the messages, without gaps or
    overlaps, when ordered by their intervals."""
    unit = await repository.get(unit_id)
    if unit is None:
        return False
    expected = 0
    for piece in sorted(unit.complete_slices(), key=lambda s: s.start_index or 0):
        if piece.start_index != expected or (piece.end_index or 0) <= expected:
            return False
        expected = piece.end_index or 0
    return expected == len(unit.conversation_messages)
