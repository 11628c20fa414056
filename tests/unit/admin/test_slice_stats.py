"""SliceQueries.stats, and the maxTimeMS every admin query carries."""

from __future__ import annotations

from datetime import date, timedelta
from typing import Any

import pytest

from partner_repo import MAX_DOCUMENT_BYTES, InvalidInput, SliceQueries, in_memory_database
from partner_repo.mongo import UNITS
from tests.unit.admin.support import T0, insert_raw, raw_unit, seed_unit

NOW = T0 + timedelta(hours=3)


@pytest.fixture
async def history(database: Any) -> Any:
    """Slices today, a week ago, 29 days ago (the oldest day counted) and 30 days ago (not counted)."""
    await seed_unit(
        database,
        "big",
        "alice",
        [
            ("today-1", T0, "a" * 2000),
            ("today-2", T0 + timedelta(hours=1), "b"),
            ("week", T0 - timedelta(days=7), "c"),
        ],
    )
    await seed_unit(
        database,
        "old",
        "alice",
        [("d29", T0 - timedelta(days=29), "d"), ("d30", T0 - timedelta(days=30), "e")],
    )
    await seed_unit(database, "bobs", "bob", [("bob-today", T0, "f")], messages_per_slice=3)
    return database


async def test_stats_count_units_slices_and_messages(history: Any) -> None:
    stats = await SliceQueries(history).stats(now=NOW)

    assert (stats.units, stats.slices, stats.messages) == (3, 6, 2 * 5 + 3)
    assert stats.core_id is None and stats.generated_at == NOW


async def test_stats_for_one_core_count_only_its_units(history: Any) -> None:
    stats = await SliceQueries(history).stats("alice", now=NOW)

    assert (stats.core_id, stats.units, stats.slices, stats.messages) == ("alice", 2, 5, 10)
    assert [u.unit_id for u in stats.largest_units] == ["big", "old"]


async def test_slices_per_day_lists_the_last_30_days_oldest_first_with_zero_days(history: Any) -> None:
    days = (await SliceQueries(history).stats(now=NOW)).slices_per_day

    assert len(days) == 30
    assert days[0].day == date(2024, 2, 1) and days[-1].day == date(2024, 3, 1)
    counts = {d.day: d.slices for d in days}
    assert counts[date(2024, 3, 1)] == 3
    assert counts[date(2024, 2, 23)] == 1
    assert counts[date(2024, 2, 1)] == 1  # 29 days before today (2024 is a leap year)
    assert sum(counts.values()) == 5  # the slice 30 days ago falls outside the window


async def test_largest_units_are_ranked_by_stored_size_with_their_share_of_16_mib(history: Any) -> None:
    largest = (await SliceQueries(history).stats(now=NOW, largest=2)).largest_units

    assert [u.unit_id for u in largest] == ["big", "old"]
    stored = await history[UNITS].find_one({"_id": "big"})
    assert largest[0].size_bytes == stored["size_bytes"]
    assert largest[0].share_of_limit == pytest.approx(stored["size_bytes"] / MAX_DOCUMENT_BYTES)
    assert largest[0].message_count == 6 and largest[0].core_id == "alice"


async def test_stats_of_an_empty_database_are_zero(database: Any) -> None:
    stats = await SliceQueries(database).stats(now=NOW)

    assert (stats.units, stats.slices, stats.messages, stats.largest_units) == (0, 0, 0, [])
    assert all(d.slices == 0 for d in stats.slices_per_day)


async def test_stats_count_the_messages_of_units_written_by_other_tools(database: Any) -> None:
    await insert_raw(database, raw_unit("raw", slices=[{"id": "r1", "created_at": T0, "summary": "s"}]))

    stats = await SliceQueries(database).stats(now=NOW)

    assert (stats.units, stats.slices, stats.messages) == (1, 1, 2)
    assert stats.largest_units[0].size_bytes == 0  # no size_bytes until repair stores one


@pytest.mark.parametrize("argument", [{"days": 0}, {"largest": -1}, {"days": "7"}])
async def test_stats_refuse_bad_arguments(database: Any, argument: dict[str, Any]) -> None:
    with pytest.raises(InvalidInput):
        await SliceQueries(database).stats(**argument)


# -- maxTimeMS ---------------------------------------------------------------------------------------------


class RecordingCollection:
    """Records the options of every aggregate/find/find_one call made on the wrapped collection."""

    def __init__(self, collection: Any, calls: list[tuple[str, dict[str, Any]]]) -> None:
        self._collection = collection
        self._calls = calls

    def aggregate(self, pipeline: Any, **options: Any) -> Any:
        self._calls.append(("aggregate", options))
        return self._collection.aggregate(pipeline, **options)

    def find_one(self, *args: Any, **options: Any) -> Any:
        self._calls.append(("find_one", options))
        return self._collection.find_one(*args, **options)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._collection, name)


class RecordingDatabase:
    def __init__(self, database: Any) -> None:
        self._database = database
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.name = database.name

    def __getitem__(self, name: str) -> Any:
        collection = self._database[name]
        return RecordingCollection(collection, self.calls) if name == UNITS else collection


async def test_every_admin_query_carries_max_time_ms() -> None:
    database = in_memory_database("timed")
    await seed_unit(database, "u", "c", [("s", T0, "x")])
    recorded = RecordingDatabase(database)
    queries = SliceQueries(recorded, max_time_ms=1234)

    await queries.find(text="x")
    await queries.count()
    await queries.stats(now=NOW)
    await queries.unit("u")
    await queries.get("s")

    assert len(recorded.calls) >= 8
    for kind, options in recorded.calls:
        assert options.get("maxTimeMS" if kind == "aggregate" else "max_time_ms") == 1234, kind


def test_max_time_ms_must_be_positive() -> None:
    with pytest.raises(InvalidInput, match="max_time_ms"):
        SliceQueries(in_memory_database("x"), max_time_ms=0)
