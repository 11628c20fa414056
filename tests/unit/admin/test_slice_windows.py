"""Pages read window by window: each page reads only the units near where it starts, and the windows never
change which slices a page returns (a walk equals every matching slice, sorted, whatever the time layout)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from partner_repo import SliceQueries, in_memory_database, init_repository
from partner_repo.admin._windows import (
    ALL_TIME,
    INITIAL_WIDTH,
    MAX_GROWTH,
    MAX_WINDOWS,
    Anchors,
    Window,
    WindowWalk,
)
from partner_repo.mongo import UNITS, driver
from tests.unit.admin.support import T0, seed_unit

HOUR = timedelta(hours=1)


# -- the walk -----------------------------------------------------------------------------------------------


def test_a_newest_first_walk_starts_with_a_window_open_towards_the_future() -> None:
    walk = WindowWalk("desc", T0, None)
    assert walk.current == Window(start=T0 - INITIAL_WIDTH, end=None)


def test_an_oldest_first_walk_starts_with_a_window_open_towards_the_past() -> None:
    walk = WindowWalk("asc", T0, None)
    assert walk.current == Window(start=None, end=T0 + INITIAL_WIDTH)


def test_each_window_ends_where_the_previous_one_started_and_grows_with_what_is_missing() -> None:
    walk = WindowWalk("desc", T0, None, width=HOUR)
    second = walk.advance(found=5, wanted=20)  # 5 found, 20 more wanted: 8x wider
    assert second == Window(start=T0 - HOUR - 8 * HOUR, end=T0 - HOUR)


def test_an_empty_window_is_followed_by_the_widest_step() -> None:
    walk = WindowWalk("asc", T0, None, width=HOUR)
    assert walk.advance(found=0, wanted=10) == Window(start=T0 + HOUR, end=T0 + HOUR + MAX_GROWTH * HOUR)


def test_a_nearly_full_window_is_followed_by_one_at_least_twice_as_wide() -> None:
    walk = WindowWalk("desc", T0, None, width=HOUR)
    assert walk.advance(found=100, wanted=1) == Window(start=T0 - 3 * HOUR, end=T0 - HOUR)


def test_the_window_that_reaches_the_far_edge_is_the_last() -> None:
    walk = WindowWalk("desc", T0, T0 - 2 * HOUR, width=HOUR)
    last = walk.advance(found=0, wanted=10)
    assert last == Window(start=None, end=T0 - HOUR)  # the filter's own created_from bounds it
    assert walk.advance(found=0, wanted=10) is None


def test_after_the_most_windows_the_rest_of_the_range_is_asked_for_at_once() -> None:
    walk = WindowWalk("asc", T0, None, width=timedelta(seconds=1))
    windows = [walk.current]
    while (window := walk.advance(found=0, wanted=10)) is not None:
        windows.append(window)
    assert len(windows) == MAX_WINDOWS and windows[-1].end is None


def test_a_window_past_the_range_of_datetimes_is_open_on_that_side() -> None:
    walk = WindowWalk("desc", datetime(1, 1, 1, 0, 30, tzinfo=UTC), None)
    assert walk.current == Window(start=None, end=None)


def test_without_an_anchor_the_only_window_is_all_time() -> None:
    walk = WindowWalk("desc", None, None)
    assert walk.current == ALL_TIME and walk.advance(found=0, wanted=10) is None


# -- the pages ----------------------------------------------------------------------------------------------


class CountingCollection:
    """Counts the unit documents each aggregation's first ``$match`` selects (what a server would read)."""

    def __init__(self, collection: Any) -> None:
        self._collection = collection
        self.units_read: list[int] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._collection, name)

    def aggregate(self, pipeline: list[dict[str, Any]], **options: Any) -> Any:
        return CountingCursor(self, pipeline, options)


class CountingCursor:
    def __init__(self, counting: CountingCollection, pipeline: list[dict[str, Any]], options: Any) -> None:
        self._counting, self._pipeline, self._options = counting, pipeline, options

    async def to_list(self, length: int | None = None) -> list[Any]:
        collection = self._counting._collection
        self._counting.units_read.append(await collection.count_documents(self._pipeline[0]["$match"]))
        return await driver.aggregate_list(collection, self._pipeline, length, **self._options)


