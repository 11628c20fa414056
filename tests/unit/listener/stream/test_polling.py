"""The listener's polling path end to end on the in-memory backend (which has no change streams).

``flush()`` runs a full polling pass and waits until what it found is delivered, so these tests need no
sleeps; the poll interval is 10 ms all the same.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta
from typing import Any

import pytest

from partner_repo import (
    Backoff,
    InvalidInput,
    MemoryCoreRepository,
    MemoryUnit,
    MemoryUnitRepository,
    PartnerRepoError,
    RollingConfig,
    RollingListener,
    RollingResult,
    RollingService,
)
from partner_repo.listener.state import ListenerCheckpoints
from tests.conftest import until
from tests.unit.listener.support import T0, Recorder, append, messages, quick_listener, registry_of


async def summarize(batch: list[Any]) -> str:
    return f"{len(batch)} messages from {batch[0].content}"


async def roll(
    service: RollingService, cores: MemoryCoreRepository, core_id: str, minute: int
) -> RollingResult:
    """Record a turn in ``core_id``'s window and roll it; returns what the roll produced."""
    now = T0 + timedelta(minutes=minute)
    await cores.record(core_id, messages(2, core_id), at=now)
    result = await service.roll(core_id, now=now)
    assert result is not None
    return result


def by_unit(results: list[RollingResult]) -> dict[str, list[str]]:
    grouped: dict[str, list[str]] = {}
    for result in results:
        grouped.setdefault(result.memory_unit.id, []).append(result.slice_id)
    return grouped


# -- delivery ---------------------------------------------------------------------------------------------


async def test_the_in_memory_backend_is_detected_and_polled(memory_db: Any) -> None:
    async with quick_listener(memory_db, registry_of(Recorder())) as listener:
        await listener.flush()
        assert listener.source == "polling"


async def test_rolls_of_two_services_are_delivered_once_each_in_order_as_the_rolls_produced_them(
    memory_db: Any,
) -> None:
    cores = MemoryCoreRepository(memory_db)
    first = RollingService(memory_db, summarize, RollingConfig(retain_divisor=2))
    second = RollingService(memory_db, summarize, RollingConfig(retain_divisor=3))
    recorder = Recorder()
    rolled: list[RollingResult] = []
    async with quick_listener(memory_db, registry_of(recorder)) as listener:
        for minute in range(6):
            service = first if minute % 2 == 0 else second
            rolled.append(await roll(service, cores, "agent" if minute < 4 else "other", minute))
            if minute == 2:
                await listener.flush()
        await listener.flush()

    assert sorted(recorder.slice_ids) == sorted(r.slice_id for r in rolled)
    assert len(set(recorder.slice_ids)) == len(recorder.slice_ids)
    assert by_unit(recorder.results) == by_unit(rolled)
    delivered = {r.slice_id: r for r in recorder.results}
    for result in rolled:
        assert delivered[result.slice_id] == result
    assert {r.retain_divisor for r in recorder.results} == {2, 3}


async def test_a_slice_appended_directly_is_delivered_with_no_roll_parameters(memory_db: Any) -> None:
    units = MemoryUnitRepository(memory_db)
    recorder = Recorder()
    async with quick_listener(memory_db, registry_of(recorder)) as listener:
        piece = await append(units, "u1", count=3)
        await listener.flush()

    (result,) = recorder.results
    assert result.memory_slice == piece
    assert (result.memory_unit.id, result.memory_unit.core_id, result.memory_unit.message_count) == (
        "u1",
        "core",
        3,
    )
    assert len(result.increment_messages) == 3
    assert result.summary == piece.summary
    assert (result.rolling_size, result.retain_divisor) == (None, None)


