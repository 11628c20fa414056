"""Section 5: admin ``find`` over a large slice collection: the first page against a deep page.

100,000 slices in 2,000 units (50 slices of 2 messages each), stored in bulk as the repository stores units,
in two layouts (:func:`seed`). The walk to depth 10,000 uses the largest page (500) and checks it returns
every slice once, in order; then the first page and the page at depth 10,000 (the same page size) are timed.
Keyset pagination must make both cost the same: the target is deep/first <= 1.5x. That is on the server
(``--uri``, ``MONGODB_URI``, or the SecantusDB ``python -m benchmarks`` starts). In memory (``--no-server``)
nothing is timed: the walk is checked, and the unit documents a page's aggregations select are counted (what
a server reads from storage for that page). On both the sizes are divided by the scale's ``share`` (10 at the
full scale: 10,000 slices in 200 units, a walk to depth 1,000).
"""

from __future__ import annotations

import statistics
import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from typing import Any

from benchmarks.backends import describe, mongodb_uri, motor_database
from benchmarks.common import Row, Scale, SectionResult, divided
from benchmarks.workload import conversation, unit_with_slices
from partner_repo import in_memory_database, init_repository
from partner_repo.admin import MAX_LIMIT, SliceQueries
from partner_repo.clock import utc_now
from partner_repo.mongo import UNITS, unit_document

TARGET = 1.5
CORES = 100
BATCH = 200


LAYOUTS = ("sessions", "interleaved")


async def run(scale: Scale) -> list[SectionResult]:
    scale = divided(scale)
    uri = mongodb_uri()
    results = []
    for layout in LAYOUTS:
        if uri is None:
            # mongomock never uses an index to answer a query, but checks every unique index against every
            # stored document on each insert, which makes a bulk load quadratic: the embedded run goes without
            # indexes.
            database = await init_repository(
                in_memory_database(f"bench_{uuid.uuid4().hex[:8]}"), create_indexes=False
            )
            result = await _measure(scale, database, describe("memory"), layout, timed=False)
            result.notes.append(
                "in memory: counts only; the embedded backend initialized without indexes (mongomock answers "
                "queries by scanning)"
            )
            results.append(result)
            continue
        async with motor_database(uri) as database:
            backend = describe("mongodb", uri)
            results.append(await _measure(scale, database, backend, layout, timed=True))
    return results


