"""``listener_status`` and ``partner-repo listener status``: each group's lease, source, position, backlog per
consumer (estimated from the checkpoints) and dead letters, read from the database alone."""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta
from typing import Any

import pytest
from click.testing import CliRunner

from partner_repo import ListenerCheckpoints, MemoryUnitRepository
from partner_repo.cli import main
from partner_repo.cli._runtime import Connection
from partner_repo.clock import utc_now
from partner_repo.listener.state import GroupStatus, listener_status
from tests.conftest import until
from tests.unit.listener.support import T0, Recorder, append, quick_listener, registry_of


async def status_of(database: Any, group: str = "default") -> GroupStatus:
    (found,) = await listener_status(database, group)
    return found


class Concurrent(Recorder):
    concurrency = 4


async def test_a_running_group_shows_its_owner_heartbeat_source_and_consumers(memory_db: Any) -> None:
    units = MemoryUnitRepository(memory_db)
    await append(units, "u1", minutes=3)
    consumers = registry_of(Recorder("a"), Concurrent("b"))
    listener = quick_listener(memory_db, consumers, concurrency=2, lease_ttl=0.2)  # beats every 50 ms

    async with listener:
        await listener.flush()
        await until(lambda: _reported(memory_db))
        running = await status_of(memory_db)
    stopped = await status_of(memory_db)

    assert running.owner == listener.owner and running.source == "polling"
    assert running.heartbeat_at is not None and abs((utc_now() - running.heartbeat_at).total_seconds()) < 60
    assert [(c.name, c.concurrency, c.pending, c.dead_letters) for c in running.consumers] == [
        ("a", 2, 0, 0),
        ("b", 4, 0, 0),
    ]
    assert running.last_delivered_slice_at == T0 + timedelta(minutes=3)
    assert stopped.owner is None and stopped.source == "polling"


async def _reported(database: Any) -> bool:
    found = await status_of(database)
    return found.source is not None and found.last_delivered_at is not None


async def test_a_heartbeat_stores_the_delivered_slice_before_when_it_was_delivered(memory_db: Any) -> None:
    """A status read between a beat's writes never shows a delivery without the slice it stands for."""
    checkpoints = ListenerCheckpoints(memory_db, "default")
    await checkpoints.open_group("beginning")
    assert await checkpoints.claim("me")
    seen: list[tuple[Any, Any]] = []
    collection = checkpoints._collection
    update_one = collection.update_one

    async def watched(*args: Any, **kwargs: Any) -> Any:
        result = await update_one(*args, **kwargs)
        stored = await collection.find_one({"group": "default"})
        seen.append((stored.get("last_delivered_at"), stored.get("last_delivered_slice_at")))
        return result

    collection.update_one = watched
    try:
        delivered = {"last_delivered_at": utc_now(), "last_delivered_slice_at": T0}
        assert await checkpoints.beat("me", delivered)
    finally:
        collection.update_one = update_one

    assert seen[-1][0] is not None
    assert all(slice_at is not None for at, slice_at in seen if at is not None)


async def test_slices_appended_while_stopped_are_pending_for_every_consumer(memory_db: Any) -> None:
    units = MemoryUnitRepository(memory_db)
    await append(units, "u1")
    async with quick_listener(memory_db, registry_of(Recorder("a"), Recorder("b"))) as listener:
        await listener.flush()
    while_stopped = [await append(units, "u1"), await append(units, "u2"), await append(units, "u3")]
    await ListenerCheckpoints(memory_db, "default").mark_consumer_done(
        "u1", "core", while_stopped[0].id or "", "a"
    )

    found = await status_of(memory_db)

    assert found.pending == 3
    assert {c.name: c.pending for c in found.consumers} == {"a": 2, "b": 3}


async def test_a_group_that_delivered_nothing_yet_has_every_stored_slice_pending(memory_db: Any) -> None:
    units = MemoryUnitRepository(memory_db)
    for n in range(4):
        await append(units, f"u{n % 2}")
    stuck = Recorder("stuck", gate=asyncio.Event())
    listener = quick_listener(memory_db, registry_of(stuck))
    await listener.start()
    await until(lambda: len(stuck.attempts) == 1)
    await listener.stop(drain_timeout=0)

    found = await status_of(memory_db)

    assert found.pending == 4 and [(c.name, c.pending) for c in found.consumers] == [("stuck", 4)]


