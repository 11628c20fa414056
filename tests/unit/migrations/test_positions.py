"""The positions migration: cores and units written by 0.3 (and before, and by other tools) get positions
once, so the next 0.4 roll stores exactly the new messages; trusted marks, fences and units the library adopts
are left alone; sizes stay exact; a rerun writes nothing; Backward leaves a database 0.3 runs on."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from partner_repo import MemoryCoreRepository, MemoryUnitRepository, Message, RollingService, run_migrations
from partner_repo.mongo import CORES, UNITS, bson_size
from partner_repo.rolling import resolve_chat_increment
from tests.unit.interference import InterruptedCollection
from tests.unit.migrations.stored_0_3 import ROLLED_BY_0_3, core_of_0_3, msg, msgs, unit_of_0_3
from tests.unit.migrations.support import (
    CLAIMS,
    POSITIONS,
    bound,
    fresh_database,
    load,
    names,
    shipped_before,
    shipped_from,
)
from tests.unit.rolling.support import RecordingSummarizer

T0 = ROLLED_BY_0_3
RECENT = datetime.now(UTC).replace(microsecond=0)
"""A tombstone's time: recent, so its TTL index (mongomock applies TTL too) keeps it."""
LATER = T0 + timedelta(minutes=5)
MIGRATION = load(POSITIONS)


async def database_of_0_3(*, cores: list[dict[str, Any]], units: list[dict[str, Any]]) -> Any:
    """A database migrated as far as 0.3 went, holding ``cores`` and ``units``."""
    database = await fresh_database()
    await run_migrations(database, distance=len(shipped_before(POSITIONS)))
    if cores:
        await database[CORES].insert_many(cores)
    if units:
        await database[UNITS].insert_many(units)
    return database


async def stored(database: Any, collection: str, document_id: str) -> dict[str, Any]:
    document = await database[collection].find_one({"_id": document_id})
    assert document is not None
    return dict(document)


async def unit_messages(database: Any, unit_id: str) -> list[dict[str, str]]:
    """The unit's messages as 0.3 stored them: role and content (a 0.4 record also stores each one's time)."""
    stored_messages = (await stored(database, UNITS, unit_id))["conversation_messages"]
    return [{"role": m["role"], "content": m["content"]} for m in stored_messages]


def rolling(database: Any) -> RollingService:
    return RollingService(database, RecordingSummarizer())


async def test_a_0_3_core_and_its_unit_get_window_start_0_and_the_mark_a_roll_then_stores_exactly_after() -> (
    None
):
    window = msgs(30, 41)  # the 6 messages the last 0.3 roll kept as context, then 5 recorded since
    database = await database_of_0_3(
        cores=[core_of_0_3("s1", window, stored={"unit_id": "s1", "message_count": 36, "front": 6})],
        units=[unit_of_0_3("s1", msgs(0, 36))],
    )

    run = await run_migrations(database)

    assert run.ran == names(shipped_from(POSITIONS))
    core, unit = await stored(database, CORES, "c"), await stored(database, UNITS, "s1")
    assert core["window_start"] == 0 and "window_stored" not in core
    assert (unit["taken_until"], unit["taken_count"]) == (6, 36)
    service = rolling(database)
    await service.roll("c", now=LATER)
    await MemoryCoreRepository(database).record("c", msgs(41, 43))
    await service.roll("c", now=LATER + timedelta(minutes=1))
    assert await unit_messages(database, "s1") == msgs(0, 43)  # no message lost, none stored twice


async def test_without_a_stored_front_the_mark_comes_from_partners_content_overlap() -> None:
    database = await database_of_0_3(
        cores=[core_of_0_3("s1", msgs(30, 41))], units=[unit_of_0_3("s1", msgs(0, 36))]
    )

    await run_migrations(database)

    assert (await stored(database, UNITS, "s1"))["taken_until"] == 6
    await rolling(database).roll("c", now=LATER)
    assert await unit_messages(database, "s1") == msgs(0, 41)


async def test_a_stored_front_wins_over_content_when_the_conversation_repeats_itself() -> None:
    thanks = [{"role": "user", "content": "thanks"}, {"role": "assistant", "content": "you're welcome"}]
    unit = unit_of_0_3("s1", [*msgs(0, 4), *thanks, *thanks])
    # the last 0.3 roll kept the final pair as context; then the user said the same again
    core = core_of_0_3("s1", [*thanks, *thanks], stored={"unit_id": "s1", "message_count": 8, "front": 2})
    database = await database_of_0_3(cores=[core], units=[unit])

    await run_migrations(database)

    assert (await stored(database, UNITS, "s1"))["taken_until"] == 2  # content alone would say 4: a loss
    await rolling(database).roll("c", now=LATER)
    assert await unit_messages(database, "s1") == [*msgs(0, 4), *thanks, *thanks, *thanks]


