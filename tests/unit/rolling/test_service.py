"""RollingService.roll: Partner's triggerRolling on a shared database."""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta
from typing import Any

import pytest
from pymongo.errors import AutoReconnect

from partner_repo import (
    SUMMARY_ON_EMPTY,
    SUMMARY_ON_EXCEPTION,
    ConnectionFailed,
    InvalidInput,
    MemoryCoreRepository,
    MemoryUnitRepository,
    Message,
    RollingConfig,
    RollingResult,
    RollingService,
    roll_chat_messages,
)
from partner_repo.cores import CoreLease
from partner_repo.mongo import CORES
from tests.unit.rolling.support import T0, Clock, RecordingSummarizer, assert_slices_tile, numbered


@pytest.fixture
def summarizer() -> RecordingSummarizer:
    return RecordingSummarizer()


@pytest.fixture
def service(memory_db: Any, summarizer: RecordingSummarizer) -> RollingService:
    return RollingService(memory_db, summarizer)


async def test_a_roll_appends_the_increment_with_one_slice_to_the_sessions_unit(
    cores: MemoryCoreRepository, units: MemoryUnitRepository, service: RollingService
) -> None:
    core = await cores.record("agent", numbered(0, 8), at=T0)
    now = T0 + timedelta(minutes=3)

    result = await service.roll("agent", now=now)

    unit = await units.get(core.memory_session_id)
    assert unit is not None and result is not None
    assert unit.conversation_messages == numbered(0, 8)
    [piece] = unit.complete_slices()
    assert (piece.start_index, piece.end_index) == (0, 8)
    assert piece.created_at == now
    assert piece.summary == "summary of message 0 .. message 7"
    assert (piece.rolling_size, piece.retain_divisor) == (8, 6)
    assert result.memory_slice == piece


async def test_the_result_describes_the_roll(cores: MemoryCoreRepository, service: RollingService) -> None:
    await cores.record("agent", numbered(0, 4), at=T0)
    await service.roll("agent", now=T0)
    await cores.record("agent", numbered(4, 12), at=T0)

    result = await service.roll("agent", now=T0 + timedelta(seconds=1))

    assert result is not None
    assert result.memory_unit.id == await cores.session_id("agent")
    assert result.memory_unit.core_id == "agent"
    assert result.memory_unit.message_count == 12
    assert result.increment_messages == tuple(numbered(4, 12))
    assert result.summary == result.memory_slice.summary == "summary of message 4 .. message 11"
    assert (result.rolling_size, result.retain_divisor) == (8, 6)  # the window kept 4 // 6 = 0, then 8 came


async def test_the_result_is_frozen(cores: MemoryCoreRepository, service: RollingService) -> None:
    await cores.record("agent", numbered(0, 4), at=T0)
    result = await service.roll("agent", now=T0)
    assert result is not None
    with pytest.raises(Exception, match="frozen"):
        result.summary = "changed"  # type: ignore[misc]


async def test_another_process_rebuilds_the_same_result_from_the_database(
    cores: MemoryCoreRepository, units: MemoryUnitRepository, service: RollingService
) -> None:
    await cores.record("agent", numbered(0, 9), at=T0)
    result = await service.roll("agent", now=T0)
    assert result is not None

    piece = await units.get_slice(result.memory_unit.id, result.slice_id)
    assert piece is not None
    messages = await units.slice_messages(result.memory_unit.id, result.slice_id)
    assert RollingResult.from_slice(result.memory_unit.id, "agent", piece, messages) == result


async def test_the_summarizer_is_given_exactly_the_increment(
    cores: MemoryCoreRepository, service: RollingService, summarizer: RecordingSummarizer
) -> None:
    await cores.record("agent", numbered(0, 12), at=T0)
    await service.roll("agent", now=T0)  # keeps 12 // 6 = 2 messages as context
    await cores.record("agent", numbered(12, 15), at=T0)
    await service.roll("agent", now=T0)
    assert summarizer.calls == [numbered(0, 12), numbered(12, 15)]


