"""The listener's change-stream path on the wire: the real Motor driver against a scripted mockupdb server.

Only the change stream goes over the wire: ``memory_units.watch()`` is the mock server's, every other call
(the units the events describe, checkpoints, dead letters) goes to an in-memory database, so each test
scripts exactly the ``aggregate``/``getMore`` conversation it is about and asserts the commands the driver
sends. The units in memory are appended first; the scripted events then describe those appends the way
MongoDB reports them.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import pytest
from bson import Timestamp
from mockupdb import MockupDB, Request

from partner_repo import (
    AfterRollingRegistry,
    Backoff,
    ListenerCheckpoints,
    MemorySlice,
    MemoryUnitRepository,
    Message,
    RollingListener,
    RollingService,
    in_memory_database,
    init_repository,
)
from partner_repo.mongo import UNITS, slice_document
from tests.conftest import until
from tests.unit.listener.support import Recorder
from tests.wire.wire_support import UNITS_NS as NS
from tests.wire.wire_support import motor_client, plain, receive, server_fixture

pytestmark = pytest.mark.wire

T0 = datetime(2024, 6, 1, 8, 0, tzinfo=UTC)
STORED = {"_data": "82STORED"}


# -- the split database -------------------------------------------------------------------------------------


class WireUnits:
    """``memory_units`` whose change stream is the mock server's and whose documents are in memory."""

    def __init__(self, wire: Any, memory: Any) -> None:
        self._wire = wire
        self._memory = memory

    def watch(self, *args: Any, **kwargs: Any) -> Any:
        return self._wire.watch(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._memory, name)


class SplitDatabase:
    def __init__(self, wire: Any, memory: Any) -> None:
        self._wire = wire
        self._memory = memory

    def __getitem__(self, name: str) -> Any:
        if name == UNITS:
            return WireUnits(self._wire[name], self._memory[name])
        return self._memory[name]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._memory, name)


def housekeeping(request: Request) -> bool:
    """Closing a stream kills its cursor, closing a client ends its sessions: answered, not scripted."""
    name = request.command_name
    if name == "killCursors":
        return bool(request.replies({"cursorsKilled": list(request.doc["cursors"])}))
    if name == "endSessions":
        return bool(request.replies({}))
    return False


server = server_fixture(autoresponder=housekeeping, request_timeout=10)


@pytest.fixture
async def memory() -> Any:
    return await init_repository(in_memory_database("wire_listener"))


@pytest.fixture
async def database(server: MockupDB, memory: Any) -> AsyncIterator[SplitDatabase]:
    unexpected = "a request nobody scripted was sent"
    async with motor_client(server, quiet_for=0.05, unexpected=unexpected) as client:
        yield SplitDatabase(client["partner"], memory)


# -- scripting ----------------------------------------------------------------------------------------------


WITHOUT_MESSAGES = [
    {"$project": {"fullDocument.conversation_messages": 0}},
    {
        "$set": {
            "updateDescription": {
                "$cond": {
                    "if": {"$eq": ["$operationType", "update"]},
                    "then": {
                        "$mergeObjects": [
                            "$updateDescription",
                            {
                                "updatedFields": {
                                    "$arrayToObject": {
                                        "$filter": {
                                            "input": {"$objectToArray": "$updateDescription.updatedFields"},
                                            "cond": {
                                                "$and": [
                                                    {"$ne": ["$$this.k", "conversation_messages"]},
                                                    {
                                                        "$ne": [
                                                            {
                                                                "$indexOfBytes": [
                                                                    "$$this.k",
                                                                    "conversation_messages.",
                                                                ]
                                                            },
                                                            0,
                                                        ]
                                                    },
                                                ]
                                            },
                                        }
                                    }
                                }
                            },
                        ]
                    },
                    "else": "$$REMOVE",
                }
            }
        }
    },
]
"""The stages after ``$changeStream``: messages never travel in an event, neither in ``fullDocument`` nor as
the ``conversation_messages`` keys of an append's ``updatedFields``. Written out, not imported from the
package (``partner_repo/units/_feed.py``): a copy on purpose, what the server must receive stated apart from
the code that sends it."""


def change_stream_stage(request: Request) -> dict[str, Any]:
    assert request.doc["aggregate"] == "memory_units"
    pipeline = plain(request.doc["pipeline"])
    assert pipeline[1:] == WITHOUT_MESSAGES
    return dict(pipeline[0]["$changeStream"])