async def seed(database: Any, scale: Scale, numbers: range, base: datetime, layout: str) -> float:
    """Store units ``numbers`` (of ``admin_units``, ``admin_slices_per_unit`` slices each) in bulk; seconds.

    One slice a second overall. *interleaved*: slice ``j`` of unit ``u`` is created at
    ``base + (j * admin_units + u)`` s, every unit spanning the whole period. *sessions*: unit ``u`` is
    session ``u // CORES`` of core ``u % CORES``; a core's sessions follow one another, each taking
    ``admin_slices_per_unit * CORES`` s, the cores' slices one second apart.
    """
    started = time.perf_counter()
    messages = conversation(scale.admin_slices_per_unit * 2, seed=13)
    second = timedelta(seconds=1)
    session_length = second * scale.admin_slices_per_unit * CORES
    batch = []
    for number in numbers:
        if layout == "interleaved":
            first_slice_at, slice_every = base + number * second, second * scale.admin_units
        else:
            first_slice_at = base + (number // CORES) * session_length + (number % CORES) * second
            slice_every = second * CORES
        unit = unit_with_slices(
            f"scale-u{number:06d}",
            f"scale-core-{number % CORES:03d}",
            messages,
            messages_per_slice=2,
            first_slice_at=first_slice_at,
            slice_every=slice_every,
        )
        batch.append(unit_document(unit))
        if len(batch) == BATCH:
            await database[UNITS].insert_many(batch)
            batch = []
    if batch:
        await database[UNITS].insert_many(batch)
    return time.perf_counter() - started


async def _measure(scale: Scale, database: Any, backend: str, layout: str, *, timed: bool) -> SectionResult:
    """The walk, and the unit documents a page selects; ``timed`` (on a server): the pages' latencies too."""
    total = scale.admin_units * scale.admin_slices_per_unit
    base = utc_now() - timedelta(days=60)
    tenth = max(scale.admin_units // 10, 1)
    queries = SliceQueries(database)

    def first_page() -> Awaitable[Any]:
        return queries.find(limit=scale.admin_page)

    seeding_s = await seed(database, scale, range(tenth), base, layout)
    small_reads = await _units_read(database, lambda q: q.find(limit=scale.admin_page))
    small = await _time(first_page, scale.admin_repeats) if timed else {}
    seeding_s += await seed(database, scale, range(tenth, scale.admin_units), base, layout)

    walked, cursor, walk_s = await _walk(queries, scale.admin_depth)
    first_reads = await _units_read(database, lambda q: q.find(limit=scale.admin_page))
    deep_reads = await _units_read(database, lambda q: q.find(limit=scale.admin_page, after=cursor))

    result = SectionResult(
        key="admin", title=f"5. Admin find: first page vs deep page, {layout} layout", backend=backend
    )
    result.raw = {
        "layout": layout,
        "slices": total,
        "units": scale.admin_units,
        "cores": CORES,
        "walked_slices": walked,
        "walk_page_size": MAX_LIMIT,
        "page_size": scale.admin_page,
        "first_page_units_read_at_a_tenth": small_reads,
        "first_page_units_read": first_reads,
        "deep_page_units_read": deep_reads,
    }
    over = f"over {total:,} slices in {scale.admin_units:,} units"
    grown = f"first page as the collection grows {scale.admin_units // tenth}x "
    grown += f"({tenth * scale.admin_slices_per_unit:,} -> {total:,} slices)"
    selected = Row(
        "unit documents a page's aggregations select (what a server reads), first / deep",
        f"{first_reads:,} / {deep_reads:,} of {scale.admin_units:,}",
    )
    if not timed:
        result.rows += [
            Row(
                f"walk of {scale.admin_depth:,} slices in pages of {MAX_LIMIT}, {over}",
                f"{walked:,} slices, every slice once and in order",
                "every slice once, in order",
                walked == min(scale.admin_depth, total),
            ),
            selected,
            Row(f"{grown}: unit documents it selects", f"{small_reads:,} -> {first_reads:,}"),
        ]
        return result

    first = await _time(first_page, scale.admin_repeats)
    deep = await _time(lambda: queries.find(limit=scale.admin_page, after=cursor), scale.admin_repeats)
    ratio = deep["median_s"] / first["median_s"]
    growth = first["median_s"] / small["median_s"]
    result.rows += [
        Row(
            f"find, page of {scale.admin_page}, {over}",
            f"first {first['median_s'] * 1000:,.1f} ms, after {walked:,} slices "
            f"{deep['median_s'] * 1000:,.1f} ms; deep/first = {ratio:.2f}x",
            f"<= {TARGET}x",
            ratio <= TARGET,
        ),
        selected,
        Row(
            grown,
            f"{small['median_s'] * 1000:,.1f} ms -> {first['median_s'] * 1000:,.1f} ms ({growth:.1f}x); "
            f"unit documents selected {small_reads:,} -> {first_reads:,}",
        ),
    ]
    result.raw |= {
        "seed_seconds": seeding_s,
        "walk_seconds": walk_s,
        "first_page_at_a_tenth": small,
        "first_page_growth": growth,
        "first_page": first,
        "deep_page": deep,
        "deep_over_first": ratio,
    }
    result.notes.append(
        f"seeded {total:,} slices in {seeding_s:.1f} s (insert_many of stored unit documents); walked "
        f"{walked:,} slices in pages of {MAX_LIMIT} in {walk_s:.1f} s, every slice once and in order"
    )
    return result


async def _units_read(database: Any, page: Callable[[SliceQueries], Awaitable[Any]]) -> int:
    """The unit documents selected by the first ``$match`` of each aggregation one page runs (untimed),
    through a fresh ``SliceQueries``: the same on every backend, and what a server reads from storage."""
    matches: list[dict[str, Any]] = []
    units = database[UNITS]

    class Recording:
        def __getattr__(self, name: str) -> Any:
            return getattr(units, name)

        def aggregate(self, pipeline: list[dict[str, Any]], **options: Any) -> Any:
            matches.append(pipeline[0]["$match"])
            return units.aggregate(pipeline, **options)

    class Database:
        name = database.name

        def __getitem__(self, name: str) -> Any:
            return Recording() if name == UNITS else database[name]

    await page(SliceQueries(Database()))  # type: ignore[arg-type]
    return sum([await units.count_documents(match) for match in matches])


async def _walk(queries: SliceQueries, depth: int) -> tuple[int, str | None, float]:
    """Follow ``next_cursor`` until ``depth`` slices were returned; checks order and uniqueness on the way."""
    started = time.perf_counter()
    seen: set[str] = set()
    previous: tuple[Any, str] | None = None
    cursor = None
    while len(seen) < depth:
        page = await queries.find(limit=min(MAX_LIMIT, depth - len(seen)), after=cursor)
        for item in page.items:
            key = (item.created_at, item.id or "")
            if item.id in seen or (previous is not None and key > previous):
                raise AssertionError(f"the walk returned slice {item.id!r} twice or out of order")
            seen.add(item.id or "")
            previous = key
        cursor = page.next_cursor
        if cursor is None:
            break
    return len(seen), cursor, time.perf_counter() - started


async def _time(query: Any, repeats: int) -> dict[str, Any]:
    durations = []
    for _ in range(repeats):
        started = time.perf_counter()
        page = await query()
        durations.append(time.perf_counter() - started)
        if not page.items:
            raise AssertionError("a timed page came back empty")
    return {"median_s": statistics.median(durations), "runs_s": durations}