async def test_a_roll_trims_the_window_by_the_formula(
    cores: MemoryCoreRepository, service: RollingService
) -> None:
    await cores.record("agent", numbered(0, 20), at=T0)
    await service.roll("agent", now=T0)
    assert await cores.snapshot("agent") == roll_chat_messages(numbered(0, 20), 20, 6) == numbered(17, 20)


async def test_without_now_the_slice_is_stamped_by_the_services_clock(
    memory_db: Any, cores: MemoryCoreRepository
) -> None:
    clock = Clock(T0 + timedelta(days=2))
    service = RollingService(memory_db, RecordingSummarizer(), clock=clock)
    await cores.record("agent", numbered(0, 3), at=T0)
    result = await service.roll("agent")
    assert result is not None and result.memory_slice.created_at == clock.now


@pytest.mark.parametrize("window", [0, 1])
async def test_a_window_of_at_most_one_message_does_nothing(
    cores: MemoryCoreRepository, units: MemoryUnitRepository, service: RollingService, window: int
) -> None:
    core = await cores.record("agent", numbered(0, window), at=T0)
    assert await service.roll("agent", refresh_session=True, now=T0) is None
    after = await cores.get("agent")
    assert after is not None
    assert after.chat_messages == numbered(0, window)
    assert after.memory_session_id == core.memory_session_id
    assert await units.get(core.memory_session_id) is None


async def test_roll_of_a_missing_core_is_none(cores: MemoryCoreRepository, service: RollingService) -> None:
    assert await service.roll("nobody", now=T0) is None
    assert await cores.get("nobody") is None


async def test_an_empty_increment_stores_nothing_and_keeps_the_window(
    cores: MemoryCoreRepository, units: MemoryUnitRepository, service: RollingService
) -> None:
    core = await cores.record("agent", numbered(0, 4), at=T0)
    await units.append(core.memory_session_id, numbered(0, 4), "stored earlier", core_id="agent")

    assert await service.roll("agent", now=T0) is None
    unit = await units.get(core.memory_session_id)
    assert unit is not None and len(unit.slices) == 1
    assert await cores.snapshot("agent") == numbered(0, 4)
    assert await cores.session_id("agent") == core.memory_session_id


async def test_an_empty_increment_only_refreshes_the_session_when_asked(
    cores: MemoryCoreRepository, units: MemoryUnitRepository, service: RollingService
) -> None:
    core = await cores.record("agent", numbered(0, 4), at=T0)
    await units.append(core.memory_session_id, numbered(0, 4), "stored earlier", core_id="agent")

    assert await service.roll("agent", refresh_session=True, now=T0 + timedelta(hours=2)) is None
    after = await cores.get("agent")
    assert after is not None
    assert after.memory_session_id != core.memory_session_id
    assert after.session_started_at == T0 + timedelta(hours=2)
    assert after.chat_messages == numbered(0, 4)


async def test_a_roll_with_session_refresh_stores_in_the_old_unit_and_starts_a_new_session(
    cores: MemoryCoreRepository, units: MemoryUnitRepository, service: RollingService
) -> None:
    core = await cores.record("agent", numbered(0, 6), at=T0)
    result = await service.roll("agent", refresh_session=True, now=T0 + timedelta(minutes=1))

    assert result is not None and result.memory_unit.id == core.memory_session_id
    after = await cores.get("agent")
    assert after is not None
    assert after.memory_session_id != core.memory_session_id
    assert after.session_started_at == T0 + timedelta(minutes=1)
    assert after.chat_messages == numbered(5, 6)


