"""Shard-ready, proven by the commands sent: every command the library sends during its main flows, recorded
with PyMongo's command monitoring on a server, is checked against the sharded-cluster routing rules for the
documented shard keys (``tests/routing_rules.py``).

- the per-turn path (record, roll, append, tail, head, leases, a caller's own slice id) is targeted to one
  shard, every command of it;
- a broadcast comes only from the listed admin and batch flows (the listener's change stream, admin
  queries, check and repair, forget, migrate);
- nothing is sent that a sharded cluster refuses;
- ``check`` finds shared slice ids with one aggregation, whatever the number of units.

The server needs no shards for this: routing is decided by the command alone. On a real cluster the GitHub
workflow's sharded job checks the per-turn path with ``explain`` (scripts/sharded-cluster).
"""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from pymongo import monitoring

from partner_repo import (
    AfterRollingRegistry,
    DeadLetterRepository,
    MemoryCoreRepository,
    MemoryEraser,
    MemoryUnitRepository,
    Message,
    RollingConfig,
    RollingListener,
    RollingResult,
    RollingService,
    SliceQueries,
    UnitChecker,
    close_database,
    init_repository,
    run_migrations,
)
from partner_repo.listener.state import listener_status
from partner_repo.mongo import SHARD_KEYS, Topology, driver
from partner_repo.recall import MemoryRecall, RecallIndexer
from tests.conftest import requires_mongodb
from tests.recall_support import concepts
from tests.routing_rules import TARGETED, Route, route

pytestmark = pytest.mark.integration

PER_TURN = frozenset({"turns"})
BROADCASTS_ALLOWED = frozenset({"listener", "admin", "check", "forget", "migrate"})
CORES = ("agent-a", "agent-b", "agent-c")
TURNS = 9


class Recorder(monitoring.CommandListener):
    """Every command started, with the flow it was sent in (flows run one after another)."""

    def __init__(self) -> None:
        self.flow = "setup"
        self.sent: list[tuple[str, dict[str, Any]]] = []

    def started(self, event: monitoring.CommandStartedEvent) -> None:
        self.sent.append((self.flow, dict(event.command)))

    def succeeded(self, event: monitoring.CommandSucceededEvent) -> None:
        pass

    def failed(self, event: monitoring.CommandFailedEvent) -> None:
        pass

    @contextmanager
    def during(self, flow: str) -> Iterator[None]:
        self.flow = flow
        try:
            yield
        finally:
            self.flow = "between"

    def routes(self, flows: frozenset[str] | None = None) -> list[tuple[str, Route, dict[str, Any]]]:
        return [(flow, route(c), c) for flow, c in self.sent if flows is None or flow in flows]


class Collect:
    name = "collect"

    def __init__(self) -> None:
        self.received: asyncio.Queue[RollingResult] = asyncio.Queue()
        self.results: list[RollingResult] = []

    async def consume(self, result: RollingResult) -> None:
        self.results.append(result)
        await self.received.put(result)


async def summarize(messages: list[Message]) -> str:
    return f"{len(messages)} messages"


async def as_documented(database: Any) -> Topology:
    """The topology of the documented cluster (``SHARD_KEYS`` sharded, through a mongos) for index management
    and migrations, whatever the test server is: what they send is what a sharded cluster would get."""
    return Topology(mongos=True, shard_keys=SHARD_KEYS)


@pytest.fixture(scope="module")
def recorded() -> Recorder:
    recorder = Recorder()
    with pytest.MonkeyPatch.context() as patch:
        for module in ("partner_repo.mongo", "partner_repo.mongo._topology", "partner_repo.mongo._database"):
            patch.setattr(f"{module}.topology_of", as_documented)
        asyncio.run(_main_flows(recorder))
    kinds = Counter((flow, r.kind) for flow, r, _ in recorder.routes())
    print("routing:", ", ".join(f"{flow}/{kind} {n}" for (flow, kind), n in sorted(kinds.items())))
    return recorder


async def _main_flows(recorder: Recorder) -> None:
    client: Any = driver.new_client(
        requires_mongodb(), tz_aware=True, serverSelectionTimeoutMS=5000, event_listeners=[recorder]
    )
    name = f"partner_repo_routing_{uuid.uuid4().hex[:10]}"
    database = client[name]
    try:
        await _flows(recorder, database, client)
    finally:
        for dropped in (name, f"{name}_migrated"):
            await client.drop_database(dropped)
        await close_database(database)