async def test_slices_of_a_saved_unit_are_delivered_in_slice_order(memory_db: Any) -> None:
    units = MemoryUnitRepository(memory_db)
    recorder = Recorder()
    unit = MemoryUnit(
        id="imported",
        core_id="core",
        conversation_messages=messages(6),
        slices=[
            {"id": "s2", "start_index": 2, "end_index": 6, "summary": "later", "created_at": T0},
            {"id": "s1", "start_index": 0, "end_index": 2, "summary": "first", "created_at": T0},
        ],
    )
    async with quick_listener(memory_db, registry_of(recorder)) as listener:
        await units.save(unit)
        await listener.flush()

    assert recorder.slice_ids == ["s1", "s2"]
    assert [len(r.increment_messages) for r in recorder.results] == [2, 4]


async def test_a_late_slice_with_an_older_created_at_is_still_delivered(memory_db: Any) -> None:
    units = MemoryUnitRepository(memory_db)
    recorder = Recorder()
    async with quick_listener(memory_db, registry_of(recorder)) as listener:
        early = await append(units, "u1", minutes=10)
        later = await append(units, "u1", minutes=20)
        await listener.flush()
        late = await append(units, "u1", minutes=5)  # a writer whose clock is behind
        await listener.flush()

    stored = await units.get("u1")
    assert stored is not None
    assert [s.id for s in stored.complete_slices()] == [late.id, early.id, later.id]  # inserted in the middle
    assert recorder.slice_ids == [early.id, later.id, late.id]


async def test_slices_found_in_one_pass_go_in_append_order_not_clock_order(memory_db: Any) -> None:
    units = MemoryUnitRepository(memory_db)
    first = await append(units, "u1", minutes=30)
    second = await append(units, "u1", minutes=1)
    third = await append(units, "u1", minutes=15)
    recorder = Recorder()
    async with quick_listener(memory_db, registry_of(recorder)) as listener:
        await listener.flush()

    assert recorder.slice_ids == [first.id, second.id, third.id]


async def test_concurrent_appends_to_many_units_are_each_delivered_once_in_unit_order(racy_db: Any) -> None:
    units = MemoryUnitRepository(racy_db)
    recorder = Recorder()

    async def writer(unit_id: str) -> list[str]:
        return [(await append(units, unit_id, minutes=-n)).id or "" for n in range(8)]

    async with quick_listener(racy_db, registry_of(recorder), poll_interval=0.001) as listener:
        written = await asyncio.gather(*(writer(f"u{n}") for n in range(4)), writer("u0"))
        await listener.flush()

    assert sorted(recorder.slice_ids) == sorted(i for ids in written for i in ids)
    for unit_id in ("u0", "u1", "u2", "u3"):
        stored = await units.get(unit_id)
        assert stored is not None
        in_append_order = [s.id for s in sorted(stored.complete_slices(), key=lambda s: s.start_index or 0)]
        assert [r.slice_id for r in recorder.results if r.memory_unit.id == unit_id] == in_append_order


# -- restarts, groups, start_from -------------------------------------------------------------------------


async def test_a_restart_delivers_exactly_what_was_rolled_while_stopped(memory_db: Any) -> None:
    cores = MemoryCoreRepository(memory_db)
    service = RollingService(memory_db, summarize)
    recorder = Recorder()
    listener = quick_listener(memory_db, registry_of(recorder))
    async with listener:
        before = [await roll(service, cores, "agent", minute) for minute in range(3)]
        await listener.flush()
    assert recorder.slice_ids == [r.slice_id for r in before]

    while_stopped = [await roll(service, cores, "agent", minute) for minute in (3, 4)]
    recorder.results.clear()
    async with listener:
        await listener.flush()

    assert recorder.slice_ids == [r.slice_id for r in while_stopped]


async def test_a_new_group_starts_with_a_backfill_of_every_stored_slice(memory_db: Any) -> None:
    units = MemoryUnitRepository(memory_db)
    history = [await append(units, "u1"), await append(units, "u2"), await append(units, "u1")]
    recorder = Recorder()
    async with quick_listener(memory_db, registry_of(recorder), group="late-joiner") as listener:
        await listener.flush()

    assert sorted(recorder.slice_ids) == sorted(s.id or "" for s in history)


