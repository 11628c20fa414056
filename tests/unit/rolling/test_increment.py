"""Resolving the increment: what of a snapshot follows the longest overlap with the unit's stored tail."""

from __future__ import annotations

from typing import Any

import pytest

from partner_repo import (
    MemoryCoreRepository,
    MemoryUnit,
    MemoryUnitRepository,
    Message,
    RollingService,
    resolve_chat_increment,
)
from partner_repo.units._heads import UnitTail
from tests.unit.rolling.support import RecordingSummarizer, numbered

A = Message(role="user", content="a")
B = Message(role="assistant", content="b")
C = Message(role="user", content="c")
X = Message(role="user", content="x")


@pytest.mark.parametrize(
    ("stored", "snapshot", "increment"),
    [
        pytest.param([A, B, C], [A, B, C], [], id="full overlap"),
        pytest.param([X, A, B], [A, B, C], [C], id="partial overlap"),
        pytest.param([X, X], [A, B, C], [A, B, C], id="no overlap"),
        pytest.param([A, B, C, X, A], [A, B], [B], id="snapshot shorter than the stored tail"),
        pytest.param([A, B, A, B], [A, B, A, B, C], [C], id="repeated messages: the largest overlap wins"),
        pytest.param([X, A], [A, A, B], [A, B], id="repeated first message: overlap of one"),
        pytest.param([A, A], [A, A, A, B], [A, B], id="a run of repeats"),
        pytest.param([B, A], [A, B], [B], id="same messages, other order"),
        pytest.param([], [A, B], [A, B], id="empty unit"),
        pytest.param([A, B], [], [], id="empty snapshot"),
    ],
)
def test_the_increment_follows_the_longest_overlap(
    stored: list[Message], snapshot: list[Message], increment: list[Message]
) -> None:
    assert resolve_chat_increment(stored, snapshot) == increment


def test_a_role_difference_is_no_overlap() -> None:
    said_by_user = Message(role="user", content="b")
    assert resolve_chat_increment([A, said_by_user], [B, C]) == [B, C]


@pytest.fixture
def service(memory_db: Any) -> RollingService:
    return RollingService(memory_db, RecordingSummarizer())


async def test_without_a_core_the_increment_is_the_whole_snapshot(service: RollingService) -> None:
    assert await service.resolve_increment("nobody", numbered(0, 3)) == numbered(0, 3)


async def test_without_a_stored_unit_the_increment_is_the_whole_snapshot(
    memory_db: Any, service: RollingService
) -> None:
    await MemoryCoreRepository(memory_db).get_or_create("agent")
    assert await service.resolve_increment("agent", numbered(0, 3)) == numbered(0, 3)


async def test_with_an_empty_stored_unit_the_increment_is_the_whole_snapshot(
    memory_db: Any, service: RollingService
) -> None:
    session = await MemoryCoreRepository(memory_db).session_id("agent")
    await MemoryUnitRepository(memory_db).save(MemoryUnit(id=session, core_id="agent"))
    assert await service.resolve_increment("agent", numbered(0, 3)) == numbered(0, 3)


async def test_the_increment_is_resolved_against_the_unit_of_the_current_session(
    memory_db: Any, service: RollingService
) -> None:
    cores, units = MemoryCoreRepository(memory_db), MemoryUnitRepository(memory_db)
    old_session = await cores.session_id("agent")
    await units.append(old_session, numbered(0, 4), "old", core_id="agent")
    new_session = await cores.refresh_session("agent")
    await units.append(new_session, numbered(10, 12), "new", core_id="agent")

    assert await service.resolve_increment("agent", numbered(2, 6)) == numbered(2, 6)
    assert await service.resolve_increment("agent", numbered(10, 14)) == numbered(12, 14)


async def test_only_the_last_snapshot_length_messages_of_the_unit_are_read(
    memory_db: Any, service: RollingService, monkeypatch: pytest.MonkeyPatch
) -> None:
    cores, units = MemoryCoreRepository(memory_db), MemoryUnitRepository(memory_db)
    session = await cores.session_id("agent")
    await units.append(session, numbered(0, 500), "long", core_id="agent")
    tails: list[int] = []
    original_tail = MemoryUnitRepository.tail

    async def spy_tail(self: MemoryUnitRepository, unit_id: str, n: int) -> UnitTail | None:
        tails.append(n)
        return await original_tail(self, unit_id, n)

    async def no_whole_unit(self: MemoryUnitRepository, unit_id: str) -> None:
        raise AssertionError("the whole unit was read")

    monkeypatch.setattr(MemoryUnitRepository, "tail", spy_tail)
    monkeypatch.setattr(MemoryUnitRepository, "get", no_whole_unit)

    assert await service.resolve_increment("agent", numbered(495, 505)) == numbered(500, 505)
    assert tails == [10]
