"""Units no repository wrote, that cannot be read as units (an ``ObjectId`` id from mongosh or Compass, an
invalid slice or core id, a unit whose completion fails): reading one raises ``UnreadableUnit``, and every
walk of the listener skips it, logs it once per state, and goes on delivering the others."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from bson import ObjectId

from partner_repo import (
    DeadLetterRepository,
    InvalidInput,
    ListenerCheckpoints,
    MemoryUnitRepository,
    RollingListener,
    replay_dead_letters,
)
from partner_repo.errors import UnreadableUnit
from partner_repo.mongo import slice_document
from tests.conftest import until
from tests.unit.listener.faults import ScriptedStreams, StreamScript
from tests.unit.listener.support import (
    T0,
    CountingUnits,
    Recorder,
    append,
    messages,
    quick_listener,
    registry_of,
    scanning,
)

DERIVED = {"version": 1, "message_count": 0, "slice_count": 1, "slice_ids": [], "size_bytes": 200}
OBJECT_ID = ObjectId("65f0c0ffee0000000000beef")


def foreign_units() -> dict[str, dict[str, Any]]:
    """One document of each unreadable kind, as another tool may have stored it."""
    return {
        "object-id": {
            "_id": OBJECT_ID,
            "core_id": "core",
            "conversation_messages": [{"role": "user", "content": "from mongosh"}],
            "slices": [{"summary": "typed by hand", "start_index": 0, "end_index": 1}],
        },
        "invalid-slice": {
            "_id": "bad-slice",
            "core_id": "core",
            "slices": [{"id": "s", "summary": 5}],
            **DERIVED,
        },
        "slice-not-a-document": {"_id": "bad-array", "core_id": "core", "slices": ["oops"], **DERIVED},
        "no-core": {"_id": "no-core", "slices": [], **DERIVED},
        "completion-fails": {
            "_id": "bad-role",
            "core_id": "core",
            "conversation_messages": [{"role": "function", "content": "x"}],
            "slices": [],
        },
    }


async def store_foreign_units(database: Any) -> None:
    await database["memory_units"].insert_many(list(foreign_units().values()))


async def flushed(listener: RollingListener) -> None:
    """``flush()``, failing the test rather than hanging when a pass can never finish."""
    async with asyncio.timeout(5):
        await listener.flush()


def skipped(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "skipping unit" in r.getMessage()]


# -- reading one --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", list(foreign_units()))
async def test_outlining_a_stored_document_that_is_no_unit_raises_unreadable_unit(
    memory_db: Any, kind: str
) -> None:
    document = foreign_units()[kind]
    await memory_db["memory_units"].insert_one(document)

    with pytest.raises(UnreadableUnit) as raised:
        await MemoryUnitRepository(memory_db).outline(document["_id"])

    assert raised.value.unit_id == document["_id"]


async def test_outlining_an_id_no_document_has_and_no_unit_could_have_is_bad_input(memory_db: Any) -> None:
    with pytest.raises(InvalidInput):
        await MemoryUnitRepository(memory_db).outline(ObjectId())


async def test_the_reason_says_what_is_wrong(memory_db: Any) -> None:
    await store_foreign_units(memory_db)
    units = MemoryUnitRepository(memory_db)
    reasons = {}
    for kind, document in foreign_units().items():
        with pytest.raises(UnreadableUnit) as raised:
            await units.outline(document["_id"])
        reasons[kind] = raised.value.reason

    assert "ObjectId" in reasons["object-id"] and "not a string" in reasons["object-id"]
    assert reasons["invalid-slice"].startswith("slice 0 is invalid: summary")
    assert "core_id is None" in reasons["no-core"]
    assert reasons["completion-fails"].startswith("it cannot be completed")


# -- polling ------------------------------------------------------------------------------------------------


async def test_polling_skips_unreadable_units_logs_each_once_and_delivers_the_others(
    memory_db: Any, caplog: pytest.LogCaptureFixture
) -> None:
    await store_foreign_units(memory_db)
    units = MemoryUnitRepository(memory_db)
    recorder = Recorder()
    async with quick_listener(memory_db, registry_of(recorder)) as listener:
        first = await append(units, "good")
        await flushed(listener)
        second = await append(units, "good")
        await flushed(listener)
        await flushed(listener)  # full passes try the unreadable units again: no new log while unchanged

    assert recorder.slice_ids == [first.id, second.id]
    assert len(skipped(caplog)) == len(foreign_units())


async def test_an_unreadable_unit_is_logged_again_only_once_it_changed(
    memory_db: Any, caplog: pytest.LogCaptureFixture
) -> None:
    await store_foreign_units(memory_db)
    async with quick_listener(memory_db, registry_of(Recorder())) as listener:
        await flushed(listener)
        await memory_db["memory_units"].update_one({"_id": "bad-slice"}, {"$set": {"version": 2}})
        await flushed(listener)
        await flushed(listener)

    assert len([m for m in skipped(caplog) if "'bad-slice'" in m]) == 2


async def test_a_unit_repaired_in_place_is_delivered(memory_db: Any) -> None:
    await memory_db["memory_units"].insert_one(
        {
            "_id": "repairable",
            "core_id": "core",
            "conversation_messages": [m.model_dump() for m in messages(2)],
            "slices": [{"id": "fixed", "summary": 5, "start_index": 0, "end_index": 2, "created_at": T0}],
            **{**DERIVED, "message_count": 2},
        }
    )
    recorder = Recorder()
    async with quick_listener(memory_db, registry_of(recorder)) as listener:
        await flushed(listener)
        assert recorder.results == []
        await memory_db["memory_units"].update_one(
            {"_id": "repairable"}, {"$set": {"slices.0.summary": "repaired by hand"}}
        )  # the fingerprint did not change: a full pass notices anyway
        await flushed(listener)

    assert [(r.slice_id, r.summary, len(r.increment_messages)) for r in recorder.results] == [
        ("fixed", "repaired by hand", 2)
    ]


async def test_a_pass_after_nothing_changed_stops_at_the_probe_despite_unreadable_units(
    memory_db: Any,
) -> None:
    await store_foreign_units(memory_db)
    units = CountingUnits(memory_db)
    await append(units, "good")
    scanner, pipeline = scanning(memory_db, units)
    pipeline.start()
    try:
        assert await scanner.scan() == 1
        outlined = units.outlined
        assert await scanner.scan() == 0
        assert (
            units.outlined == outlined
        )  # the probe matched: no unit read again, the unreadable ones neither
    finally:
        await pipeline.close()


async def test_a_group_started_from_now_starts_despite_unreadable_units(memory_db: Any) -> None:
    await store_foreign_units(memory_db)
    units = MemoryUnitRepository(memory_db)
    await append(units, "good")
    recorder = Recorder()
    async with quick_listener(memory_db, registry_of(recorder), start_from="now") as listener:
        after = await append(units, "good")
        await flushed(listener)

    assert recorder.slice_ids == [after.id]


# -- delivering a slice whose messages cannot be read -------------------------------------------------------


async def test_a_slice_whose_messages_cannot_be_read_is_dead_lettered_for_each_consumer_not_retried(
    memory_db: Any,
) -> None:
    units = MemoryUnitRepository(memory_db)
    piece = await append(units, "u1")
    healthy = await append(units, "u2")
    await memory_db["memory_units"].update_one(
        {"_id": "u1"}, {"$set": {"conversation_messages.0.role": "function"}}
    )
    a, b = Recorder("a"), Recorder("b")
    async with quick_listener(memory_db, registry_of(a, b)) as listener:
        await flushed(listener)

    assert a.slice_ids == b.slice_ids == [healthy.id]
    assert a.attempts == [healthy.id]  # no consumer was handed the unreadable slice
    letters = await DeadLetterRepository(memory_db).list()
    assert sorted((x.consumer, x.slice_id, x.unit_id) for x in letters) == [
        ("a", piece.id, "u1"),
        ("b", piece.id, "u1"),
    ]
    assert all(x.error.startswith("UnreadableUnit: unit 'u1' cannot be read") for x in letters)
    assert (await ListenerCheckpoints(memory_db, "default").unit("u1")).delivered == {piece.id}

    await memory_db["memory_units"].update_one(
        {"_id": "u1"}, {"$set": {"conversation_messages.0.role": "user"}}
    )
    report = await replay_dead_letters(memory_db, registry_of(a, b))

    assert len(report.delivered) == 2 and a.slice_ids == b.slice_ids == [healthy.id, piece.id]
    assert await DeadLetterRepository(memory_db).list() == []


async def test_replaying_a_letter_whose_unit_is_still_unreadable_keeps_it(memory_db: Any) -> None:
    piece = await append(MemoryUnitRepository(memory_db), "u1")
    await memory_db["memory_units"].update_one(
        {"_id": "u1"}, {"$set": {"conversation_messages.0.role": "function"}}
    )
    letters = DeadLetterRepository(memory_db)
    await letters.record(
        group="default",
        consumer="a",
        unit_id="u1",
        core_id="core",
        slice_id=piece.id or "",
        error="UnreadableUnit: earlier",
        attempts=0,
    )
    consumer = Recorder("a")

    report = await replay_dead_letters(memory_db, registry_of(consumer))

    (kept,) = report.failed
    assert consumer.attempts == [] and kept.replays == 1 and "cannot be read" in kept.error
    assert len(await letters.list()) == 1


# -- the change stream --------------------------------------------------------------------------------------


def update_event(label: str, unit_id: Any, fields: dict[str, Any]) -> dict[str, Any]:
    return {
        "_id": {"_data": f"82{label}"},
        "operationType": "update",
        "documentKey": {"_id": unit_id},
        "updateDescription": {"updatedFields": fields, "removedFields": []},
    }


async def seed_token(database: Any) -> None:
    checkpoints = ListenerCheckpoints(database, "default")
    await checkpoints.open_group("beginning")
    await checkpoints.save_token({"_data": "82STORED"})


async def test_the_catch_up_scan_skips_unreadable_units_and_delivers_the_others(
    memory_db: Any, caplog: pytest.LogCaptureFixture
) -> None:
    await store_foreign_units(memory_db)
    good = await append(MemoryUnitRepository(memory_db), "good")
    recorder = Recorder()
    database = ScriptedStreams(memory_db, [])
    async with quick_listener(database, registry_of(recorder)) as listener:
        await until(lambda: recorder.slice_ids == [good.id])
        assert listener.source == "change_stream"

    assert len(skipped(caplog)) == len(foreign_units())


async def test_events_of_unreadable_units_are_skipped_and_the_token_moves_past_them(
    memory_db: Any, caplog: pytest.LogCaptureFixture
) -> None:
    await store_foreign_units(memory_db)
    units = MemoryUnitRepository(memory_db)
    piece = await append(units, "good")
    await seed_token(memory_db)
    insert = {
        "_id": {"_data": "82INSERT"},
        "operationType": "insert",
        "documentKey": {"_id": OBJECT_ID},
        "fullDocument": {"_id": OBJECT_ID, "core_id": "core", "slices": [{"id": "x", "summary": "typed"}]},
    }
    events = [
        insert,  # a document with an ObjectId id: its slices are never offered
        update_event("RESYNC", "bad-slice", {"slices.0.summary": 6}),  # re-read: unreadable
        update_event("GOOD", "good", {"slices.0": slice_document(piece), "version": 1}),
    ]
    recorder = Recorder()
    database = ScriptedStreams(memory_db, [StreamScript(steps=list(events))])
    async with quick_listener(database, registry_of(recorder)):
        await until(lambda: recorder.slice_ids == [piece.id])
        checkpoints = ListenerCheckpoints(memory_db, "default")

        async def token_moved() -> bool:
            group = await checkpoints.group()
            return group is not None and group.resume_token == {"_data": "82GOOD"}

        await until(token_moved)

    logged = skipped(caplog)
    assert len(logged) == 2
    assert any("'bad-slice'" in m for m in logged) and any(str(OBJECT_ID) in m for m in logged)