async def test_a_group_started_from_now_skips_history_but_gets_what_follows(memory_db: Any) -> None:
    units = MemoryUnitRepository(memory_db)
    await append(units, "u1")
    await append(units, "u2")
    recorder = Recorder()
    async with quick_listener(memory_db, registry_of(recorder), start_from="now") as listener:
        await listener.flush()
        assert recorder.results == []
        new_in_old_unit = await append(units, "u1")
        new_unit = await append(units, "u3")
        await listener.flush()

    assert set(recorder.slice_ids) == {new_in_old_unit.id, new_unit.id}
    assert len(recorder.slice_ids) == 2


async def test_start_from_only_applies_to_the_first_start_of_a_group(memory_db: Any) -> None:
    units = MemoryUnitRepository(memory_db)
    recorder = Recorder()
    async with quick_listener(memory_db, registry_of(recorder), start_from="now") as listener:
        await listener.flush()
    stopped_meanwhile = await append(units, "u1")
    async with quick_listener(memory_db, registry_of(recorder), start_from="now") as listener:
        await listener.flush()

    assert recorder.slice_ids == [stopped_meanwhile.id]


async def test_groups_have_their_own_checkpoints(memory_db: Any) -> None:
    units = MemoryUnitRepository(memory_db)
    indexer, notifier = Recorder("indexer"), Recorder("notifier")
    async with quick_listener(memory_db, registry_of(indexer), group="index") as listener:
        piece = await append(units, "u1")
        await listener.flush()
    async with quick_listener(memory_db, registry_of(notifier), group="notify") as listener:
        await listener.flush()

    assert indexer.slice_ids == notifier.slice_ids == [piece.id]


# -- failing consumers --------------------------------------------------------------------------------------


async def test_a_consumer_that_fails_a_few_times_is_retried_until_it_succeeds(memory_db: Any) -> None:
    units = MemoryUnitRepository(memory_db)
    flaky = Recorder("flaky", fail_times=2)
    listener = quick_listener(memory_db, registry_of(flaky), max_attempts=3)
    async with listener:
        piece = await append(units, "u1")
        await listener.flush()

    assert flaky.attempts == [piece.id] * 3
    assert flaky.slice_ids == [piece.id]
    assert await listener.dead_letters() == []


async def test_a_consumer_failing_every_attempt_gets_a_dead_letter_and_moves_on(
    memory_db: Any, caplog: pytest.LogCaptureFixture
) -> None:
    units = MemoryUnitRepository(memory_db)
    broken = Recorder("broken")
    listener = quick_listener(memory_db, registry_of(broken), max_attempts=3)
    async with listener:
        bad = await append(units, "u1")
        broken.fail_slices.add(bad.id or "")
        good = await append(units, "u1")
        await listener.flush()

    assert broken.attempts == [bad.id] * 3 + [good.id]
    assert broken.slice_ids == [good.id]
    (letter,) = await listener.dead_letters()
    assert (letter.group, letter.consumer, letter.slice_id, letter.unit_id, letter.core_id) == (
        "default",
        "broken",
        bad.id,
        "u1",
        "core",
    )
    assert letter.attempts == 3
    assert letter.error == f"RuntimeError: broken refuses {bad.id}"
    assert letter.failed_at >= letter.first_failed_at
    assert f"'broken' failed on slice {bad.id} 3 times" in caplog.text


async def test_a_dead_letter_is_replayed_once_the_consumer_works(memory_db: Any) -> None:
    units = MemoryUnitRepository(memory_db)
    consumer = Recorder("consumer")
    listener = quick_listener(memory_db, registry_of(consumer), max_attempts=2)
    async with listener:
        piece = await append(units, "u1", rolling_size=4, retain_divisor=6)
        consumer.fail_slices.add(piece.id or "")
        await listener.flush()
    assert consumer.results == []

    consumer.fail_slices.clear()
    report = await listener.replay_dead_letters()

    assert [letter.slice_id for letter in report.delivered] == [piece.id]
    (result,) = consumer.results
    assert result.memory_slice == piece and (result.rolling_size, result.retain_divisor) == (4, 6)
    assert await listener.dead_letters() == []


