"""A consumer may raise anything: ``asyncio.CancelledError`` or another ``BaseException`` from ``consume`` is
that consumer's failure (retried, then dead-lettered), never the end of its deliveries; the listener's own
cancellation (``stop()``) still cancels a consumer cleanly."""

from __future__ import annotations

import asyncio
from typing import Any

from partner_repo import DeadLetterRepository, MemoryUnitRepository, RollingResult, replay_dead_letters
from tests.conftest import until
from tests.unit.listener.support import Recorder, append, quick_listener, registry_of


class Meltdown(BaseException):
    """Not an Exception: what a careless library might raise."""


class Raising:
    def __init__(self, name: str, error: BaseException) -> None:
        self.name = name
        self._error = error
        self.attempts: list[str] = []

    async def consume(self, result: RollingResult) -> None:
        self.attempts.append(result.slice_id)
        raise self._error


class Hanging:
    name = "hanging"

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.cancelled = False

    async def consume(self, result: RollingResult) -> None:
        self.started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled = True
            raise


async def test_cancelled_error_and_other_base_exceptions_from_consumers_end_in_dead_letters(
    memory_db: Any,
) -> None:
    units = MemoryUnitRepository(memory_db)
    cancelling = Raising("cancelling", asyncio.CancelledError())
    melting = Raising("melting", Meltdown("core breach"))
    healthy = Recorder("healthy")
    listener = quick_listener(memory_db, registry_of(cancelling, melting, healthy), max_attempts=2)
    await listener.start()
    first = await append(units, "u1")
    async with asyncio.timeout(5):
        await listener.flush()
    second = await append(units, "u1")
    async with asyncio.timeout(5):
        await listener.flush()  # the listener became idle again: no delivery task died

    assert healthy.slice_ids == [first.id, second.id]
    assert cancelling.attempts == melting.attempts == [first.id, first.id, second.id, second.id]
    letters = {(x.consumer, x.slice_id): x for x in await listener.dead_letters()}
    assert set(letters) == {(c, s.id) for c in ("cancelling", "melting") for s in (first, second)}
    assert letters["cancelling", first.id].error == "CancelledError"
    assert letters["melting", first.id].error == "Meltdown: core breach"
    assert listener.lag().dead_lettered == 4
    assert await listener.stop() is True


async def test_a_consumer_calling_sys_exit_or_raising_keyboard_interrupt_fails_like_any_other(
    memory_db: Any,
) -> None:
    units = MemoryUnitRepository(memory_db)
    exiting = Raising("exiting", SystemExit(3))
    interrupting = Raising("interrupting", KeyboardInterrupt())
    healthy = Recorder("healthy")
    listener = quick_listener(memory_db, registry_of(exiting, interrupting, healthy), max_attempts=1)
    await listener.start()
    piece = await append(units, "u1")
    async with asyncio.timeout(5):
        await listener.flush()

    assert healthy.slice_ids == [piece.id]
    letters = {x.consumer: x.error for x in await listener.dead_letters()}
    assert letters == {"exiting": "SystemExit: 3", "interrupting": "KeyboardInterrupt"}
    assert await listener.stop() is True


async def test_stop_still_cancels_a_consumer_in_flight_without_counting_it_as_a_failure(
    memory_db: Any,
) -> None:
    units = MemoryUnitRepository(memory_db)
    hanging = Hanging()
    listener = quick_listener(memory_db, registry_of(hanging))
    await listener.start()
    await append(units, "u1")
    await until(hanging.started.is_set)

    async with asyncio.timeout(5):
        assert await listener.stop(drain_timeout=0.05) is False

    assert hanging.cancelled
    assert await DeadLetterRepository(memory_db).list() == []  # delivered again after a restart instead


async def test_replay_keeps_a_letter_whose_consumer_raises_cancelled_error(memory_db: Any) -> None:
    piece = await append(MemoryUnitRepository(memory_db), "u1")
    await DeadLetterRepository(memory_db).record(
        group="default",
        consumer="cancelling",
        unit_id="u1",
        core_id="core",
        slice_id=piece.id or "",
        error="RuntimeError: first failure",
        attempts=1,
    )
    cancelling = Raising("cancelling", asyncio.CancelledError())

    report = await replay_dead_letters(memory_db, registry_of(cancelling))

    assert [(x.slice_id, x.replays) for x in report.failed] == [(piece.id, 1)]
    assert len(await DeadLetterRepository(memory_db).list()) == 1