def first_batch(cursor_id: int, events: list[dict[str, Any]], post_batch: dict[str, Any]) -> dict[str, Any]:
    return {"cursor": {"id": cursor_id, "ns": NS, "firstBatch": events, "postBatchResumeToken": post_batch}}


def next_batch(cursor_id: int, events: list[dict[str, Any]], post_batch: dict[str, Any]) -> dict[str, Any]:
    return {"cursor": {"id": cursor_id, "ns": NS, "nextBatch": events, "postBatchResumeToken": post_batch}}


def token(label: str) -> dict[str, str]:
    return {"_data": f"82{label}"}


def update_event(label: str, unit_id: str, fields: dict[str, Any]) -> dict[str, Any]:
    """An update event as MongoDB reports an append: new messages, the slice, the derived counters."""
    return {
        "_id": token(label),
        "operationType": "update",
        "clusterTime": Timestamp(1717228800, len(label)),
        "wallTime": T0.replace(tzinfo=None),
        "ns": {"db": "partner", "coll": "memory_units"},
        "documentKey": {"_id": unit_id},
        "updateDescription": {"updatedFields": fields, "removedFields": [], "truncatedArrays": []},
    }


def appended_at_end(label: str, unit_id: str, position: int, piece: MemorySlice) -> dict[str, Any]:
    fields: dict[str, Any] = {
        f"conversation_messages.{n}": {"role": "user", "content": f"m{n}"}
        for n in range(piece.start_index or 0, piece.end_index or 0)
    }
    fields[f"slices.{position}"] = slice_document(piece)
    fields.update(message_count=piece.end_index, version=position + 1, updated_at=T0.replace(tzinfo=None))
    return update_event(label, unit_id, fields)


def whole_array(label: str, unit_id: str, pieces: list[MemorySlice]) -> dict[str, Any]:
    return update_event(label, unit_id, {"slices": [slice_document(p) for p in pieces], "version": 9})


def answer_idle(server: MockupDB, cursor_id: int, post_batch: dict[str, Any]) -> Any:
    """From now on, every getMore is an empty batch (the stream is idle)."""

    def reply(request: Request) -> bool:
        if request.command_name != "getMore":
            return False
        return bool(request.replies(next_batch(cursor_id, [], post_batch)))

    return server.autoresponds(reply)


async def stored_token(database: Any) -> Any:
    checkpoint = await ListenerCheckpoints(database, "default").group()
    return None if checkpoint is None else (checkpoint.resume_token, checkpoint.token_kind)


async def token_is(database: Any, expected: dict[str, Any], kind: str = "resume_after") -> bool:
    return await stored_token(database) == (expected, kind)


async def seed_token(database: Any, value: dict[str, Any] = STORED) -> None:
    """A group that already ran: its checkpoint holds a token, so the stream resumes instead of scanning."""
    checkpoints = ListenerCheckpoints(database, "default")
    await checkpoints.open_group("beginning")
    await checkpoints.save_token(value)


async def append(units: MemoryUnitRepository, unit_id: str, minute: int, count: int = 2) -> MemorySlice:
    batch = [Message(role="user", content=f"{unit_id}-{minute}-{n}") for n in range(count)]
    return await units.append(
        unit_id, batch, f"summary {minute}", core_id="core", created_at=T0.replace(minute=minute)
    )