async def test_a_failing_consumer_does_not_delay_the_others(memory_db: Any) -> None:
    units = MemoryUnitRepository(memory_db)
    stuck = Recorder("stuck", gate=asyncio.Event())
    fast = Recorder("fast")
    async with quick_listener(memory_db, registry_of(stuck, fast)) as listener:
        pieces = [await append(units, "u1") for _ in range(3)]
        await until(lambda: len(fast.results) == 3)
        assert stuck.attempts == [pieces[0].id]  # still on its first delivery
        assert listener.lag().pending_by_consumer == {"stuck": 3, "fast": 0}
        assert stuck.gate is not None
        stuck.gate.set()
        await listener.flush()

    assert stuck.slice_ids == fast.slice_ids == [p.id for p in pieces]


async def test_a_consumer_in_backoff_does_not_delay_the_others(memory_db: Any) -> None:
    units = MemoryUnitRepository(memory_db)
    slow_retrier = Recorder("slow", fail_times=1)
    fast = Recorder("fast")
    listener = RollingListener(
        memory_db,
        registry_of(slow_retrier, fast),
        poll_interval=0.01,
        backoff=Backoff(initial=30, jitter=0),
        drain_timeout=0,
    )
    async with listener:
        piece = await append(units, "u1")
        await until(lambda: fast.slice_ids == [piece.id])
        assert slow_retrier.attempts == [piece.id]


async def test_a_consumer_that_hangs_past_the_consume_timeout_is_retried_then_dead_lettered(
    memory_db: Any,
) -> None:
    units = MemoryUnitRepository(memory_db)
    hanging = Recorder("hanging", gate=asyncio.Event())  # never opened
    listener = quick_listener(memory_db, registry_of(hanging), max_attempts=2, consume_timeout=0.02)
    async with listener:
        piece = await append(units, "u1")
        await listener.flush()

    assert hanging.attempts == [piece.id, piece.id]
    (letter,) = await listener.dead_letters()
    assert letter.error == "TimeoutError"


# -- at least once ------------------------------------------------------------------------------------------


async def test_a_delivery_cut_short_by_stop_is_delivered_again_after_a_restart(memory_db: Any) -> None:
    units = MemoryUnitRepository(memory_db)
    hanging = Recorder("consumer", gate=asyncio.Event())
    listener = quick_listener(memory_db, registry_of(hanging))
    await listener.start()
    piece = await append(units, "u1")
    await until(lambda: hanging.attempts == [piece.id])
    assert await listener.stop(drain_timeout=0) is False

    healthy = Recorder("consumer")
    async with quick_listener(memory_db, registry_of(healthy)) as restarted:
        await restarted.flush()

    assert healthy.slice_ids == [piece.id]


async def test_a_restart_redelivers_only_to_the_consumers_that_had_not_finished(memory_db: Any) -> None:
    units = MemoryUnitRepository(memory_db)
    done, hanging = Recorder("done"), Recorder("hanging", gate=asyncio.Event())
    listener = quick_listener(memory_db, registry_of(done, hanging))
    await listener.start()
    piece = await append(units, "u1")
    await until(lambda: done.slice_ids == [piece.id] and hanging.attempts == [piece.id])
    await asyncio.sleep(0.02)  # the first consumer's progress is written
    await listener.stop(drain_timeout=0)

    done_again, finishing = Recorder("done"), Recorder("hanging")
    async with quick_listener(memory_db, registry_of(done_again, finishing)) as restarted:
        await restarted.flush()

    assert finishing.slice_ids == [piece.id]
    assert done_again.results == []