class CountingDatabase:
    def __init__(self, database: Any) -> None:
        self._database = database
        self.units = CountingCollection(database[UNITS])

    def __getitem__(self, name: str) -> Any:
        return self.units if name == UNITS else self._database[name]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._database, name)


async def seed_daily_sessions(database: Any, days: int) -> None:
    """One unit a day (a session), ten slices five minutes apart."""
    for day in range(days):
        start = T0 + timedelta(days=day)
        slices = [(f"d{day:03d}-s{n}", start + timedelta(minutes=5 * n), f"day {day}") for n in range(10)]
        await seed_unit(database, f"unit-{day:03d}", "c", slices)


async def test_the_first_page_reads_only_the_units_near_its_start(memory_db: Any) -> None:
    """Two months of sessions: the newest page touches the newest day's unit, not the history."""
    await seed_daily_sessions(memory_db, 60)
    counting = CountingDatabase(memory_db)

    page = await SliceQueries(counting).find(core_id="c", limit=5)

    assert [item.id for item in page.items] == [f"d059-s{n}" for n in range(9, 4, -1)]
    assert counting.units.units_read == [1]


async def test_a_deep_page_reads_only_the_units_near_its_cursor(memory_db: Any) -> None:
    await seed_daily_sessions(memory_db, 60)
    counting = CountingDatabase(memory_db)
    queries = SliceQueries(counting)
    after = None
    for _ in range(20):  # 20 pages of 10: back to day 40
        after = (await queries.find(core_id="c", limit=10, after=after)).next_cursor
    counting.units.units_read.clear()

    page = await queries.find(core_id="c", limit=10, after=after)

    assert {item.unit_id for item in page.items} == {"unit-039"}
    assert max(counting.units.units_read) <= 2


# -- the pages equal the whole matching set, sorted --------------------------------------------------------

SPREADS = st.sampled_from(
    [timedelta(seconds=1), timedelta(minutes=7), timedelta(hours=5), timedelta(days=40), timedelta(days=3000)]
)


@st.composite
def layouts(draw: st.DrawFn) -> list[tuple[str, str, list[tuple[str, datetime, str]]]]:
    """Units of two cores whose slices sit at random offsets at one of several scales, with ties."""
    spread = draw(SPREADS)
    units = []
    for number in range(draw(st.integers(1, 6))):
        offsets = draw(st.lists(st.integers(-50, 50), max_size=12))
        slices = [
            (f"u{number}-s{n:02d}", T0 + offset * spread, draw(st.sampled_from(["alpha", "beta"])))
            for n, offset in enumerate(offsets)
        ]
        units.append((f"u{number}", draw(st.sampled_from(["c", "d"])), slices))
    return units


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    layout=layouts(),
    order=st.sampled_from(["asc", "desc"]),
    limit=st.integers(1, 9),
    core=st.sampled_from([None, "c"]),
    text=st.sampled_from([None, "alp"]),
    edges=st.tuples(st.sampled_from([None, -20, 0, 10]), st.sampled_from([None, -5, 5, 30])),
    scale=SPREADS,
)
async def test_a_walk_returns_every_matching_slice_once_in_order_whatever_the_time_layout(
    layout: list[tuple[str, str, list[tuple[str, datetime, str]]]],
    order: str,
    limit: int,
    core: str | None,
    text: str | None,
    edges: tuple[int | None, int | None],
    scale: timedelta,
) -> None:
    database = await init_repository(in_memory_database(f"windows_{uuid.uuid4().hex[:8]}"))
    for unit_id, core_id, slices in layout:
        await seed_unit(database, unit_id, core_id, slices)
    created_from = None if edges[0] is None else T0 + edges[0] * scale
    created_to = None if edges[1] is None else T0 + edges[1] * scale
    if created_from is not None and created_to is not None and created_from > created_to:
        created_from, created_to = created_to, created_from
    expected = sorted(
        (
            (
                created_at,
                2 * place,
                slice_id,
                unit_id,
            )  # a tie of times is in the order of the unit's messages
            for unit_id, core_id, slices in layout
            for place, (slice_id, created_at, summary) in enumerate(slices)
            if (core is None or core_id == core)
            and (text is None or text in summary)
            and (created_from is None or created_at >= created_from)
            and (created_to is None or created_at < created_to)
        ),
        reverse=order == "desc",
    )
    queries = SliceQueries(database)
    walked: list[tuple[datetime | None, int | None, str, str]] = []
    after = None
    while True:
        page = await queries.find(
            core_id=core,
            text=text,
            created_from=created_from,
            created_to=created_to,
            order=order,  # type: ignore[arg-type]
            limit=limit,
            after=after,
        )
        walked += [(item.created_at, item.start_index, item.id, item.unit_id) for item in page.items]
        after = page.next_cursor
        if after is None:
            break
    assert walked == expected


