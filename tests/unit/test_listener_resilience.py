"""The listener rides out an unreachable database: failed checkpoint writes and polling passes are retried,
and nothing is lost or delivered twice."""

from __future__ import annotations

from typing import Any

import pytest
from listener_support import Recorder, append, quick_listener, registry_of
from pymongo.errors import AutoReconnect

from partner_repo import ListenerCheckpoints, MemoryUnitRepository


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
