"""Section 2: the CPU the library adds on top of the driver, library and raw side by side in one run.

Each comparison runs the library call and a hand-written Motor call that does the same work, on the same
backend, in alternating batches (the order swapped every round) and reports library/raw ratios of process
CPU time with their spread over the rounds; wall-time ratios are recorded in the JSON too.

- append: ``MemoryUnitRepository.append`` by the unit's writer (the repository has seen the unit, so it
  pushes guarded by the head it remembers: one round trip) against one ``update_one`` with the same
  ``$push``/``$inc``/``$set`` built by hand. Both units start at 10 messages every round.
- append, first from a new repository: the cold path (head read, then guarded push) against a raw side
  doing the same two round trips, isolating the library's own CPU.
- unit load: ``get`` of a 5,000-message unit against ``find_one`` of the same document.
- page query: ``SliceQueries.find`` (one page of 50) against the hand-written aggregation returning that page
  (the library's page reads one window of time near its start; where the scope's slices start is asked once
  and remembered for a minute); the cold row asks it every time.

Backends: the real driver against the scripted server in a child process (this process's CPU is only the
library's and the driver's, as with a real server), and the server given with ``--uri`` or ``MONGODB_URI``.
Not in memory: there mongomock's own work is in-process CPU on both sides, and its scans and copies would
make the ratio mongomock's, not the library's.
"""

from __future__ import annotations

import gc
import uuid
from contextlib import AbstractAsyncContextManager
from datetime import UTC, datetime
from typing import Any

from benchmarks.backends import motor_database, on_servers
from benchmarks.common import Row, Scale, SectionResult, interleaved, ratio_text
from benchmarks.workload import conversation, seed_unit, unit_with_slices
from partner_repo import MemoryUnitRepository
from partner_repo.admin import SliceQueries
from partner_repo.mongo import UNITS, driver, unit_document

TARGETS = {"append": 1.3, "unit load": 2.0, "page query": 1.3}
PAGE = 50


async def run(scale: Scale) -> list[SectionResult]:
    return await on_servers(lambda uri, backend: _measure(scale, motor_database(uri), backend))


async def _measure(scale: Scale, opened: AbstractAsyncContextManager[Any], backend: str) -> SectionResult:
    result = SectionResult(key="overhead", title="2. Library CPU overhead vs the raw driver", backend=backend)
    async with opened as database:
        comparisons = {}
        for name, measure in (
            ("append", _append),
            ("append, first from a new repository", _append_cold),
            ("unit load", _unit_load),
            ("unit load, collector paused", _unit_load_collector_paused),
            ("page query", _page_query),
            ("page query, first from a new SliceQueries", _page_query_cold),
        ):
            gc.collect()  # garbage left by the previous comparison is not this one's cost
            comparisons[name] = await measure(database, scale)
    for name, figures in comparisons.items():
        median = figures["cpu_ratio"]["median"]
        lib_us = figures["library_cpu_us"]["median"]
        raw_us = figures["raw_cpu_us"]["median"]
        result.rows.append(
            Row(
                f"{name}: library/raw CPU",
                f"{ratio_text(figures['cpu_ratio'])}; {lib_us:,.0f} vs {raw_us:,.0f} us/op",
                f"<= {TARGETS[name]}x" if name in TARGETS else "",
                median <= TARGETS[name] if name in TARGETS else None,
            )
        )
    result.raw = comparisons
    result.notes.append(
        "median (and interquartile range) of the per-round ratios of interleaved library/raw batches "
        f"({scale.overhead_rounds} rounds); CPU = process time of this "
        "process (library + driver; a separate server's work is not in it)"
    )
    return result


async def _append(database: Any, scale: Scale) -> dict[str, Any]:
    return await _append_against(database, scale, cold=False)


async def _append_cold(database: Any, scale: Scale) -> dict[str, Any]:
    """Every library append comes from a new repository (nothing remembered: head read, then guarded push);
    the raw side also reads the head and guards its push by version: what remains is the library's own CPU
    (validation, slice building, size accounting), not its second round trip."""
    return await _append_against(database, scale, cold=True)


