"""AfterRollingRegistry: registration order, one entry per consumer, a raising consumer isolated."""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime

import pytest

from partner_repo import AfterRolling, AfterRollingRegistry, InvalidInput, MemorySlice, Message, RollingResult

RESULT = RollingResult.from_slice(
    "unit-1",
    "core-1",
    MemorySlice(
        id="slice-1", start_index=0, end_index=1, summary="s", created_at=datetime(2024, 1, 1, tzinfo=UTC)
    ),
    [Message(role="user", content="hi")],
)


class Named:
    def __init__(self, name: str, log: list[str], fail: bool = False) -> None:
        self.name = name
        self._log = log
        self._fail = fail

    async def consume(self, result: RollingResult) -> None:
        self._log.append(f"{self.name}:{result.slice_id}")
        if self._fail:
            raise RuntimeError("boom")


async def test_trigger_runs_every_consumer_in_registration_order() -> None:
    log: list[str] = []
    registry = AfterRollingRegistry()
    for name in ("c", "a", "b"):
        registry.register(Named(name, log))

    assert await registry.trigger(RESULT) == []
    assert log == ["c:slice-1", "a:slice-1", "b:slice-1"]


def test_registering_the_same_consumer_twice_keeps_one() -> None:
    consumer = Named("once", [])
    registry = AfterRollingRegistry()
    registry.register(consumer)
    registry.register(consumer)

    assert registry.consumers() == [consumer]


def test_a_different_consumer_under_a_taken_name_is_refused() -> None:
    registry = AfterRollingRegistry([Named("indexer", [])])
    with pytest.raises(InvalidInput, match="'indexer'"):
        registry.register(Named("indexer", []))
    assert len(registry) == 1


async def test_a_raising_consumer_does_not_stop_the_others_and_is_logged_with_name_and_slice(
    caplog: pytest.LogCaptureFixture,
) -> None:
    log: list[str] = []
    registry = AfterRollingRegistry(
        [Named("first", log), Named("broken", log, fail=True), Named("last", log)]
    )

    with caplog.at_level(logging.ERROR):
        failed = await registry.trigger(RESULT)

    assert failed == ["broken"]
    assert log == ["first:slice-1", "broken:slice-1", "last:slice-1"]
    (record,) = caplog.records
    assert "'broken'" in record.getMessage() and "slice-1" in record.getMessage()
    assert record.exc_info is not None and "boom" in str(record.exc_info[1])


def test_unregister_by_object_or_name() -> None:
    first, second = Named("first", []), Named("second", [])
    registry = AfterRollingRegistry([first, second])

    assert registry.unregister(first) is True
    assert registry.unregister("second") is True
    assert registry.unregister("second") is False
    assert registry.consumers() == []


def test_consumers_is_a_copy_and_get_finds_by_name() -> None:
    consumer = Named("x", [])
    registry = AfterRollingRegistry([consumer])
    registry.consumers().clear()

    assert registry.consumers() == [consumer]
    assert registry.get("x") is consumer and registry.get("y") is None


@pytest.mark.parametrize("bad", [object(), Named("", []), Named("  ", [])])
def test_something_that_is_not_a_named_consumer_is_refused(bad: object) -> None:
    with pytest.raises(InvalidInput):
        AfterRollingRegistry().register(bad)  # type: ignore[arg-type]


def test_a_plain_class_with_name_and_consume_is_an_after_rolling() -> None:
    assert isinstance(Named("n", []), AfterRolling)


async def test_a_consumer_raising_cancelled_error_does_not_stop_the_others() -> None:
    log: list[str] = []

    class Cancelling:
        name = "cancelling"

        async def consume(self, result: RollingResult) -> None:
            raise asyncio.CancelledError

    registry = AfterRollingRegistry([Named("first", log), Cancelling(), Named("last", log)])

    assert await registry.trigger(RESULT) == ["cancelling"]
    assert log == ["first:slice-1", "last:slice-1"]