async def test_a_session_whose_unit_does_not_exist_yet_marks_the_unit_it_continues() -> None:
    # 0.3 opened a continuation of the full unit s1 and stopped before its append created s2
    database = await database_of_0_3(
        cores=[core_of_0_3("s2", msgs(30, 41), continues="s1")], units=[unit_of_0_3("s1", msgs(0, 36))]
    )

    await run_migrations(database)

    assert (await stored(database, UNITS, "s1"))["taken_until"] == 6
    await rolling(database).roll("c", now=LATER)
    assert await unit_messages(database, "s1") == msgs(0, 36)
    assert await unit_messages(database, "s2") == msgs(36, 41)
    assert (await stored(database, UNITS, "s2"))["previous_unit_id"] == "s1"


async def test_a_continuation_holding_fewer_messages_than_the_window_is_resolved_across_both_units() -> None:
    database = await database_of_0_3(
        cores=[core_of_0_3("s2", msgs(30, 42), continues="s1")],
        units=[unit_of_0_3("s1", msgs(0, 36)), unit_of_0_3("s2", msgs(36, 38), previous="s1")],
    )

    await run_migrations(database)

    unit = await stored(database, UNITS, "s2")
    assert (unit["taken_until"], unit["taken_count"]) == (8, 2)  # 30..35 in s1, 36..37 in s2
    assert "taken_until" not in await stored(database, UNITS, "s1")  # no roll appends to it again
    await rolling(database).roll("c", now=LATER)
    assert await unit_messages(database, "s2") == msgs(36, 42)


async def test_a_unit_whose_mark_is_trusted_is_left_untouched() -> None:
    unit = unit_of_0_3("s1", msgs(0, 36))
    unit.update(taken_until=9, taken_count=36, size_bytes=0)
    unit["size_bytes"] = bson_size(unit)
    database = await database_of_0_3(cores=[core_of_0_3("s1", msgs(30, 41))], units=[unit])

    await run_migrations(database)

    assert await stored(database, UNITS, "s1") == unit


async def test_size_bytes_stays_exact_also_when_an_untrusted_mark_is_replaced() -> None:
    untrusted = unit_of_0_3("s2", msgs(0, 36), core_id="d")
    untrusted.update(taken_until=2**40, taken_count=30, size_bytes=0)  # an 8-byte int, set 6 appends ago
    untrusted["size_bytes"] = bson_size(untrusted)
    database = await database_of_0_3(
        cores=[core_of_0_3("s1", msgs(30, 41)), core_of_0_3("s2", msgs(30, 41), core_id="d")],
        units=[unit_of_0_3("s1", msgs(0, 36)), untrusted],
    )

    await run_migrations(database)

    for unit_id in ("s1", "s2"):
        document = await stored(database, UNITS, unit_id)
        assert (document["taken_until"], document["taken_count"]) == (6, 36)
        assert bson_size(document) == document["size_bytes"], unit_id


async def test_a_rerun_writes_nothing() -> None:
    database = await database_of_0_3(
        cores=[
            core_of_0_3("s1", msgs(30, 41)),
            {"_id": "bare", "memory_session_id": "x", "session_started_at": T0},
        ],
        units=[unit_of_0_3("s1", msgs(0, 36))],
    )
    migration = await bound(POSITIONS, database)
    await migration.migrate_all(None)
    before = {c: await database[c].find().sort("_id", 1).to_list(None) for c in (CORES, UNITS)}

    counts = await migration.migrate_all(None)

    assert counts["marked"] == counts["window_start"] == counts["empty_windows"] == 0
    assert counts["trusted"] == 1
    assert {c: await database[c].find().sort("_id", 1).to_list(None) for c in (CORES, UNITS)} == before


async def test_fences_units_left_to_adoption_and_other_cores_units_are_never_written() -> None:
    tombstone = {"_id": "erased", "erased_at": RECENT}  # not yet expired by its TTL index
    reserved = {"_id": "cleared", "erased_at": RECENT, "taken_until": 40, "taken_count": 0}
    foreign = {"_id": "foreign", "core_id": "c", "conversation_messages": msgs(0, 3)}  # no derived fields
    elsewhere = unit_of_0_3("elsewhere", msgs(0, 36), core_id="another core")
    cores = [
        core_of_0_3("erased", msgs(0, 4), core_id="a"),
        core_of_0_3("cleared", [], core_id="b"),
        core_of_0_3("foreign", msgs(0, 4), core_id="c"),
        core_of_0_3("elsewhere", msgs(30, 41), core_id="d"),
        core_of_0_3("nothing yet", msgs(0, 4), core_id="e"),
    ]
    database = await database_of_0_3(cores=cores, units=[tombstone, reserved, foreign, elsewhere])
    migration = await bound(POSITIONS, database)

    counts = await migration.migrate_all(None)

    assert {k: counts[k] for k in ("fences", "not_adopted", "foreign", "no_unit", "marked")} == {
        "fences": 2,
        "not_adopted": 1,
        "foreign": 1,
        "no_unit": 1,
        "marked": 0,
    }
    for document in (tombstone, reserved, foreign, elsewhere):
        assert await stored(database, UNITS, document["_id"]) == document