async def _append_against(database: Any, scale: Scale, *, cold: bool) -> dict[str, Any]:
    read_head = cold
    repository = MemoryUnitRepository(database)
    collection = database[UNITS]
    turn = [m.model_dump() for m in conversation(2, seed=5)]
    base = conversation(10, seed=6)
    ids = {"library": f"append-lib-{uuid.uuid4().hex[:8]}", "raw": f"append-raw-{uuid.uuid4().hex[:8]}"}
    counts = {"raw": 0}

    async def reseed() -> None:
        await repository.delete(ids["library"])  # through the library, which forgets the head it knew
        await collection.delete_one({"_id": ids["raw"]})
        for unit_id in ids.values():
            await seed_unit(database, unit_id, "bench-core", base, messages_per_slice=10)
        counts["raw"] = len(base)
        if not cold:
            # The unit's writer has seen its head (its previous append did): the repository reads it once,
            # untimed, so the timed appends are the writer's steady state.
            await repository.head(ids["library"])

    async def library() -> None:
        writer = MemoryUnitRepository(database) if cold else repository
        await writer.append(ids["library"], turn, "a turn about plans", core_id="bench-core")

    async def raw() -> None:
        start = counts["raw"]
        now = datetime.now(UTC)
        piece = {
            "id": str(uuid.uuid4()),
            "start_index": start,
            "end_index": start + len(turn),
            "summary": "a turn about plans",
            "created_at": now,
            "rolling_size": None,
            "retain_divisor": None,
        }
        messages = [{"role": m["role"], "content": m["content"]} for m in turn]
        guard: dict[str, Any] = {"_id": ids["raw"]}
        if read_head:
            head = await collection.find_one(
                {"_id": ids["raw"]}, {"message_count": 1, "version": 1, "slices": {"$slice": -1}}
            )
            start = head["message_count"]
            piece["start_index"], piece["end_index"] = start, start + len(turn)
            guard["version"] = head["version"]
        await collection.update_one(
            guard,
            {
                # the stored layout the library keeps: the slice's id in ``slice_ids`` too (the unique index)
                "$push": {
                    "conversation_messages": {"$each": messages},
                    "slices": {"$each": [piece]},
                    "slice_ids": piece["id"],
                },
                "$inc": {"message_count": len(messages), "slice_count": 1, "size_bytes": 400, "version": 1},
                "$set": {"updated_at": now},
            },
        )
        counts["raw"] = start + len(messages)

    await reseed()
    return await interleaved(
        library, raw, rounds=scale.overhead_rounds, inner=scale.overhead_inner, before_round=reseed
    )


async def _unit_load_collector_paused(database: Any, scale: Scale) -> dict[str, Any]:
    """Diagnostic: the same comparison with the garbage collector off during the timed batches, to show how
    much of ``get``'s cost is building the models and how much the collector's work on them."""
    return await _unit_load(database, scale, pause_gc=True)


async def _unit_load(database: Any, scale: Scale, *, pause_gc: bool = False) -> dict[str, Any]:
    repository = MemoryUnitRepository(database)
    collection = database[UNITS]
    unit_id = f"load-{uuid.uuid4().hex[:8]}"
    await seed_unit(
        database,
        unit_id,
        "bench-core",
        conversation(scale.overhead_unit_messages, seed=7),
        messages_per_slice=30,
    )

    async def library() -> None:
        await repository.get(unit_id)

    async def raw() -> None:
        await collection.find_one({"_id": unit_id})

    figures = await interleaved(
        library, raw, rounds=scale.overhead_rounds, inner=max(scale.overhead_inner // 2, 1), pause_gc=pause_gc
    )
    figures["unit_messages"] = scale.overhead_unit_messages
    return figures


async def _page_query_cold(database: Any, scale: Scale) -> dict[str, Any]:
    """Every library page comes from a new ``SliceQueries``: it first asks where the scope's slices start
    (one indexed ``find_one``), which a long-lived one remembers for a minute."""
    return await _page_query(database, scale, cold=True)


async def _page_query(database: Any, scale: Scale, *, cold: bool = False) -> dict[str, Any]:
    queries = SliceQueries(database)
    collection = database[UNITS]
    core_id = f"page-core-{uuid.uuid4().hex[:8]}"
    documents = []
    for number in range(scale.overhead_page_units):
        unit = unit_with_slices(
            f"{core_id}-u{number:05d}",
            core_id,
            conversation(scale.overhead_slices_per_unit * 2, seed=number),
            messages_per_slice=2,
        )
        documents.append(unit_document(unit))
    await collection.insert_many(documents)
    pipeline: list[dict[str, Any]] = [
        {"$match": {"core_id": core_id}},
        {"$project": {"core_id": 1, "slices": 1}},
        {"$unwind": "$slices"},
        {"$sort": {"slices.created_at": -1, "slices.id": -1, "_id": -1}},
        {"$limit": PAGE},
    ]

    async def library() -> None:
        await (SliceQueries(database) if cold else queries).find(core_id=core_id, limit=PAGE)

    async def raw() -> None:
        await driver.aggregate_list(collection, pipeline, PAGE)

    figures = await interleaved(
        library, raw, rounds=scale.overhead_rounds, inner=max(scale.overhead_inner // 5, 1)
    )
    figures["slices"] = scale.overhead_page_units * scale.overhead_slices_per_unit
    return figures
