"""On a real MongoDB every aggregation of a recall starts from an index: the lookup from the vocabulary's
``_id`` (or its words index), the candidates from the core's multikey indexes, the messages from the units'
``_id``. Each aggregation the library sends is captured by command monitoring and asked again as ``explain``,
so the test checks what is sent, not a copy of it. SecantusDB plans them as collection scans (the one gap
list, ``tests/emulator_gaps.py``); the GitHub workflow runs this against MongoDB."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from partner_repo import close_database, init_repository
from tests.conftest import real_database
from tests.contract.test_admin_query_plans import assert_index_served
from tests.contract.test_causal_pages_contract import Aggregates
from tests.recall_support import CONVERSATION, History

pytestmark = pytest.mark.integration


@pytest.fixture
async def recorded() -> AsyncIterator[tuple[Any, Aggregates]]:
    aggregations = Aggregates()
    database = await real_database(event_listeners=[aggregations])
    await init_repository(database)
    try:
        await History(database).rolls("agent", CONVERSATION)
        aggregations.sent.clear()
        await (
            History(database)
            .recall(search=False)
            .recall("agent", "Which whales did we see near the lighthouse?")
        )
        yield database, aggregations
    finally:
        await database.client.drop_database(database.name)
        await close_database(database)


async def test_every_aggregation_of_a_recall_starts_from_an_index(recorded: tuple[Any, Aggregates]) -> None:
    database, aggregations = recorded
    assert [command["aggregate"] for command in aggregations.sent] == [
        "recall_vocabulary",
        "recall_slices",
        "memory_units",
    ]
    for command in aggregations.sent:
        explain = {"aggregate": command["aggregate"], "pipeline": command["pipeline"], "cursor": {}}
        assert_index_served(dict(await database.command({"explain": explain, "verbosity": "queryPlanner"})))