async def test_a_summarizer_that_raises_gives_the_exception_summary_and_logs_the_core(
    memory_db: Any, cores: MemoryCoreRepository, caplog: pytest.LogCaptureFixture
) -> None:
    async def broken(messages: list[Message]) -> str:
        raise RuntimeError("model unavailable")

    await cores.record("core-with-a-broken-llm", numbered(0, 3), at=T0)
    with caplog.at_level(logging.ERROR, logger="partner_repo"):
        result = await RollingService(memory_db, broken).roll("core-with-a-broken-llm", now=T0)

    assert result is not None and result.summary == SUMMARY_ON_EXCEPTION == "no summary, due to exception"
    [record] = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert "core-with-a-broken-llm" in record.getMessage()
    assert record.exc_info is not None and "model unavailable" in str(record.exc_info[1])
    assert await cores.snapshot("core-with-a-broken-llm") == numbered(3, 3)  # rolled all the same


@pytest.mark.parametrize("blank", ["", "   \n\t", None])
async def test_a_blank_summary_gives_the_empty_summary(
    memory_db: Any, cores: MemoryCoreRepository, blank: str | None
) -> None:
    async def says_nothing(messages: list[Message]) -> str | None:
        return blank

    await cores.record("agent", numbered(0, 3), at=T0)
    result = await RollingService(memory_db, says_nothing).roll("agent", now=T0)  # type: ignore[arg-type]
    assert (
        result is not None
        and result.summary == SUMMARY_ON_EMPTY == "no summary, due to empty summarize result"
    )


async def test_a_summary_that_is_not_text_counts_as_a_failure(
    memory_db: Any, cores: MemoryCoreRepository, caplog: pytest.LogCaptureFixture
) -> None:
    async def returns_a_dict(messages: list[Message]) -> Any:
        return {"summary": "x"}

    await cores.record("agent", numbered(0, 3), at=T0)
    with caplog.at_level(logging.ERROR, logger="partner_repo"):
        result = await RollingService(memory_db, returns_a_dict).roll("agent", now=T0)
    assert result is not None and result.summary == SUMMARY_ON_EXCEPTION
    assert any("agent" in r.getMessage() and "dict" in r.getMessage() for r in caplog.records)


async def test_the_summary_is_stored_as_the_summarizer_returned_it(
    memory_db: Any, cores: MemoryCoreRepository
) -> None:
    async def padded(messages: list[Message]) -> str:
        return "  a summary with spaces \n"

    await cores.record("agent", numbered(0, 3), at=T0)
    result = await RollingService(memory_db, padded).roll("agent", now=T0)
    assert result is not None and result.summary == "  a summary with spaces \n"


async def test_a_roll_that_would_pass_the_soft_limit_continues_in_a_new_unit(
    memory_db: Any, cores: MemoryCoreRepository, units: MemoryUnitRepository
) -> None:
    service = RollingService(memory_db, RecordingSummarizer(), RollingConfig(unit_soft_limit_bytes=1500))
    first = await cores.record("agent", numbered(0, 12), at=T0)
    await service.roll("agent", now=T0)
    first_unit = await units.head(first.memory_session_id)
    assert first_unit is not None and first_unit.size_bytes <= 1500

    await cores.record("agent", numbered(12, 24), at=T0)
    result = await service.roll("agent", now=T0 + timedelta(seconds=1))

    assert result is not None
    continuation = await units.get(result.memory_unit.id)
    assert continuation is not None
    assert continuation.id != first.memory_session_id
    assert continuation.previous_unit_id == first.memory_session_id
    assert await cores.session_id("agent") == continuation.id
    assert continuation.conversation_messages == numbered(12, 24)  # the increment, nothing lost or doubled
    assert_slices_tile(continuation)
    unchanged = await units.head(first.memory_session_id)
    assert unchanged is not None and unchanged.message_count == 12


