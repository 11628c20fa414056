"""On a real MongoDB (``MONGODB_URI``) every admin query shape is served by an index: ``explain`` shows no
``COLLSCAN`` for finding slices by core and time, by unit, and by time alone (and for get/stats/check)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from partner_repo import MemoryUnitRepository, Message, close_database, init_repository
from partner_repo.admin._cursor import SliceKey
from partner_repo.admin._filters import SliceFilter
from partner_repo.admin._windows import ALL_TIME, Window
from partner_repo.mongo import UNITS
from tests.conftest import real_database

pytestmark = pytest.mark.integration

T0 = datetime(2024, 5, 1, 9, 0, tzinfo=UTC)
INDEX_STAGES = ("IXSCAN", "IDHACK", "EXPRESS_IXSCAN", "EXPRESS_CLUSTERED_IXSCAN")


@pytest.fixture
async def populated() -> AsyncIterator[Any]:
    """Enough units over several cores that a collection scan would be a plausible plan."""
    database = await real_database()
    await init_repository(database)
    units = MemoryUnitRepository(database)
    try:
        for n in range(60):
            await units.append(
                f"unit-{n}",
                [Message(role="user", content=f"message {n}")],
                f"summary {n}",
                core_id=f"core-{n % 6}",
                created_at=T0 + timedelta(minutes=n),
            )
        yield database
    finally:
        await database.client.drop_database(database.name)
        await close_database(database)


async def explain_aggregate(database: Any, pipeline: list[dict[str, Any]]) -> dict[str, Any]:
    command = {
        "explain": {"aggregate": UNITS, "pipeline": pipeline, "cursor": {}},
        "verbosity": "queryPlanner",
    }
    return dict(await database.command(command))


async def explain_find(database: Any, query: dict[str, Any], **options: Any) -> dict[str, Any]:
    command = {"explain": {"find": UNITS, "filter": query, **options}, "verbosity": "queryPlanner"}
    return dict(await database.command(command))


def stages(plan: Any) -> list[str]:
    """Every ``stage`` named anywhere in an explain document (classic and slot-based engine layouts)."""
    found: list[str] = []
    if isinstance(plan, dict):
        for key, value in plan.items():
            if key == "stage" and isinstance(value, str):
                found.append(value)
            elif key != "rejectedPlans":
                found += stages(value)
    elif isinstance(plan, list):
        for item in plan:
            found += stages(item)
    return found


def assert_index_served(plan: dict[str, Any]) -> None:
    named = stages(plan)
    assert "COLLSCAN" not in named, json.dumps(plan, default=str)[:2000]
    assert any(stage in INDEX_STAGES for stage in named), named


def find_pipeline(**filters: Any) -> list[dict[str, Any]]:
    query = SliceFilter.of(
        filters.get("core_id"),
        filters.get("unit_id"),
        filters.get("created_from"),
        filters.get("created_to"),
        filters.get("text"),
        filters.get("order", "desc"),
    )
    after = filters.get("after")
    return [*query.pipeline(after, filters.get("window", ALL_TIME)), query.sort(), {"$limit": 51}]


CURSOR = SliceKey(created_at=T0 + timedelta(minutes=30), slice_id="x", unit_id="unit-30")
NEWEST_HOUR = Window(start=T0 + timedelta(minutes=10), end=None)
OLDEST_HOUR = Window(start=None, end=T0 + timedelta(minutes=50))


@pytest.mark.parametrize(
    "filters",
    [
        {"core_id": "core-1", "created_from": T0, "created_to": T0 + timedelta(hours=1)},
        {"core_id": "core-1", "created_from": T0, "after": CURSOR},
        {"core_id": "core-1"},
        {"unit_id": "unit-7"},
        {"unit_id": "unit-7", "created_from": T0, "after": CURSOR},
        {"created_from": T0, "created_to": T0 + timedelta(minutes=20)},
        {"created_to": T0 + timedelta(minutes=20), "order": "asc", "after": CURSOR},
        {},
        {"text": "summary 1"},
        {"core_id": "core-1", "window": NEWEST_HOUR},
        {"core_id": "core-1", "after": CURSOR, "window": Window(start=T0, end=T0 + timedelta(minutes=20))},
        {"order": "asc", "window": OLDEST_HOUR},
    ],
    ids=[
        "core-and-time",
        "core-and-time-next-page",
        "core",
        "unit",
        "unit-next-page",
        "time",
        "time-ascending-next-page",
        "everything",
        "text",
        "core-first-window",
        "core-next-page-second-window",
        "everything-ascending-first-window",
    ],
)
async def test_find_shapes_are_served_by_an_index(populated: Any, filters: dict[str, Any]) -> None:
    assert_index_served(await explain_aggregate(populated, find_pipeline(**filters)))


@pytest.mark.parametrize("scope", [{"core_id": "core-1"}, {}], ids=["core", "all"])  # a unit: one document
@pytest.mark.parametrize("direction", [-1, 1], ids=["newest", "oldest"])
async def test_a_page_finds_where_its_slices_start_in_index_order_without_sorting(
    populated: Any, scope: dict[str, Any], direction: int
) -> None:
    plan = await explain_find(populated, scope, sort={"slices.created_at": direction}, limit=1)

    assert_index_served(plan)
    assert "SORT" not in stages(plan), json.dumps(plan, default=str)[:2000]


async def test_get_finds_the_slice_through_the_slice_id_index(populated: Any) -> None:
    unit = await MemoryUnitRepository(populated).get("unit-3")
    assert unit is not None
    slice_id = unit.complete_slices()[0].id

    assert_index_served(await explain_find(populated, {"slice_ids": slice_id}))


async def test_stats_of_one_core_and_the_recent_days_use_indexes(populated: Any) -> None:
    by_core = [{"$match": {"core_id": "core-2"}}, {"$group": {"_id": None, "units": {"$sum": 1}}}]
    recent = [
        {"$match": {"slices": {"$elemMatch": {"created_at": {"$type": "date", "$gte": T0}}}}},
        {"$unwind": "$slices"},
    ]

    assert_index_served(await explain_aggregate(populated, by_core))
    assert_index_served(await explain_aggregate(populated, recent))


async def test_the_check_walk_reads_through_the_id_index(populated: Any) -> None:
    plan = await explain_find(
        populated, {"_id": {"$type": "string", "$gt": "unit-10"}}, sort={"_id": 1}, limit=100
    )

    assert_index_served(plan)