async def test_stop_drains_in_flight_deliveries_and_saves_the_checkpoint(memory_db: Any) -> None:
    units = MemoryUnitRepository(memory_db)
    slow = Recorder("slow", gate=asyncio.Event())
    listener = quick_listener(memory_db, registry_of(slow))
    await listener.start()
    piece = await append(units, "u1")
    await until(lambda: slow.attempts == [piece.id])
    stopping = asyncio.create_task(listener.stop())
    await asyncio.sleep(0.02)
    assert not stopping.done()  # waiting for the delivery in flight
    assert slow.gate is not None
    slow.gate.set()
    assert await stopping is True

    progress = await ListenerCheckpoints(memory_db, "default").unit("u1")
    assert progress.delivered == {piece.id}
    again = Recorder("slow")
    async with quick_listener(memory_db, registry_of(again)) as restarted:
        await restarted.flush()
    assert again.results == []


async def test_with_few_pending_slots_the_source_waits_and_nothing_is_lost(memory_db: Any) -> None:
    units = MemoryUnitRepository(memory_db)
    pieces = [await append(units, f"u{n % 3}") for n in range(12)]
    recorder = Recorder()
    async with quick_listener(memory_db, registry_of(recorder), max_pending=2) as listener:
        await listener.flush()

    assert sorted(recorder.slice_ids) == sorted(p.id or "" for p in pieces)


# -- lag ----------------------------------------------------------------------------------------------------


async def test_lag_reports_pending_slices_and_the_last_delivered_slice_time(memory_db: Any) -> None:
    units = MemoryUnitRepository(memory_db)
    gated = Recorder(gate=asyncio.Event())
    listener = quick_listener(memory_db, registry_of(gated))
    assert listener.lag().pending == 0 and listener.lag().source is None
    async with listener:
        await append(units, "u1", minutes=1)
        await append(units, "u1", minutes=2)
        await until(lambda: listener.lag().pending == 2)
        assert listener.lag().last_delivered_slice_at is None
        assert gated.gate is not None
        gated.gate.set()
        await listener.flush()
        lag = listener.lag()

    assert lag.pending == 0
    assert lag.last_delivered_slice_at == T0 + timedelta(minutes=2)
    assert lag.last_delivered_at is not None and lag.delivered == 2 and lag.source == "polling"


# -- lifecycle and bad input --------------------------------------------------------------------------------


async def test_starting_without_consumers_is_refused(memory_db: Any) -> None:
    with pytest.raises(InvalidInput, match="at least one"):
        await RollingListener(memory_db, registry_of()).start()


async def test_starting_twice_is_refused(memory_db: Any) -> None:
    async with quick_listener(memory_db, registry_of(Recorder())) as listener:
        with pytest.raises(PartnerRepoError, match="already running"):
            await listener.start()


async def test_stopping_a_listener_that_never_started_does_nothing(memory_db: Any) -> None:
    assert await quick_listener(memory_db, registry_of(Recorder())).stop() is True


@pytest.mark.parametrize(
    "options",
    [
        {"group": " "},
        {"poll_interval": 0},
        {"poll_interval": -1},
        {"start_from": "yesterday"},
        {"source": "carrier-pigeon"},
        {"max_attempts": 0},
        {"max_pending": 0},
        {"drain_timeout": -1},
        {"backoff": 3},
        {"lease_ttl": 0},
        {"consume_timeout": 0},
    ],
)
def test_bad_options_are_refused(memory_db: Any, options: dict[str, Any]) -> None:
    with pytest.raises(InvalidInput):
        RollingListener(memory_db, registry_of(Recorder()), **options)


def test_a_registry_is_required(memory_db: Any) -> None:
    with pytest.raises(InvalidInput, match="AfterRollingRegistry"):
        RollingListener(memory_db, [Recorder()])  # type: ignore[arg-type]


async def test_the_listener_logs_its_start_with_group_and_consumers(
    memory_db: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="partner_repo.listener")
    async with quick_listener(memory_db, registry_of(Recorder("indexer")), group="search"):
        pass
    assert "listener group 'search' started with consumers ['indexer']" in caplog.text