@pytest.mark.parametrize("order", ["asc", "desc"])
async def test_a_slice_stamped_far_in_the_future_still_comes_first_or_last(
    memory_db: Any, order: str
) -> None:
    await seed_unit(
        memory_db, "u", "c", [("now", T0, "x"), ("future", datetime(9999, 12, 31, tzinfo=UTC), "x")]
    )
    await seed_unit(memory_db, "old", "c", [("ancient", datetime(1, 1, 2, tzinfo=UTC), "x")])

    page = await SliceQueries(memory_db).find(core_id="c", order=order, limit=10)  # type: ignore[arg-type]

    ids = [item.id for item in page.items]
    assert ids == (["future", "now", "ancient"] if order == "desc" else ["ancient", "now", "future"])


@pytest.mark.parametrize("limit", [1, 2, 10])
@pytest.mark.parametrize("order", ["asc", "desc"])
async def test_slices_on_and_next_to_a_window_edge_come_once(memory_db: Any, order: str, limit: int) -> None:
    tick = timedelta(milliseconds=1)
    edge = T0 - INITIAL_WIDTH if order == "desc" else T0 + INITIAL_WIDTH
    times = [T0, edge - tick, edge, edge + tick]
    await seed_unit(memory_db, "u", "c", [(f"s{n}", moment, "x") for n, moment in enumerate(times)])
    queries = SliceQueries(memory_db)
    walked: list[str] = []
    after = None
    while True:
        page = await queries.find(core_id="c", order=order, limit=limit, after=after)  # type: ignore[arg-type]
        walked += [item.id for item in page.items]
        if (after := page.next_cursor) is None:
            break

    expected = sorted(range(len(times)), key=lambda n: times[n], reverse=order == "desc")
    assert walked == [f"s{n}" for n in expected]


# -- anchors ------------------------------------------------------------------------------------------------


async def test_a_repeated_first_page_asks_where_its_slices_start_once(racy_db: Any) -> None:
    await seed_daily_sessions(racy_db, 3)
    queries = SliceQueries(racy_db)
    collection = racy_db[UNITS]
    collection.calls.clear()

    first = await queries.find(core_id="c", limit=5)
    again = await queries.find(core_id="c", limit=5)

    assert collection.calls.count("find_one") == 1
    assert again == first


async def test_slices_appended_after_the_anchor_was_taken_still_come_first(memory_db: Any) -> None:
    await seed_daily_sessions(memory_db, 3)
    queries = SliceQueries(memory_db)
    await queries.find(core_id="c", limit=5)  # remembers where the slices start
    later = T0 + timedelta(days=30)
    await seed_unit(memory_db, "unit-later", "c", [("later", later, "a month on")])

    page = await queries.find(core_id="c", limit=2)

    assert [item.id for item in page.items] == ["later", "d002-s9"]


def test_a_remembered_anchor_is_asked_again_once_it_is_old() -> None:
    now = [0.0]
    anchors = Anchors(ttl_s=60, clock=lambda: now[0])
    anchors.remember("c", T0)
    now[0] = 59.9
    assert anchors.get("c") == (True, T0)
    now[0] = 60.0
    assert anchors.get("c") == (False, None)


def test_a_scope_without_dated_slices_is_remembered_as_such() -> None:
    anchors = Anchors()
    anchors.remember("empty", None)
    assert anchors.get("empty") == (True, None)
    assert anchors.get("unknown") == (False, None)


async def test_a_page_of_one_unit_is_a_single_query(racy_db: Any) -> None:
    await seed_daily_sessions(racy_db, 3)
    collection = racy_db[UNITS]
    collection.calls.clear()

    page = await SliceQueries(racy_db).find(unit_id="unit-001", limit=20)

    assert len(page.items) == 10 and collection.calls == ["aggregate"]