async def test_what_was_delivered_of_a_deleted_unit_is_not_counted_against_the_others(memory_db: Any) -> None:
    units = MemoryUnitRepository(memory_db)
    for _ in range(3):
        await append(units, "gone")
    await append(units, "kept")
    async with quick_listener(memory_db, registry_of(Recorder())) as listener:
        await listener.flush()
    await memory_db["memory_units"].delete_one({"_id": "gone"})
    await append(units, "kept")

    assert (await status_of(memory_db)).pending == 1


async def test_dead_letters_are_counted_per_consumer(memory_db: Any) -> None:
    units = MemoryUnitRepository(memory_db)
    pieces = [await append(units, f"u{n}") for n in range(3)]
    failing = Recorder("failing", fail_slices={p.id or "" for p in pieces[:2]})
    async with quick_listener(memory_db, registry_of(failing, Recorder("fine"))) as listener:
        await listener.flush()

    found = await status_of(memory_db)

    assert {c.name: (c.pending, c.dead_letters) for c in found.consumers} == {
        "failing": (0, 2),
        "fine": (0, 0),
    }


async def test_a_polling_group_reports_the_age_of_its_position(memory_db: Any) -> None:
    async with quick_listener(memory_db, registry_of(Recorder()), lease_ttl=0.08) as listener:
        await listener.flush()
        await until(lambda: _positioned(memory_db))
        found = await status_of(memory_db)

    age = found.age(found.position_at, utc_now())
    assert age is not None and 0 <= age < 60


async def _positioned(database: Any) -> bool:
    return (await status_of(database)).position_at is not None


async def test_every_group_is_listed_by_name_and_one_can_be_asked_for(memory_db: Any) -> None:
    units = MemoryUnitRepository(memory_db)
    await append(units, "u1")
    for group in ("search", "alerts"):
        async with quick_listener(memory_db, registry_of(Recorder()), group=group) as listener:
            await listener.flush()

    assert [s.group for s in await listener_status(memory_db)] == ["alerts", "search"]
    assert [s.group for s in await listener_status(memory_db, "search")] == ["search"]
    assert await listener_status(memory_db, "nobody") == []


# -- the command --------------------------------------------------------------------------------------------


@pytest.fixture
def served(memory_db: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    async def open_prepared(self: Connection, **options: Any) -> Any:
        return memory_db

    monkeypatch.setattr(Connection, "open", open_prepared)
    return memory_db


async def run_group(database: Any, *consumers: Recorder) -> None:
    units = MemoryUnitRepository(database)
    await append(units, "u1")
    async with quick_listener(database, registry_of(*consumers), group="search") as listener:
        await listener.flush()
    await append(units, "u1")


def test_listener_status_prints_a_row_per_consumer(served: Any) -> None:
    asyncio.run(run_group(served, Recorder("indexer"), Recorder("notifier")))

    result = CliRunner(env={"COLUMNS": "250"}).invoke(main, ["listener", "status"])

    assert result.exit_code == 0, result.output
    assert "search" in result.stdout and "polling" in result.stdout and "none (not running)" in result.stdout
    assert "indexer" in result.stdout and "notifier" in result.stdout


def test_listener_status_as_json(served: Any) -> None:
    asyncio.run(run_group(served, Recorder("indexer")))

    result = CliRunner().invoke(main, ["listener", "status", "--json", "--group", "search"])

    (group,) = json.loads(result.stdout)
    assert (group["group"], group["active"], group["source"], group["pending"]) == (
        "search",
        False,
        "polling",
        1,
    )
    assert group["consumers"] == [{"name": "indexer", "concurrency": 1, "pending": 1, "dead_letters": 0}]
    assert group["last_delivered_slice_at"].startswith("2024-05-01T09:00:00")
    assert group["heartbeat_age_s"] >= 0


def test_listener_status_of_an_unknown_group_exits_1(served: Any) -> None:
    result = CliRunner().invoke(main, ["listener", "status", "--group", "nobody"])

    assert result.exit_code == 1
    assert "no listener group 'nobody'" in result.stderr


@pytest.mark.parametrize("columns", ["80", "120"])
def test_listener_status_fits_the_terminal_with_whole_header_words(served: Any, columns: str) -> None:
    asyncio.run(run_group(served, Concurrent("search-indexer"), Recorder("notifier")))

    result = CliRunner(env={"COLUMNS": columns}).invoke(main, ["listener", "status"])

    lines = result.stdout.splitlines()
    assert max(len(line.rstrip()) for line in lines) <= int(columns)
    header = next(line for line in lines if "consumer" in line)
    assert [cell.strip() for cell in header.split("┃")[1:-1]] == [
        "consumer",
        "concurrency",
        "pending",
        "dead letters",
    ]