class ScriptedStream:
    """One test's listener, reading its change stream from the mock server: a recording listener on the split
    database, started by the test, which then scripts the server's replies, lets the stream go idle and stops
    it. The one setup every test below shares."""

    def __init__(self, server: MockupDB, database: SplitDatabase) -> None:
        self.server = server
        self.database = database
        self.recorder = Recorder()
        self.listener = RollingListener(
            database,
            AfterRollingRegistry([self.recorder]),
            poll_interval=0.05,
            backoff=Backoff(initial=0.01, maximum=0.02, jitter=0),
            drain_timeout=2,
        )
        self._idle: Any = None
        self._running = False

    async def start(self, *, resuming: bool = True) -> None:
        """Start the listener; ``resuming``, as a group that already ran (its checkpoint holds ``STORED``), so
        its stream resumes instead of scanning first."""
        if resuming:
            await seed_token(self.database)
        await self.listener.start()
        self._running = True

    def idle(self, cursor_id: int, post_batch: dict[str, Any]) -> None:
        """From now on, every getMore is an empty batch (the stream is idle), until the listener stopped."""
        self._idle = answer_idle(self.server, cursor_id, post_batch)

    def opens_idle(self, opened: Request, cursor_id: int, post_batch: dict[str, Any]) -> None:
        """Answer the stream's opening ``aggregate`` with an empty first batch, and every getMore after it
        with an empty one: the stream opened and nothing happens."""
        opened.replies(first_batch(cursor_id, [], post_batch))
        self.idle(cursor_id, post_batch)

    async def stop(self) -> None:
        """Stop the listener (an idle stream still answering it while it drains), then the idle answers."""
        if self._running:
            self._running = False
            await self.listener.stop()
        if self._idle is not None:
            self._idle.cancel()
            self._idle = None


@pytest.fixture
async def stream(server: MockupDB, database: SplitDatabase) -> AsyncIterator[ScriptedStream]:
    scripted = ScriptedStream(server, database)
    yield scripted
    await scripted.stop()  # a test that failed half-way leaves no listener running


# -- tests --------------------------------------------------------------------------------------------------


async def test_both_update_forms_are_delivered_in_order_and_each_token_saved(
    server: MockupDB, database: Any, stream: ScriptedStream, memory: Any
) -> None:
    units = MemoryUnitRepository(memory)
    first, second = await append(units, "u1", 10), await append(units, "u1", 20)
    late = await append(units, "u1", 5)  # stored in the middle of the array: MongoDB reports the whole array
    await stream.start()

    opened = await receive(server, "aggregate")
    assert change_stream_stage(opened) == {"resumeAfter": STORED}
    opened.replies(first_batch(7, [appended_at_end("A", "u1", 0, first)], token("A")))
    more = await receive(server, "getMore")
    assert more.doc["getMore"] == 7 and more.doc["maxTimeMS"] == 50
    await until(lambda: token_is(database, token("A")))
    more.replies(
        next_batch(
            7,
            [appended_at_end("B", "u1", 1, second), whole_array("C", "u1", [late, first, second])],
            token("C"),
        )
    )
    stream.idle(7, token("C"))
    await until(lambda: len(stream.recorder.results) == 3)
    await stream.stop()

    assert stream.recorder.slice_ids == [first.id, second.id, late.id]
    assert stream.recorder.results[2].increment_messages == tuple(
        Message(role="user", content=f"u1-5-{n}") for n in range(2)
    )
    assert await stored_token(database) == (token("C"), "resume_after")


async def test_inserted_and_replaced_units_are_delivered(
    server: MockupDB, database: Any, stream: ScriptedStream, memory: Any
) -> None:
    units = MemoryUnitRepository(memory)
    inserted = await append(units, "new-unit", 1)
    replaced = await append(units, "saved-unit", 2)
    await stream.start()

    opened = await receive(server, "aggregate")
    events = [
        {
            "_id": token("I"),
            "operationType": "insert",
            "documentKey": {"_id": "new-unit"},
            "fullDocument": {"_id": "new-unit", "core_id": "core", "slices": [slice_document(inserted)]},
        },
        {
            "_id": token("R"),
            "operationType": "replace",
            "documentKey": {"_id": "saved-unit"},
            "fullDocument": {"_id": "saved-unit", "core_id": "core", "slices": [slice_document(replaced)]},
        },
        {"_id": token("D"), "operationType": "delete", "documentKey": {"_id": "gone"}},
    ]
    opened.replies(first_batch(8, events, token("D")))
    stream.idle(8, token("D"))
    await until(lambda: len(stream.recorder.results) == 2)
    await stream.stop()

    assert stream.recorder.slice_ids == [inserted.id, replaced.id]
    assert [r.memory_unit.core_id for r in stream.recorder.results] == ["core", "core"]
    assert await stored_token(database) == (token("D"), "resume_after")


async def test_an_idle_batch_saves_its_post_batch_token(
    server: MockupDB, database: Any, stream: ScriptedStream
) -> None:
    await stream.start()

    (await receive(server, "aggregate")).replies(first_batch(5, [], token("P1")))
    await until(lambda: token_is(database, token("P1")))
    (await receive(server, "getMore")).replies(next_batch(5, [], token("P2")))
    await until(lambda: token_is(database, token("P2")))
    stream.idle(5, token("P2"))
    await stream.stop()