async def _flows(recorder: Recorder, database: Any, client: Any) -> None:
    with recorder.during("connect"):
        await init_repository(database)
    consumer = Collect()
    rolling = RollingService(database, summarize, RollingConfig(trigger_limit=4, retain_divisor=2))
    units = MemoryUnitRepository(database)
    with recorder.during("turns"):
        rolls = 0
        for turn in range(TURNS):
            for core in CORES:
                said = [
                    Message(role="user", content=f"{core} {turn}"),
                    Message(role="assistant", content="ok"),
                ]
                rolls += await rolling.record_and_roll(core, said) is not None
        session = await MemoryCoreRepository(database).session_id(CORES[0])
        await units.get(session)
        await units.tail_messages(session, 3)
        head = await units.head(session)
        assert head is not None and head.last_slice is not None and head.last_slice.id is not None
        await units.slice_messages(session, head.last_slice.id)
        for retry in ("first", "again"):  # a caller's own slice id, claimed; the retry finds its claim
            said = [Message(role="user", content=retry)]
            await units.append("own-ids", said, "s", core_id="imports", slice_id="own-1")
    with recorder.during("listener"):
        async with RollingListener(database, AfterRollingRegistry([consumer]), poll_interval=0.05):
            for _ in range(rolls + 1):  # every roll, and the unit of own ids
                await asyncio.wait_for(consumer.received.get(), timeout=30)
    await _recall_flows(recorder, database, consumer.results)
    with recorder.during("admin"):
        slices = SliceQueries(database)
        await slices.find(core_id=CORES[0])
        await slices.count(core_id=CORES[1])
        await slices.stats()
        await units.list_units(CORES[2])
        await listener_status(database)
        await DeadLetterRepository(database).list()
    with recorder.during("check"):
        assert (await UnitChecker(database, batch_units=2).check()).ok
        assert (await UnitChecker(database, batch_units=2).repair()).ok
    with recorder.during("forget"):
        await MemoryEraser(database).forget(CORES[2])
    with recorder.during("migrate"):
        await run_migrations(client[f"{database.name}_migrated"])


async def _recall_flows(recorder: Recorder, database: Any, rolled: list[RollingResult]) -> None:
    """Every roll indexed with vectors (what ``listen --recall --embedder`` does) and one core's vectors
    embedded again (``recall reindex --core``), then recalls of each kind of query (with the vector
    channel's code scan, rescoring and message-vector reads)."""
    with recorder.during("recall-index"):
        indexer = RecallIndexer(database, embedder=concepts)
        for result in rolled:
            await indexer.consume(result)
        await indexer.reindex(CORES[0])  # a core's: without one it lists the cores (a distinct, a broadcast)
    with recorder.during("recall"):
        recall = MemoryRecall(database, search=False, embedder=concepts)
        for query in (f"{CORES[0]} 3", "ok yesterday", ""):
            await recall.recall(CORES[0], query)
        await recall.topics(CORES[1])


def test_every_command_of_an_index_write_and_of_a_recall_goes_to_one_shard(recorded: Recorder) -> None:
    """The recall index's commands each select one core (``{core_id: 1, _id: 1}``: one shard); the
    messages are read from the units by ``_id``, each unit on its shard."""
    sent = recorded.routes(frozenset({"recall-index", "recall"}))
    by_unit_ids = {("some", "memory_units")}
    off_target = [
        (r.kind, r.collection, c)
        for _, r, c in sent
        if r.kind not in TARGETED and (r.kind, r.collection) not in by_unit_ids
    ]

    assert off_target == []
    assert {r.collection for _, r, _ in sent} == {"recall_index", "memory_units"}
    assert {flow for flow, _, _ in sent} == {"recall-index", "recall"}


def test_nothing_is_sent_that_a_sharded_cluster_refuses(recorded: Recorder) -> None:
    refused = [(flow, r.why, command) for flow, r, command in recorded.routes() if r.kind == "refused"]

    assert refused == []


def test_every_command_of_the_per_turn_path_goes_to_one_shard(recorded: Recorder) -> None:
    sent = recorded.routes(PER_TURN)
    off_target = [(r.kind, r.collection, c) for _, r, c in sent if r.kind not in TARGETED]

    assert len(sent) > 3 * TURNS and off_target == []
    assert {r.collection for _, r, _ in sent} >= {"memory_cores", "memory_units", "slice_id_claims"}


def test_broadcasts_come_only_from_the_listed_admin_and_batch_flows(recorded: Recorder) -> None:
    broadcasts = Counter(flow for flow, r, _ in recorded.routes() if r.kind in {"some", "all"})

    assert set(broadcasts) <= BROADCASTS_ALLOWED, broadcasts
    assert broadcasts["listener"] >= 1  # the change stream is opened on every shard


def test_check_finds_shared_slice_ids_with_one_aggregation_not_a_query_per_unit(recorded: Recorder) -> None:
    commands = [c for flow, c in recorded.sent if flow == "check" and c.get("find") == "memory_units"]
    commands += [c for flow, c in recorded.sent if flow == "check" and c.get("aggregate") == "memory_units"]
    by_slice_id = [c for c in commands if "slice_ids" in str(c.get("filter", {}))]
    shared = [c for c in commands if any("$unwind" in stage for stage in c.get("pipeline", []))]

    assert by_slice_id == []
    assert len(shared) == 2  # one for check, one for repair