async def test_a_missing_or_null_window_is_stored_empty_so_the_core_takes_turns() -> None:
    bare = {"_id": "bare", "memory_session_id": "x", "session_started_at": T0}
    null = {**bare, "_id": "null", "chat_messages": None, "window_size": 0}
    database = await database_of_0_3(cores=[bare, null], units=[])

    await run_migrations(database)

    for core_id in ("bare", "null"):
        core = await stored(database, CORES, core_id)
        assert (core["chat_messages"], core["window_size"], core["window_start"]) == ([], 0, 0)
        state = await MemoryCoreRepository(database).record(core_id, [Message(role="user", content="hi")])
        assert (state.window_start, state.window_size) == (0, 1)


async def roll_of_0_4(database: Any) -> None:
    """A 0.4 roll of the core, landing just before the migration's guarded write of the unit."""
    await rolling(database).roll("c", now=LATER)


async def test_a_roll_landing_during_the_migration_wins_and_nothing_is_stored_twice() -> None:
    database = await database_of_0_3(
        cores=[core_of_0_3("s1", msgs(30, 41))], units=[unit_of_0_3("s1", msgs(0, 36))]
    )
    migration = await bound(POSITIONS, database)
    units = InterruptedCollection(database[UNITS], partial(roll_of_0_4, database))
    core = await database[CORES].find_one({"_id": "c"}, migration.CORE_STATE)

    outcome = await migration._mark_one(units, database[CORES], core, None)

    assert units.interfered and outcome == "trusted"
    unit = await stored(database, UNITS, "s1")
    assert unit["conversation_messages"] == msgs(0, 41)
    assert (unit["taken_until"], unit["taken_count"]) == (11, 41)
    assert bson_size(unit) == unit["size_bytes"]


async def roll_of_0_3(database: Any) -> None:
    """A roll by a 0.3 process, landing between the migration's read of the unit and its read of the window:
    an append that leaves no mark, a trim that does not move ``window_start``."""
    await MemoryUnitRepository(database).append("s1", msgs(36, 41), "0.3", core_id="c")
    await database[CORES].update_one(
        {"_id": "c"},
        {
            "$push": {"chat_messages": {"$each": [], "$slice": -1}},
            "$set": {
                "window_size": 1,
                "window_stored": {"unit_id": "s1", "message_count": 41, "front": 1},
            },
            "$inc": {"version": 1},
        },
    )


async def test_a_0_3_roll_landing_between_the_migrations_reads_is_resolved_again() -> None:
    database = await database_of_0_3(
        cores=[core_of_0_3("s1", msgs(30, 41), stored={"unit_id": "s1", "message_count": 36, "front": 6})],
        units=[unit_of_0_3("s1", msgs(0, 36))],
    )
    migration = await bound(POSITIONS, database)
    cores = InterruptedCollection(database[CORES], partial(roll_of_0_3, database), method="find_one")
    core = await database[CORES].find_one({"_id": "c"}, migration.CORE_STATE)

    outcome = await migration._mark_one(database[UNITS], cores, core, None)

    assert cores.interfered and outcome == "marked"
    unit = await stored(database, UNITS, "s1")
    assert (unit["taken_until"], unit["taken_count"]) == (1, 41)  # the window is [40] at position 0 now
    await MemoryCoreRepository(database).record("c", msgs(41, 43))
    await rolling(database).roll("c", now=LATER)
    assert await unit_messages(database, "s1") == msgs(0, 43)


class Reads:
    """A collection that records the projection of every read."""

    def __init__(self, collection: Any, log: list[tuple[str, Any]]) -> None:
        self._collection = collection
        self._log = log

    def __getattr__(self, name: str) -> Any:
        return getattr(self._collection, name)

    @property
    def database(self) -> Any:
        log, database = self._log, self._collection.database

        class Database:
            def __getitem__(self, name: str) -> Reads:
                return Reads(database[name], log)

        return Database()

    def find(self, query: Any, projection: Any = None, **kwargs: Any) -> Any:
        self._log.append((self._collection.name, projection))
        return self._collection.find(query, projection, **kwargs)

    async def find_one(self, query: Any, projection: Any = None, **kwargs: Any) -> Any:
        self._log.append((self._collection.name, projection))
        return await self._collection.find_one(query, projection, **kwargs)