async def test_a_resumable_error_is_resumed_by_the_driver_from_the_saved_token(
    server: MockupDB, database: Any, stream: ScriptedStream, memory: Any
) -> None:
    units = MemoryUnitRepository(memory)
    first, second = await append(units, "u1", 1), await append(units, "u1", 2)
    await stream.start()

    (await receive(server, "aggregate")).replies(
        first_batch(11, [appended_at_end("A", "u1", 0, first)], token("A"))
    )
    await until(lambda: token_is(database, token("A")))
    (await receive(server, "getMore")).replies(
        {
            "ok": 0,
            "code": 6,
            "codeName": "HostUnreachable",
            "errmsg": "connection reset",
            "errorLabels": ["ResumableChangeStreamError"],
        }
    )
    resumed = await receive(server, "aggregate")
    assert change_stream_stage(resumed) == {"resumeAfter": token("A")}  # the token the listener saved
    resumed.replies(first_batch(12, [appended_at_end("B", "u1", 1, second)], token("B")))
    stream.idle(12, token("B"))
    await until(lambda: len(stream.recorder.results) == 2)
    await stream.stop()

    assert stream.recorder.slice_ids == [first.id, second.id]
    assert await stored_token(database) == (token("B"), "resume_after")


async def test_history_lost_drops_the_token_catches_up_by_scan_and_reopens_without_it(
    server: MockupDB, database: Any, stream: ScriptedStream, memory: Any, caplog: pytest.LogCaptureFixture
) -> None:
    units = MemoryUnitRepository(memory)
    missed = [await append(units, "u1", 1), await append(units, "u2", 2), await append(units, "u1", 3)]
    caplog.set_level(logging.INFO, logger="partner_repo.listener")
    await stream.start()

    (await receive(server, "aggregate")).replies(
        {
            "ok": 0,
            "code": 286,
            "codeName": "ChangeStreamHistoryLost",
            "errmsg": "Resume of change stream was not possible: the resume point is gone from the oplog",
        }
    )
    reopened = await receive(server, "aggregate")
    assert change_stream_stage(reopened) == {}  # never the dead token again
    assert await stored_token(database) == (None, None)
    stream.opens_idle(reopened, 21, token("Q"))
    await until(lambda: len(stream.recorder.results) == 3)
    await until(lambda: token_is(database, token("Q")))
    await stream.stop()

    assert sorted(stream.recorder.slice_ids) == sorted(p.id for p in missed)
    assert [r.slice_id for r in stream.recorder.results if r.memory_unit.id == "u1"] == [
        missed[0].id,
        missed[2].id,
    ]
    assert "cannot resume from its token" in caplog.text and "catch-up scan offered 3 slice(s)" in caplog.text


async def test_history_lost_mid_stream_recovers_the_same_way(
    server: MockupDB, database: Any, stream: ScriptedStream, memory: Any
) -> None:
    units = MemoryUnitRepository(memory)
    seen = await append(units, "u1", 1)
    await stream.start()

    (await receive(server, "aggregate")).replies(
        first_batch(31, [appended_at_end("A", "u1", 0, seen)], token("A"))
    )
    await until(lambda: stream.recorder.slice_ids == [seen.id])
    missed = await append(units, "u1", 2)
    (await receive(server, "getMore")).replies(
        {"ok": 0, "code": 286, "codeName": "ChangeStreamHistoryLost", "errmsg": "history lost"}
    )
    reopened = await receive(server, "aggregate")
    assert change_stream_stage(reopened) == {}
    stream.opens_idle(reopened, 32, token("Q"))
    await until(lambda: stream.recorder.slice_ids == [seen.id, missed.id])
    await stream.stop()


async def test_a_token_the_server_calls_invalid_is_dropped_at_once(
    server: MockupDB, database: Any, stream: ScriptedStream
) -> None:
    await stream.start()

    (await receive(server, "aggregate")).replies(
        {
            "ok": 0,
            "code": 260,
            "codeName": "InvalidResumeToken",
            "errmsg": "Attempted to resume a stream on a collection which has been dropped",
        }
    )
    reopened = await receive(server, "aggregate")
    assert change_stream_stage(reopened) == {}
    stream.opens_idle(reopened, 71, token("FRESH"))
    await until(lambda: token_is(database, token("FRESH")))
    await stream.stop()


