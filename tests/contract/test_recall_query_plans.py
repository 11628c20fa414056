"""On a real MongoDB every read of a recall and of an index write starts from an index: each command's filter
names the core and fields of one of ``recall_index``'s indexes (the messages are read from the units by
``_id``). Each read the library sends is captured by command monitoring and asked again as ``explain``, so
the test checks what is sent, not a copy of it. Where SecantusDB plans one as a collection scan, the one gap
list says so (``tests/emulator_gaps.py``); the GitHub workflow runs this against MongoDB."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from pymongo import monitoring

from partner_repo import close_database, init_repository
from tests.conftest import real_database
from tests.contract.test_admin_query_plans import assert_index_served, stages
from tests.recall_support import CONVERSATION, PROJECT, History, concepts

pytestmark = pytest.mark.integration

READS = ("find", "aggregate")
DRIVER_FIELDS = frozenset({"$db", "lsid", "$clusterTime", "$readPreference", "readConcern", "txnNumber"})


class Reads(monitoring.CommandListener):
    """Every find and aggregate the client sends."""

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []

    def started(self, event: monitoring.CommandStartedEvent) -> None:
        if event.command_name in READS:
            self.sent.append({k: v for k, v in event.command.items() if k not in DRIVER_FIELDS})

    def succeeded(self, event: monitoring.CommandSucceededEvent) -> None:
        pass

    def failed(self, event: monitoring.CommandFailedEvent) -> None:
        pass


@pytest.fixture
async def recorded() -> AsyncIterator[tuple[Any, Reads, History]]:
    reads = Reads()
    database = await real_database(event_listeners=[reads])
    await init_repository(database)
    try:
        history = History(database)
        await history.rolls("agent", CONVERSATION[:-1])
        reads.sent.clear()
        yield database, reads, history
    finally:
        await database.client.drop_database(database.name)
        await close_database(database)


async def explained(database: Any, command: dict[str, Any]) -> dict[str, Any]:
    if "aggregate" in command:
        command = {**command, "cursor": {}}
    return dict(await database.command({"explain": command, "verbosity": "queryPlanner"}))


async def test_every_read_of_a_recall_starts_from_an_index(recorded: tuple[Any, Reads, History]) -> None:
    database, reads, history = recorded
    query = "Which whales did we see near the lighthouse yesterday? 杭州"  # text, topic, date channels

    await history.recall(search=False).recall("agent", query)

    assert {command.get("find") or command.get("aggregate") for command in reads.sent} == {
        "recall_index",
        "memory_units",
    }
    for command in reads.sent:
        assert_index_served(await explained(database, command))


async def test_every_read_of_an_index_write_starts_from_an_index(
    recorded: tuple[Any, Reads, History],
) -> None:
    database, reads, history = recorded

    await history.rolls("agent", [PROJECT])  # rolls read the units; the index write reads recall_index

    indexing = [c for c in reads.sent if (c.get("find") or c.get("aggregate")) == "recall_index"]
    assert len(indexing) == 2  # the slice and its core, then the core's last slices
    for command in indexing:
        assert_index_served(await explained(database, command))


async def test_the_topic_tree_is_read_from_an_index(recorded: tuple[Any, Reads, History]) -> None:
    """Every node of the core, a node that lost its depth or kind included, by its id's prefix on the
    ``{core_id, _id}`` index (the documented shard key's): never a scan of the core's slices."""
    database, reads, history = recorded

    await history.recall(search=False).topics("agent")

    [command] = reads.sent
    assert_index_served(await explained(database, command))


async def test_a_recall_with_vectors_reads_the_codes_from_their_index_alone() -> None:
    """The local vector search reads every code of the core: from ``core_vectors`` alone (a covered plan,
    no document fetched), so what it costs grows with the index's keys, never with the slices' documents;
    its other reads (the nearest with their vectors, the message vectors) start from an index too."""
    reads = Reads()
    database = await real_database(event_listeners=[reads])
    await init_repository(database)
    try:
        history = History(database, embedder=concepts)
        await history.rolls("agent", CONVERSATION)
        reads.sent.clear()

        await history.recall(search=False, embedder=concepts).recall("agent", "a pup and a hound")

        [codes] = [c for c in reads.sent if "vtag" in str(c.get("pipeline", ""))]
        plan = await explained(database, codes)
        assert "IXSCAN" in stages(plan) and "FETCH" not in stages(plan), stages(plan)
        for command in reads.sent:
            assert_index_served(await explained(database, command))
    finally:
        await database.client.drop_database(database.name)
        await close_database(database)