async def test_a_new_unit_takes_an_increment_larger_than_the_soft_limit(
    memory_db: Any, cores: MemoryCoreRepository, units: MemoryUnitRepository
) -> None:
    service = RollingService(memory_db, RecordingSummarizer(), RollingConfig(unit_soft_limit_bytes=100))
    core = await cores.record("agent", numbered(0, 12), at=T0)
    result = await service.roll("agent", now=T0)
    assert result is not None and result.memory_unit.id == core.memory_session_id
    unit = await units.get(core.memory_session_id)
    assert unit is not None and unit.previous_unit_id is None and len(unit.conversation_messages) == 12


async def test_an_append_whose_reply_was_lost_is_sent_again_and_stored_once(
    cores: MemoryCoreRepository,
    units: MemoryUnitRepository,
    service: RollingService,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    original = MemoryUnitRepository.append
    slice_ids: list[str | None] = []

    async def reply_lost_once(self: MemoryUnitRepository, *args: Any, **kwargs: Any) -> Any:
        slice_ids.append(kwargs["slice_id"])
        stored = await original(self, *args, **kwargs)
        if len(slice_ids) == 1:
            raise AutoReconnect("connection reset after the write")
        return stored

    monkeypatch.setattr(MemoryUnitRepository, "append", reply_lost_once)
    core = await cores.record("agent", numbered(0, 6), at=T0)

    result = await service.roll("agent", now=T0)

    assert result is not None
    assert len(slice_ids) == 2 and slice_ids[0] == slice_ids[1] == result.slice_id
    unit = await units.get(core.memory_session_id)
    assert unit is not None and unit.conversation_messages == numbered(0, 6) and len(unit.slices) == 1


async def test_an_append_that_keeps_failing_leaves_the_window_and_frees_the_core(
    cores: MemoryCoreRepository, service: RollingService, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = MemoryUnitRepository.append

    async def unreachable(self: MemoryUnitRepository, *args: Any, **kwargs: Any) -> Any:
        raise AutoReconnect("no primary")

    monkeypatch.setattr(MemoryUnitRepository, "append", unreachable)
    await cores.record("agent", numbered(0, 6), at=T0)
    with pytest.raises(ConnectionFailed) as raised:  # the library's error (issue 30), the driver's chained
        await service.roll("agent", now=T0)
    assert isinstance(raised.value.__cause__, AutoReconnect)
    assert await cores.snapshot("agent") == numbered(0, 6)

    monkeypatch.setattr(MemoryUnitRepository, "append", original)
    assert await service.roll("agent", now=T0) is not None


async def test_the_lease_is_released_after_a_roll(
    cores: MemoryCoreRepository, service: RollingService
) -> None:
    await cores.record("agent", numbered(0, 6), at=T0)
    await service.roll("agent", now=T0)
    core = await cores.get("agent")
    assert core is not None and core.lease_owner is None


async def test_the_lease_is_renewed_while_a_slow_summarizer_runs(
    memory_db: Any, cores: MemoryCoreRepository
) -> None:
    started, finish = asyncio.Event(), asyncio.Event()

    async def slow(messages: list[Message]) -> str:
        started.set()
        await finish.wait()
        return "slow summary"

    config = RollingConfig(lease_duration=timedelta(milliseconds=300))  # renewed every 100 ms
    await cores.record("agent", numbered(0, 6), at=T0)
    rolling = asyncio.create_task(RollingService(memory_db, slow, config).roll("agent"))
    await started.wait()
    await asyncio.sleep(0.45)  # longer than the lease: only renewal keeps it

    assert await RollingService(memory_db, RecordingSummarizer(), config).roll("agent") is None
    finish.set()
    result = await rolling
    assert result is not None and result.summary == "slow summary"


async def test_a_roller_that_lost_its_lease_while_summarizing_stores_nothing(
    memory_db: Any, cores: MemoryCoreRepository, units: MemoryUnitRepository
) -> None:
    # A takeover needs the holder silent for its ttl, so only a summary slower than a third of the lease
    # (the beat interval) can be overtaken: this one takes half the lease (on the service's monotonic clock)
    # and is taken over meanwhile.
    now = [0.0]

    async def stalls_until_taken_over(messages: list[Message]) -> str:
        lease = CoreLease(memory_db)
        await lease.acquire(
            "agent", "newcomer", duration=timedelta(minutes=1), silent=await lease.state("agent")
        )
        now[0] += RollingConfig().lease_duration.total_seconds() / 2
        return "too late"

    core = await cores.record("agent", numbered(0, 6), at=T0)
    service = RollingService(memory_db, stalls_until_taken_over, monotonic=lambda: now[0])
    assert await service.roll("agent", now=T0) is None
    assert await units.get(core.memory_session_id) is None
    assert await cores.snapshot("agent") == numbered(0, 6)
    after = await cores.get("agent")
    assert after is not None and after.lease_owner == "newcomer"


async def test_a_roller_that_lost_its_lease_after_storing_leaves_the_trim_to_the_next_roller(
    memory_db: Any,
    cores: MemoryCoreRepository,
    units: MemoryUnitRepository,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    original = MemoryUnitRepository.append

    async def stalls_after_storing(self: MemoryUnitRepository, *args: Any, **kwargs: Any) -> Any:
        stored = await original(self, *args, **kwargs)
        lease = CoreLease(memory_db)
        await lease.acquire(
            "agent", "newcomer", duration=timedelta(minutes=1), silent=await lease.state("agent")
        )
        return stored

    monkeypatch.setattr(MemoryUnitRepository, "append", stalls_after_storing)
    core = await cores.record("agent", numbered(0, 6), at=T0)
    with caplog.at_level(logging.WARNING, logger="partner_repo"):
        result = await RollingService(memory_db, RecordingSummarizer()).roll("agent", now=T0)

    assert result is not None
    assert await cores.snapshot("agent") == numbered(0, 6)
    assert any("lease taken over" in r.getMessage() for r in caplog.records)
    unit = await units.get(core.memory_session_id)
    assert unit is not None and unit.conversation_messages == numbered(0, 6)


@pytest.mark.parametrize(
    ("core_id", "options"),
    [("", {}), (None, {}), ("agent", {"now": "today"}), ("agent", {"refresh_session": "yes"})],
)
async def test_roll_refuses_bad_arguments(
    cores: MemoryCoreRepository, service: RollingService, core_id: Any, options: dict[str, Any]
) -> None:
    await cores.record("agent", numbered(0, 6), at=T0)
    with pytest.raises(InvalidInput):
        await service.roll(core_id, **options)
    assert await cores.snapshot("agent") == numbered(0, 6)


@pytest.mark.parametrize(
    "arguments",
    [
        {"summarizer": "not callable"},
        {"summarizer": RecordingSummarizer(), "config": {"trigger_limit": 3}},
        {"summarizer": RecordingSummarizer(), "clock": "noon"},
    ],
)
def test_the_service_refuses_bad_dependencies(memory_db: Any, arguments: dict[str, Any]) -> None:
    with pytest.raises(InvalidInput):
        RollingService(memory_db, **arguments)


async def test_a_roller_whose_core_was_erased_after_it_stored_ends_without_an_error(
    memory_db: Any,
    cores: MemoryCoreRepository,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    original = MemoryUnitRepository.append

    async def erased_after_storing(self: MemoryUnitRepository, *args: Any, **kwargs: Any) -> Any:
        stored = await original(self, *args, **kwargs)
        await memory_db[CORES].delete_one({"_id": "agent"})  # a forget that took the lease over meanwhile
        return stored

    monkeypatch.setattr(MemoryUnitRepository, "append", erased_after_storing)
    await cores.record("agent", numbered(0, 6), at=T0)
    with caplog.at_level(logging.WARNING, logger="partner_repo"):
        result = await RollingService(memory_db, RecordingSummarizer()).roll("agent", now=T0)

    assert result is not None and await cores.get("agent") is None
    assert any("erased after slice" in r.getMessage() for r in caplog.records)