async def test_a_token_refused_with_an_unfamiliar_error_is_dropped_after_a_few_tries_never_looped_on(
    server: MockupDB, database: Any, stream: ScriptedStream
) -> None:
    await stream.start()

    for _ in range(3):
        refused = await receive(server, "aggregate")
        assert change_stream_stage(refused) == {"resumeAfter": STORED}
        refused.replies(
            {"ok": 0, "code": 50811, "codeName": "Location50811", "errmsg": "KeyString format error"}
        )
    reopened = await receive(server, "aggregate")
    assert change_stream_stage(reopened) == {}
    stream.opens_idle(reopened, 72, token("FRESH"))
    await until(lambda: token_is(database, token("FRESH")))
    await stream.stop()


async def test_an_invalidate_event_leads_to_a_scan_and_a_stream_started_after_it(
    server: MockupDB, database: Any, stream: ScriptedStream, memory: Any, caplog: pytest.LogCaptureFixture
) -> None:
    units = MemoryUnitRepository(memory)
    before = await append(units, "u1", 1)
    await stream.start()

    invalidate = {"_id": token("INV"), "operationType": "invalidate", "clusterTime": Timestamp(1717228900, 1)}
    drop = {"_id": token("DROP"), "operationType": "drop", "ns": {"db": "partner", "coll": "memory_units"}}
    (await receive(server, "aggregate")).replies(first_batch(0, [drop, invalidate], token("INV")))
    reopened = await receive(server, "aggregate")
    assert change_stream_stage(reopened) == {"startAfter": token("INV")}
    stream.opens_idle(reopened, 41, token("AFTER"))
    await until(lambda: stream.recorder.slice_ids == [before.id])
    await until(lambda: token_is(database, token("AFTER")))
    await stream.stop()

    assert "invalidated" in caplog.text


async def test_a_restart_after_an_invalidate_starts_after_it(
    server: MockupDB, database: Any, stream: ScriptedStream
) -> None:
    checkpoints = ListenerCheckpoints(database, "default")
    await checkpoints.open_group("beginning")
    await checkpoints.save_token(token("INV"), "start_after")
    await stream.start(resuming=False)

    opened = await receive(server, "aggregate")
    assert change_stream_stage(opened) == {"startAfter": token("INV")}
    stream.opens_idle(opened, 51, token("INV"))
    await stream.listener.flush()
    await stream.stop()


async def test_a_new_group_opens_the_stream_then_backfills_by_scan(
    server: MockupDB, database: Any, stream: ScriptedStream, memory: Any
) -> None:
    units = MemoryUnitRepository(memory)
    history = [await append(units, "u1", 1), await append(units, "u1", 2)]
    await stream.start(resuming=False)

    opened = await receive(server, "aggregate")
    assert change_stream_stage(opened) == {}
    assert (
        stream.recorder.results == []
    )  # the stream is open before the scan, so nothing written meanwhile is missed
    stream.opens_idle(opened, 61, token("NOW"))
    await stream.listener.flush()
    await until(lambda: stream.recorder.slice_ids == [p.id for p in history])
    await stream.stop()


async def test_a_standalone_server_makes_the_listener_poll(
    server: MockupDB, database: Any, stream: ScriptedStream, memory: Any
) -> None:
    units = MemoryUnitRepository(memory)
    await stream.start(resuming=False)

    (await receive(server, "aggregate")).replies(
        {
            "ok": 0,
            "code": 40573,
            "codeName": "Location40573",
            "errmsg": "The $changeStream stage is only supported on replica sets",
        }
    )
    piece = await append(units, "u1", 1)
    await stream.listener.flush()
    assert stream.listener.source == "polling"
    await stream.stop()

    assert stream.recorder.slice_ids == [piece.id]


RESUMABLE = "ResumableChangeStreamError"


