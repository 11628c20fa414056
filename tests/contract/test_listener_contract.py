"""The listener's guarantees, kept by every backend: in-memory (polling) always, and the real MongoDB named by
MONGODB_URI (its change stream, on the replica set docker compose starts) when set.

Change-stream deliveries arrive asynchronously, so these tests wait for the expected deliveries, then
``flush()`` and check that nothing more (no duplicate) arrived.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

import pytest

from partner_repo import (
    AfterRollingRegistry,
    Backoff,
    ListenerCheckpoints,
    MemoryCoreRepository,
    MemorySlice,
    MemoryUnit,
    MemoryUnitRepository,
    Message,
    RollingConfig,
    RollingListener,
    RollingResult,
    RollingService,
    close_database,
    init_repository,
)
from partner_repo.listener.state import listener_status
from partner_repo.mongo import driver
from tests import conftest
from tests.conftest import real_database

T0 = datetime(2024, 7, 1, 9, 0, tzinfo=UTC)
until = partial(conftest.until, within=15.0)  # a real replica set may take longer to deliver than the fakes
QUICK = Backoff(initial=0.01, maximum=0.05, jitter=0)


class Recorder:
    def __init__(self, name: str = "recorder", failing: set[str] | None = None) -> None:
        self.name = name
        self.failing = failing if failing is not None else set()
        self.results: list[RollingResult] = []

    async def consume(self, result: RollingResult) -> None:
        if result.slice_id in self.failing:
            raise RuntimeError(f"cannot take {result.slice_id}")
        self.results.append(result)

    @property
    def slice_ids(self) -> list[str]:
        return [r.slice_id for r in self.results]


def listener_for(database: Any, *consumers: Any, **options: Any) -> RollingListener:
    options.setdefault("poll_interval", 0.05)
    options.setdefault("backoff", QUICK)
    options.setdefault("max_attempts", 2)
    return RollingListener(database, AfterRollingRegistry(list(consumers)), **options)


async def summarize(batch: list[Message]) -> str:
    return f"{len(batch)} messages from {batch[0].content}"


async def roll(database: Any, service: RollingService, core_id: str, minute: int) -> RollingResult:
    """Record a turn in the core's window and roll it; returns what the roll produced."""
    now = T0 + timedelta(minutes=minute)
    turn = [Message(role="user", content=f"{core_id} {minute} q"), Message(role="assistant", content="a")]
    await MemoryCoreRepository(database).record(core_id, turn, at=now)
    result = await service.roll(core_id, now=now)
    assert result is not None
    return result


async def append(units: MemoryUnitRepository, unit_id: str, minute: int) -> MemorySlice:
    batch = [Message(role="user", content=f"{unit_id} {minute} {uuid.uuid4().hex[:6]}")]
    return await units.append(
        unit_id, batch, f"s{minute}", core_id="core", created_at=T0 + timedelta(minutes=minute)
    )


def messages(count: int, label: str) -> list[Message]:
    return [Message(role="user", content=f"{label} {n}") for n in range(count)]


async def settled(listener: RollingListener) -> None:
    """Let what is still on its way arrive (a change event) before checking that nothing is duplicated."""
    await asyncio.sleep(0.2)
    await listener.flush()


async def is_replica_set(database: Any) -> bool:
    try:
        hello = await database.command("hello")
    except NotImplementedError:  # the in-memory backend
        return False
    return "setName" in hello


# -- every backend ------------------------------------------------------------------------------------------


async def test_rolls_of_two_services_are_delivered_once_each_in_order(database: Any) -> None:
    first, second = RollingService(database, summarize), RollingService(database, summarize)
    recorder = Recorder()
    async with listener_for(database, recorder) as listener:
        rolled = [await roll(database, first if n % 2 else second, "agent", n) for n in range(4)]
        rolled += [await roll(database, first, "other", 10), await roll(database, second, "other", 11)]
        await until(lambda: len(recorder.results) >= len(rolled))
        await settled(listener)
        expected = "change_stream" if await is_replica_set(database) else "polling"
        assert listener.source == expected

    assert sorted(recorder.slice_ids) == sorted(r.slice_id for r in rolled)
    for unit_id in {r.memory_unit.id for r in rolled}:
        assert [r for r in recorder.results if r.memory_unit.id == unit_id] == [
            r for r in rolled if r.memory_unit.id == unit_id
        ]


async def test_a_restart_delivers_exactly_the_rolls_made_while_stopped(database: Any) -> None:
    service = RollingService(database, summarize)
    recorder = Recorder()
    listener = listener_for(database, recorder)
    async with listener:
        await roll(database, service, "agent", 0)
        await until(lambda: len(recorder.results) == 1)
        await settled(listener)
    recorder.results.clear()
    while_stopped = [await roll(database, service, "agent", 1), await roll(database, service, "agent", 2)]

    async with listener:
        await until(lambda: len(recorder.results) >= 2)
        await settled(listener)

    assert recorder.slice_ids == [r.slice_id for r in while_stopped]


