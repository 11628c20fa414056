"""The listener rides out an unreachable database: failed checkpoint writes and polling passes are retried,
and nothing is lost or delivered twice, however long the outage lasts; a source that got going again backs
off afresh."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pymongo.errors import AutoReconnect, OperationFailure

from partner_repo import Backoff, ListenerCheckpoints, MemoryUnitRepository
from partner_repo.listener.delivery import _attempts as attempts_module
from tests.conftest import until
from tests.unit.listener.faults import Outage, OutageDatabase, RecordingBackoff, ScriptedStreams, StreamScript
from tests.unit.listener.support import Recorder, append, quick_listener, registry_of


class FlakyCollection:
    """Fails the first ``failures`` calls of ``method`` with a network error, then behaves."""

    def __init__(self, collection: Any, method: str, failures: int) -> None:
        self._collection = collection
        self._method = method
        self.failures = failures

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._collection, name)
        if name != self._method:
            return attribute

        def call(*args: Any, **kwargs: Any) -> Any:
            if self.failures > 0:
                self.failures -= 1
                raise AutoReconnect("connection reset by peer")
            return attribute(*args, **kwargs)

        return call


class FlakyDatabase:
    def __init__(self, database: Any, collection: str, method: str, failures: int) -> None:
        self._database = database
        self.flaky = FlakyCollection(database[collection], method, failures)
        self._name = collection

    def __getitem__(self, name: str) -> Any:
        return self.flaky if name == self._name else self._database[name]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._database, name)


async def test_a_checkpoint_write_that_fails_is_retried_and_the_slice_delivered_once(
    memory_db: Any, caplog: pytest.LogCaptureFixture
) -> None:
    flaky = FlakyDatabase(memory_db, "listener_checkpoints", "update_one", failures=2)
    units = MemoryUnitRepository(memory_db)
    recorder = Recorder()
    async with quick_listener(flaky, registry_of(recorder)) as listener:
        piece = await append(units, "u1")
        await listener.flush()

    assert recorder.slice_ids == [piece.id]
    assert flaky.flaky.failures == 0
    assert (await ListenerCheckpoints(memory_db, "default").unit("u1")).delivered == {piece.id}
    assert "failed (AutoReconnect: connection reset by peer); retrying" in caplog.text


async def test_a_polling_pass_that_fails_is_logged_and_the_next_one_delivers(
    memory_db: Any, caplog: pytest.LogCaptureFixture
) -> None:
    flaky = FlakyDatabase(memory_db, "memory_units", "find", failures=1)
    units = MemoryUnitRepository(memory_db)
    piece = await append(units, "u1")
    recorder = Recorder()
    async with quick_listener(flaky, registry_of(recorder), poll_interval=0.005) as listener:
        await listener.flush()

    assert recorder.slice_ids == [piece.id]
    assert flaky.flaky.failures == 0
    assert "polling pass failed (AutoReconnect" in caplog.text


# -- outages of any length, and backoff that starts afresh ---------------------------------------------------

TINY = Backoff(initial=1e-6, multiplier=2.0, maximum=1e-5, jitter=0)
HISTORY_LOST = OperationFailure("history lost", code=286, details={"code": 286, "errmsg": "history lost"})


async def test_a_listener_survives_an_outage_of_more_than_a_thousand_failures_and_then_delivers(
    memory_db: Any,
) -> None:
    outage = Outage()
    recorder = Recorder()
    listener = quick_listener(OutageDatabase(memory_db, outage), registry_of(recorder), backoff=TINY)
    await listener.start()
    outage.down = True
    await until(lambda: outage.failures > 1_100, within=30)
    piece = await append(MemoryUnitRepository(memory_db), "u1")
    outage.down = False

    await until(lambda: recorder.slice_ids == [piece.id], within=10)
    assert listener.source == "polling"
    assert await listener.stop()


async def test_a_checkpoint_write_failing_more_than_a_thousand_times_in_a_row_is_still_retried(
    memory_db: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(attempts_module, "STORAGE_BACKOFF", TINY)
    flaky = FlakyDatabase(memory_db, "listener_checkpoints", "update_one", failures=1_100)
    recorder = Recorder()
    piece = await append(MemoryUnitRepository(memory_db), "u1")
    async with quick_listener(flaky, registry_of(recorder)) as listener:
        async with asyncio.timeout(20):
            await listener.flush()

    assert recorder.slice_ids == [piece.id]
    assert flaky.flaky.failures == 0
    assert (await ListenerCheckpoints(memory_db, "default").unit("u1")).delivered == {piece.id}


async def test_a_change_stream_that_got_going_again_starts_its_backoff_afresh(memory_db: Any) -> None:
    reset = AutoReconnect("connection reset by peer")
    database = ScriptedStreams(
        memory_db,
        [
            StreamScript(steps=[reset]),  # opens, then fails: retry 1
            StreamScript(open_error=AutoReconnect("connection refused")),  # fails to open: retry 2
            StreamScript(steps=[reset]),  # opens again, then fails: a fresh incident, retry 1
        ],
    )
    backoff = RecordingBackoff()
    async with quick_listener(database, registry_of(Recorder()), backoff=backoff):
        await until(lambda: len(database.units.opened) == 4)

    assert backoff.retries == [1, 2, 1]


async def test_a_source_that_got_going_again_is_restarted_with_a_fresh_backoff(memory_db: Any) -> None:
    database = ScriptedStreams(
        memory_db,
        [StreamScript(steps=[RuntimeError("a bug below the listener")])],
        wrap={"listener_checkpoints": lambda collection: FlakyCollection(collection, "find_one", 2)},
    )
    backoff = RecordingBackoff()
    async with quick_listener(database, registry_of(Recorder()), backoff=backoff):
        await until(lambda: len(database.units.opened) == 2)

    # two failed starts (the checkpoint unreadable), then a stream that ran before failing: retry 1 again
    assert backoff.retries == [1, 2, 1]


async def test_history_lost_again_after_the_stream_got_going_is_recovered_at_once(memory_db: Any) -> None:
    checkpoints = ListenerCheckpoints(memory_db, "default")
    await checkpoints.open_group("beginning")
    await checkpoints.save_token({"_data": "82STORED"})
    database = ScriptedStreams(
        memory_db, [StreamScript(open_error=HISTORY_LOST), StreamScript(steps=[HISTORY_LOST])]
    )
    backoff = RecordingBackoff()
    async with quick_listener(database, registry_of(Recorder()), backoff=backoff):
        await until(lambda: len(database.units.opened) == 3)

    assert database.units.opened[0] == {"resume_after": {"_data": "82STORED"}}
    assert backoff.retries == []  # each loss of history is a first one: no pause before catching up