@pytest.mark.parametrize(
    "error",
    [
        {"code": 11600, "codeName": "InterruptedAtShutdown", "errorLabels": [RESUMABLE]},
        {"code": 6, "codeName": "HostUnreachable", "errorLabels": [RESUMABLE]},
        {"code": 234, "codeName": "RetryChangeStream", "errorLabels": [RESUMABLE]},
        {"code": 262, "codeName": "ExceededTimeLimit"},  # a server too old for labels: the spec's codes
        {"code": 13388, "codeName": "StaleConfig"},
        {"code": 13436, "codeName": "NotPrimaryOrSecondary"},
    ],
    ids=lambda error: f"{error['codeName']}{'-labelled' if 'errorLabels' in error else ''}",
)
async def test_resumable_errors_opening_the_stream_keep_the_token_however_many_in_a_row(
    server: MockupDB, database: Any, stream: ScriptedStream, error: dict[str, Any]
) -> None:
    await stream.start()

    for _ in range(8):  # the driver may retry a retryable read once itself: four or more listener attempts
        refused = await receive(server, "aggregate")
        assert change_stream_stage(refused) == {"resumeAfter": STORED}
        assert await stored_token(database) == (STORED, "resume_after")
        refused.replies({"ok": 0, "errmsg": "not now", **error})
    reopened = await receive(server, "aggregate")
    assert change_stream_stage(reopened) == {"resumeAfter": STORED}
    assert await stored_token(database) == (STORED, "resume_after")
    stream.opens_idle(reopened, 73, token("BACK"))
    await until(lambda: token_is(database, token("BACK")))
    await stream.stop()


async def test_an_error_labelled_non_resumable_drops_the_token_at_once(
    server: MockupDB, database: Any, stream: ScriptedStream
) -> None:
    await stream.start()

    (await receive(server, "aggregate")).replies(
        {
            "ok": 0,
            "code": 9,
            "codeName": "FailedToParse",
            "errmsg": "cannot parse the resume position",
            "errorLabels": ["NonResumableChangeStreamError"],
        }
    )
    reopened = await receive(server, "aggregate")
    assert change_stream_stage(reopened) == {}
    assert await stored_token(database) == (None, None)
    stream.opens_idle(reopened, 75, token("FRESH"))
    await until(lambda: token_is(database, token("FRESH")))
    await stream.stop()


async def test_the_stream_asks_the_server_to_leave_messages_out_of_every_event(
    server: MockupDB, database: Any, stream: ScriptedStream
) -> None:
    await stream.start()

    opened = await receive(server, "aggregate")
    assert plain(opened.doc["pipeline"]) == [{"$changeStream": {"resumeAfter": STORED}}, *WITHOUT_MESSAGES]
    stream.opens_idle(opened, 76, token("P"))
    await stream.stop()


async def test_an_update_replacing_a_slices_summary_is_delivered_again_as_its_revision(
    server: MockupDB, database: Any, stream: ScriptedStream, memory: Any
) -> None:
    units = MemoryUnitRepository(memory)
    batch = [Message(role="user", content="u1 lost")]
    placeholder = await units.append(
        "u1", batch, "no summary, due to exception", core_id="core", created_at=T0, unsummarized=True
    )
    await stream.start()

    (await receive(server, "aggregate")).replies(
        first_batch(81, [appended_at_end("A", "u1", 0, placeholder)], token("A"))
    )
    await until(lambda: token_is(database, token("A")))
    replaced = await RollingService(memory, summarize_again).resummarize()
    assert [r.revision for r in replaced.replaced] == [1]
    summary_set = update_event(  # how MongoDB reports resummarize's positional $set and $unset
        "B", "u1", {"slices.0.summary": "summarized at last", "slices.0.revision": 1, "version": 2}
    )
    summary_set["updateDescription"]["removedFields"] = ["slices.0.unsummarized"]
    (await receive(server, "getMore")).replies(next_batch(81, [summary_set], token("B")))
    stream.idle(81, token("B"))
    await until(lambda: len(stream.recorder.results) == 2)
    await until(lambda: token_is(database, token("B")))
    await stream.stop()

    first, again = stream.recorder.results
    assert first.slice_id == again.slice_id == placeholder.id
    assert (first.revision, first.unsummarized, again.revision, again.is_revision) == (0, True, 1, True)
    assert again.summary == "summarized at last"
    progress = await ListenerCheckpoints(database, "default").unit("u1")
    assert progress.has_delivered((placeholder.id or "", 1))


async def summarize_again(messages: list[Message]) -> str:
    return "summarized at last"
