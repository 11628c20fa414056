"""When ``maybe_roll`` rolls: the count trigger keeps the session, the idle trigger refreshes it and wins."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from partner_repo import MemoryCoreRepository, MemoryUnitRepository, RollingConfig, RollingService
from tests.unit.rolling.support import T0, RecordingSummarizer, numbered

LIMIT = 4
IDLE = timedelta(hours=1)
BUSY_NOW = T0 + timedelta(minutes=5)
IDLE_NOW = T0 + IDLE + timedelta(milliseconds=1)


@pytest.fixture
def service(memory_db: Any) -> RollingService:
    return RollingService(
        memory_db, RecordingSummarizer(), RollingConfig(trigger_limit=LIMIT, idle_after=IDLE)
    )


@pytest.mark.parametrize(
    ("window", "now", "trigger"),
    [
        pytest.param(0, BUSY_NOW, None, id="empty, busy"),
        pytest.param(0, IDLE_NOW, None, id="empty, idle"),
        pytest.param(1, BUSY_NOW, None, id="one message, busy"),
        pytest.param(1, IDLE_NOW, None, id="one message, idle"),
        pytest.param(2, BUSY_NOW, None, id="two messages, busy"),
        pytest.param(2, IDLE_NOW, "idle", id="two messages, idle"),
        pytest.param(LIMIT - 1, BUSY_NOW, None, id="below the limit, busy: neither"),
        pytest.param(LIMIT, BUSY_NOW, "count", id="at the limit, busy: count"),
        pytest.param(LIMIT + 3, BUSY_NOW, "count", id="past the limit, busy: count"),
        pytest.param(LIMIT, IDLE_NOW, "idle", id="at the limit, idle: both, idle wins"),
        pytest.param(LIMIT - 1, IDLE_NOW, "idle", id="below the limit, idle: idle"),
        pytest.param(2, T0 + IDLE, None, id="idle exactly idle_after: not yet"),
    ],
)
async def test_the_trigger_matrix(
    cores: MemoryCoreRepository, service: RollingService, window: int, now: Any, trigger: str | None
) -> None:
    await cores.get_or_create("agent", now=T0)
    await cores.record("agent", numbered(0, window), at=T0)
    core = await cores.get("agent")
    assert core is not None
    assert service.trigger(core, now) == trigger

    result = await service.maybe_roll("agent", now=now)

    after = await cores.get("agent")
    assert after is not None
    assert (result is not None) == (trigger is not None)
    assert (after.memory_session_id != core.memory_session_id) == (trigger == "idle")
    if result is not None:
        assert result.memory_unit.id == core.memory_session_id
        assert list(result.increment_messages) == numbered(0, window)


async def test_a_count_roll_keeps_the_session(cores: MemoryCoreRepository, service: RollingService) -> None:
    core = await cores.record("agent", numbered(0, LIMIT), at=T0)
    result = await service.maybe_roll("agent", now=BUSY_NOW)
    assert result is not None
    assert await cores.session_id("agent") == core.memory_session_id


async def test_an_idle_roll_stores_in_the_old_session_then_starts_a_new_one_at_now(
    cores: MemoryCoreRepository, service: RollingService, memory_db: Any
) -> None:
    core = await cores.record("agent", numbered(0, 3), at=T0)
    result = await service.maybe_roll("agent", now=IDLE_NOW)

    assert result is not None and result.memory_unit.id == core.memory_session_id
    after = await cores.get("agent")
    assert after is not None
    assert after.memory_session_id != core.memory_session_id
    assert after.session_started_at == IDLE_NOW
    assert await MemoryUnitRepository(memory_db).get(after.memory_session_id) is None


async def test_a_core_never_written_to_is_never_idle(
    cores: MemoryCoreRepository, service: RollingService
) -> None:
    await cores.get_or_create("agent", now=T0)
    assert await service.maybe_roll("agent", now=T0 + timedelta(days=30)) is None


async def test_maybe_roll_of_a_missing_core_is_none_and_creates_nothing(
    cores: MemoryCoreRepository, service: RollingService
) -> None:
    assert await service.maybe_roll("nobody", now=IDLE_NOW) is None
    assert await cores.get("nobody") is None


async def test_an_idle_window_is_rolled_once_not_at_every_check(
    cores: MemoryCoreRepository, service: RollingService
) -> None:
    await cores.record("agent", numbered(0, 3), at=T0)
    assert await service.maybe_roll("agent", now=IDLE_NOW) is not None
    assert await service.maybe_roll("agent", now=IDLE_NOW + IDLE) is None
    assert await service.maybe_roll("agent", now=IDLE_NOW + 10 * IDLE) is None


async def test_a_new_interaction_makes_the_window_eligible_for_the_idle_trigger_again(
    cores: MemoryCoreRepository, service: RollingService
) -> None:
    await cores.record("agent", numbered(0, 12), at=T0)
    await service.maybe_roll("agent", now=IDLE_NOW)  # the window keeps 12 // 6 = 2 messages
    later = T0 + 3 * IDLE
    await cores.record("agent", numbered(12, 13), at=later)

    assert await service.maybe_roll("agent", now=later + timedelta(minutes=1)) is None
    result = await service.maybe_roll("agent", now=later + IDLE + timedelta(seconds=1))
    assert result is not None and list(result.increment_messages) == numbered(10, 13)


async def test_with_a_divisor_of_one_the_idle_scheduler_does_not_loop(memory_db: Any) -> None:
    cores = MemoryCoreRepository(memory_db)
    service = RollingService(memory_db, RecordingSummarizer(), RollingConfig(retain_divisor=1))
    await cores.record("agent", numbered(0, 5), at=T0)

    assert await service.maybe_roll("agent", now=IDLE_NOW) is not None
    assert await cores.snapshot("agent") == numbered(0, 5)  # divisor 1 keeps the whole window
    assert await service.maybe_roll("agent", now=IDLE_NOW + IDLE) is None