async def test_a_late_slice_with_an_older_created_at_is_delivered_after_the_others(database: Any) -> None:
    units = MemoryUnitRepository(database)
    recorder = Recorder()
    async with listener_for(database, recorder) as listener:
        pieces = [await append(units, "u1", 10), await append(units, "u1", 20)]
        await until(lambda: len(recorder.results) == 2)
        pieces.append(await append(units, "u1", 5))  # stored in the middle of the array
        await until(lambda: len(recorder.results) == 3)
        await settled(listener)

    assert recorder.slice_ids == [p.id for p in pieces]


async def test_a_failing_consumer_is_dead_lettered_without_holding_up_the_others_and_replays(
    database: Any,
) -> None:
    units = MemoryUnitRepository(database)
    broken, healthy = Recorder("broken"), Recorder("healthy")
    listener = listener_for(database, broken, healthy)
    async with listener:
        piece = await append(units, "u1", 1)
        broken.failing.add(piece.id or "")
        await until(lambda: healthy.slice_ids == [piece.id])
        await until(lambda: listener.lag().dead_lettered == 1)

    (letter,) = await listener.dead_letters()
    assert (letter.consumer, letter.slice_id, letter.attempts) == ("broken", piece.id, 2)
    broken.failing.clear()
    report = await listener.replay_dead_letters()
    assert [x.slice_id for x in report.delivered] == [piece.id]
    assert broken.slice_ids == [piece.id]


async def test_a_new_group_backfills_and_a_now_group_does_not(database: Any) -> None:
    units = MemoryUnitRepository(database)
    history = [await append(units, "u1", 1), await append(units, "u2", 2)]
    backfill, fresh = Recorder("backfill"), Recorder("fresh")
    async with (
        listener_for(database, backfill, group="backfill") as first,
        listener_for(database, fresh, group="fresh", start_from="now") as second,
    ):
        await until(lambda: len(backfill.results) == 2)
        new = await append(units, "u1", 3)
        await until(lambda: len(fresh.results) == 1 and len(backfill.results) == 3)
        await settled(first)
        await settled(second)

    assert sorted(backfill.slice_ids) == sorted([*(p.id or "" for p in history), new.id or ""])
    assert fresh.slice_ids == [new.id]


class Careful(Recorder):
    """Takes a little while per slice, and notes any two slices of one unit handed over at once."""

    def __init__(self) -> None:
        super().__init__("careful")
        self.busy: set[str] = set()
        self.overlaps: list[str] = []
        self.most_at_once = 0

    async def consume(self, result: RollingResult) -> None:
        unit_id = result.memory_unit.id
        if unit_id in self.busy:
            self.overlaps.append(unit_id)
        self.busy.add(unit_id)
        self.most_at_once = max(self.most_at_once, len(self.busy))
        try:
            await asyncio.sleep(0.02)
        finally:
            self.busy.discard(unit_id)
        await super().consume(result)


async def test_a_replaced_summary_reaches_every_group_again_as_a_revision(database: Any) -> None:
    async def down(batch: list[Message]) -> str:
        raise RuntimeError("model down")

    config = RollingConfig(summarize_attempts=1)
    placeholder = await roll(database, RollingService(database, down, config), "agent", 0)
    assert placeholder.unsummarized
    search, profile = Recorder("search"), Recorder("profile")
    async with (
        listener_for(database, search, group="search") as first,
        listener_for(database, profile, group="profile") as second,
    ):
        await until(lambda: len(search.results) == 1 and len(profile.results) == 1)
        report = await RollingService(database, summarize, config).resummarize()
        assert [r.revision for r in report.replaced] == [1]
        await until(lambda: len(search.results) == 2 and len(profile.results) == 2)
        await settled(first)
        await settled(second)

    for recorder in (search, profile):
        assert recorder.slice_ids == [placeholder.slice_id] * 2
        assert [(r.revision, r.is_revision, r.unsummarized) for r in recorder.results] == [
            (0, False, True),
            (1, True, False),
        ]
        assert recorder.results[1].summary == report.replaced[0].summary


async def test_parallel_delivery_keeps_each_units_slices_in_order_and_never_together(database: Any) -> None:
    units = MemoryUnitRepository(database)
    careful = Careful()
    async with listener_for(database, careful, concurrency=8) as listener:
        pieces = [await append(units, f"u{n % 4}", n) for n in range(16)]
        await until(lambda: len(careful.results) >= len(pieces))
        await settled(listener)

    assert sorted(careful.slice_ids) == sorted(p.id or "" for p in pieces)
    assert careful.overlaps == [] and careful.most_at_once > 1
    for unit in ("u0", "u1", "u2", "u3"):
        delivered = [r.slice_id for r in careful.results if r.memory_unit.id == unit]
        assert delivered == [p.id for n, p in enumerate(pieces) if n % 4 == int(unit[1:])]


