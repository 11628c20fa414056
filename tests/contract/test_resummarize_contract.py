"""On a real MongoDB (``MONGODB_URI``): the search for placeholder summaries is served by the partial
``unsummarized`` index (of every core: no other index could serve it), and a replacement through the
positional ``$`` changes exactly the matched slice, once, however many runs race for it."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from partner_repo import (
    SUMMARY_ON_EXCEPTION,
    MemoryUnitRepository,
    Message,
    UnitChecker,
    close_database,
    init_repository,
)
from partner_repo.mongo import UNITS, UNSUMMARIZED_INDEX
from partner_repo.units._summaries import UnitSummaries, unsummarized_query
from tests.conftest import real_database

pytestmark = pytest.mark.integration

T0 = datetime(2024, 5, 1, 9, 0, tzinfo=UTC)
INDEX_STAGES = ("IXSCAN", "EXPRESS_IXSCAN")


@pytest.fixture
async def populated() -> AsyncIterator[Any]:
    """Units over several cores, one slice in ten a placeholder: a scan would be a plausible plan."""
    database = await real_database()
    await init_repository(database)
    units = MemoryUnitRepository(database)
    try:
        for n in range(60):
            placeholder = n % 10 == 3
            await units.append(
                f"unit-{n % 20}",
                [Message(role="user", content=f"message {n}")],
                SUMMARY_ON_EXCEPTION if placeholder else f"summary {n}",
                core_id=f"core-{n % 20 % 4}",
                created_at=T0 + timedelta(minutes=n),
                unsummarized=placeholder,
            )
        yield database
    finally:
        await database.client.drop_database(database.name)
        await close_database(database)


def stages(plan: Any) -> list[str]:
    found: list[str] = []
    if isinstance(plan, dict):
        if isinstance(plan.get("stage"), str):
            found.append(plan["stage"])
        for value in plan.values():
            found.extend(stages(value))
    elif isinstance(plan, list):
        for item in plan:
            found.extend(stages(item))
    return found


async def winning_plan(database: Any, query: dict[str, Any]) -> dict[str, Any]:
    command = {"explain": {"find": UNITS, "filter": query}, "verbosity": "queryPlanner"}
    explained = dict(await database.command(command))
    return dict(explained["queryPlanner"]["winningPlan"])


async def test_the_search_of_every_core_is_served_by_the_partial_index(populated: Any) -> None:
    plan = await winning_plan(populated, unsummarized_query(None))

    assert "COLLSCAN" not in stages(plan), json.dumps(plan, default=str)[:2000]
    assert UNSUMMARIZED_INDEX in json.dumps(plan, default=str)


async def test_the_search_of_one_core_is_served_by_an_index(populated: Any) -> None:
    plan = await winning_plan(populated, unsummarized_query("core-3"))

    named = stages(plan)
    assert "COLLSCAN" not in named and any(stage in INDEX_STAGES for stage in named), named


async def test_racing_replacements_change_each_slice_once_and_keep_the_unit_exact(populated: Any) -> None:
    found, more = await UnitSummaries(populated).unsummarized(None, 100)
    assert len(found) == 6 and not more

    outcomes = await asyncio.gather(
        *(
            UnitSummaries(populated).replace(piece.unit_id, piece.slice_id, f"{runner}: {piece.slice_id}")
            for piece in found
            for runner in ("one", "other")
        )
    )

    assert sum(outcome is not None for outcome in outcomes) == len(found)
    assert (await UnitSummaries(populated).unsummarized(None, 100)) == ([], False)
    for piece in found:
        stored = await MemoryUnitRepository(populated).get_slice(piece.unit_id, piece.slice_id)
        assert stored is not None and stored.revision == 1 and not stored.unsummarized
        assert stored.summary.endswith(piece.slice_id)
    assert (await UnitChecker(populated).check()).ok