async def test_it_reads_cores_without_windows_in_batches_and_units_only_by_head_and_tail(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cores = [core_of_0_3(f"s{i}", msgs(30, 41), core_id=f"c{i}") for i in range(MIGRATION.BATCH_SIZE + 5)]
    units = [unit_of_0_3(f"s{i}", msgs(0, 36), core_id=f"c{i}") for i in range(0, len(cores), 2)]
    database = await database_of_0_3(cores=cores, units=units)
    migration = await bound(POSITIONS, database)
    log: list[tuple[str, Any]] = []
    monkeypatch.setattr(
        migration.driver, "document_collection", lambda _document: Reads(database[UNITS], log)
    )

    counts = await migration.migrate_all(None)

    assert counts["marked"] == len(units) and counts["no_unit"] == len(cores) - len(units)
    unit_reads = [projection for collection, projection in log if collection == UNITS]
    assert all(p is not None for p in unit_reads)
    heads = [p for p in unit_reads if "conversation_messages" not in p]
    tails = [p["conversation_messages"] for p in unit_reads if "conversation_messages" in p]
    assert len(heads) == 2  # one query per batch of cores
    assert len(tails) == len(units) and all(set(t) == {"$slice"} and t["$slice"] < 0 for t in tails)
    core_reads = [p for c, p in log if c == CORES]
    assert sum("chat_messages" not in p for p in core_reads) == 1  # the batches: one cursor, no window
    assert sum("chat_messages" in p for p in core_reads) == len(units)  # a window only where a mark is due
    for document in await database[UNITS].find().to_list(None):
        assert bson_size(document) == document["size_bytes"]


async def test_backward_leaves_no_mark_for_0_3_and_keeps_what_0_3_ignores() -> None:
    unit = unit_of_0_3("s1", msgs(0, 36))
    tombstone = {"_id": "erased", "erased_at": RECENT}  # not yet expired by its TTL index
    database = await database_of_0_3(
        cores=[core_of_0_3("s1", msgs(30, 41)), core_of_0_3("s9", [], core_id="d")],
        units=[unit, tombstone],
    )
    # not as far as the slice-id claims: reverting them rebuilds a partial unique index, whose filter
    # mongomock ignores over the tombstones (a server honours it)
    reverted = shipped_from(POSITIONS)[: -len(shipped_from(CLAIMS))]
    await run_migrations(database, distance=len(reverted))
    await rolling(database).roll("c", now=LATER)  # a 0.4 roll moves the mark and window_start
    clears_mark = {"_id": "s9", "erased_at": RECENT, "taken_until": 3, "taken_count": 0}
    await database[UNITS].insert_one(clears_mark)  # the tombstone a 0.4 clear leaves for a unit not created
    rolled = await stored(database, UNITS, "s1")
    start = (await stored(database, CORES, "c"))["window_start"]

    run = await run_migrations(database, backward=True, distance=len(reverted))

    assert run.ran == names(reverted)[::-1]
    document = await stored(database, UNITS, "s1")
    assert {k: v for k, v in document.items() if k not in ("version", "size_bytes")} == {
        k: v for k, v in rolled.items() if k not in ("taken_until", "taken_count", "version", "size_bytes")
    }
    assert document["version"] == rolled["version"] + 1
    assert bson_size(document) == document["size_bytes"]
    assert await database[UNITS].find_one({"_id": "s9"}) is None  # 0.3 could not adopt it
    assert await stored(database, UNITS, "erased") == tombstone  # the tombstones' migration owns it
    assert (await stored(database, CORES, "c"))["window_start"] == start
    assert await database[UNITS].count_documents({"taken_until": {"$exists": True}}) == 0


async def test_backward_after_forward_gives_back_the_units_0_3_wrote() -> None:
    unit = unit_of_0_3("s1", msgs(0, 36))
    database = await database_of_0_3(cores=[core_of_0_3("s1", msgs(30, 41))], units=[unit])
    migration = await bound(POSITIONS, database)
    await migration.migrate_all(None)

    counts = await migration.unmark_all(None)

    assert counts == {"unmarked": 1, "reserved": 0, "left": 0}
    assert await stored(database, UNITS, "s1") == {**unit, "version": unit["version"] + 2}


MESSAGES = st.lists(st.sampled_from([msg(0), msg(1), msg(2)]), max_size=8)


@settings(max_examples=200, deadline=None)
@given(stored_tail=MESSAGES, window=MESSAGES)
def test_the_frozen_overlap_agrees_with_the_library(
    stored_tail: list[dict[str, str]], window: list[dict[str, str]]
) -> None:
    """The migration carries a copy of ``resolve_chat_increment``; this fails when the library drifts."""
    library = resolve_chat_increment(
        [Message.model_validate(m) for m in stored_tail], [Message.model_validate(m) for m in window]
    )

    assert MIGRATION.overlap(stored_tail, window) == len(window) - len(library)