async def test_the_status_read_through_another_client_shows_the_running_group(database: Any) -> None:
    units = MemoryUnitRepository(database)
    recorder = Recorder()
    other, close = another_client(database)
    try:
        async with listener_for(database, recorder, group="watched", lease_ttl=0.4) as listener:
            await append(units, "u1", 1)
            await until(lambda: len(recorder.results) == 1)

            async def reported() -> bool:
                (found,) = await listener_status(other, "watched")
                return found.last_delivered_at is not None and found.position_at is not None

            await until(reported)
            (status,) = await listener_status(other, "watched")
            source = listener.source
    finally:
        await close()

    assert status.owner == listener.owner and status.source == source
    assert [(c.name, c.pending, c.dead_letters) for c in status.consumers] == [("recorder", 0, 0)]
    assert status.last_delivered_slice_at == T0 + timedelta(minutes=1)


def another_client(database: Any) -> tuple[Any, Any]:
    """The same database through a client of its own (as another process would see it), and its close."""
    if conftest.MONGODB_URI and database.name.startswith("partner_repo_test_"):
        client: Any = driver.new_client(conftest.MONGODB_URI, tz_aware=True, serverSelectionTimeoutMS=5000)
        return client[database.name], lambda: driver.close_client(client)
    return database, lambda: asyncio.sleep(0)  # the in-memory backend lives in this process: nothing to close


# -- change streams on the real server -----------------------------------------------------------------


async def fresh_real_database() -> Any:
    database = await real_database()
    await init_repository(database)
    return database


async def dropped(database: Any) -> None:
    await database.client.drop_database(database.name)
    await close_database(database)


@pytest.mark.integration
async def test_an_idle_stream_keeps_its_saved_token_current() -> None:
    database = await fresh_real_database()
    try:
        checkpoints = ListenerCheckpoints(database, "default")

        async def saved_token() -> Any:
            checkpoint = await checkpoints.group()
            return None if checkpoint is None else checkpoint.resume_token

        async with listener_for(database, Recorder()) as listener:
            await listener.flush()
            await until(saved_token)
            first = await saved_token()
            await MemoryCoreRepository(database).record("elsewhere", [Message(role="user", content="x")])

            async def moved() -> bool:
                return bool(await saved_token() != first)

            await until(moved)  # memory_units stayed quiet, yet the saved position moved on
    finally:
        await dropped(database)


@pytest.mark.integration
async def test_a_token_the_server_rejects_is_dropped_and_the_listener_catches_up() -> None:
    database = await fresh_real_database()
    try:
        units = MemoryUnitRepository(database)
        missed = [await append(units, "u1", 1), await append(units, "u1", 2)]
        checkpoints = ListenerCheckpoints(database, "default")
        await checkpoints.open_group("beginning")
        await checkpoints.save_token({"_data": "8200000001000000012B0229296E04"})
        recorder = Recorder()
        async with listener_for(database, recorder) as listener:
            await until(lambda: len(recorder.results) == 2)
            await settled(listener)
            after = await append(units, "u1", 3)
            await until(lambda: len(recorder.results) == 3)

        assert recorder.slice_ids == [*(p.id for p in missed), after.id]
        checkpoint = await checkpoints.group()
        assert checkpoint is not None and checkpoint.resume_token is not None
        assert checkpoint.resume_token != {"_data": "8200000001000000012B0229296E04"}
    finally:
        await dropped(database)


@pytest.mark.integration
async def test_dropping_memory_units_invalidates_the_stream_and_the_listener_carries_on() -> None:
    database = await fresh_real_database()
    try:
        units = MemoryUnitRepository(database)
        recorder = Recorder()
        async with listener_for(database, recorder) as listener:
            before = await append(units, "u1", 1)
            await until(lambda: recorder.slice_ids == [before.id])
            await database["memory_units"].drop()
            after = await append(units, "u2", 2)
            await until(lambda: len(recorder.results) == 2)
            await settled(listener)
            assert listener.source == "change_stream"

        assert recorder.slice_ids == [before.id, after.id]
    finally:
        await dropped(database)


@pytest.mark.integration
async def test_change_events_carry_no_messages_yet_every_appended_slice_is_delivered() -> None:
    database = await fresh_real_database()
    try:
        units = MemoryUnitRepository(database)
        await units.save(MemoryUnit(id="u1", core_id="core"))  # a push into an empty array: the whole array
        recorder = Recorder()
        async with listener_for(database, recorder), await units.watch() as raw:
            first = await units.append("u1", messages(3, "first"), "s1", core_id="core", created_at=T0)
            second = await units.append("u1", messages(2, "second"), "s2", core_id="core", created_at=T0)
            events = [await raw.next() for _ in range(2)]
            await until(lambda: len(recorder.results) == 2)

        fields = [event["updateDescription"]["updatedFields"] for event in events]
        assert [[key for key in f if key.startswith("conversation_messages")] for f in fields] == [[], []]
        assert "slices" in fields[0] and "slices.1" in fields[1]  # the slices still travel
        assert recorder.slice_ids == [first.id, second.id]
        assert [len(result.increment_messages) for result in recorder.results] == [3, 2]
    finally:
        await dropped(database)
