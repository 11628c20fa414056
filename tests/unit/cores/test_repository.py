"""MemoryCoreRepository: a core's current memory session, created and refreshed atomically."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from partner_repo import DEFAULT_CORE_ID, MemoryCore, MemoryCoreRepository, NotFound

T0 = datetime(2024, 1, 1, tzinfo=UTC)


def is_uuid4(value: str) -> bool:
    return uuid.UUID(value).version == 4


async def test_get_of_an_unknown_core_is_none(cores: MemoryCoreRepository) -> None:
    assert await cores.get("nobody") is None


async def test_require_of_an_unknown_core_raises_not_found(cores: MemoryCoreRepository) -> None:
    with pytest.raises(NotFound, match="no core 'nobody'"):
        await cores.require("nobody")


async def test_require_of_a_core_is_what_get_answers(cores: MemoryCoreRepository) -> None:
    created = await cores.get_or_create("alice", now=T0)

    assert await cores.require("alice") == created == await cores.get("alice")


async def test_get_or_create_creates_the_default_core_with_a_fresh_session(
    cores: MemoryCoreRepository,
) -> None:
    core = await cores.get_or_create(now=T0)

    assert isinstance(core, MemoryCore)
    assert core.id == DEFAULT_CORE_ID == "default"
    assert is_uuid4(core.memory_session_id)
    assert core.session_started_at == T0
    assert await cores.get() == core


async def test_get_or_create_returns_the_existing_core_unchanged(cores: MemoryCoreRepository) -> None:
    created = await cores.get_or_create("agent", now=T0)
    again = await cores.get_or_create("agent", now=T0 + timedelta(days=1))
    assert again == created


async def test_session_id_is_the_cores_current_session(cores: MemoryCoreRepository) -> None:
    session = await cores.session_id("agent")
    core = await cores.get("agent")
    assert core is not None and core.memory_session_id == session
    assert await cores.session_id("agent") == session


async def test_refresh_session_starts_a_new_session(cores: MemoryCoreRepository) -> None:
    old = await cores.get_or_create("agent", now=T0)
    later = T0 + timedelta(hours=3)

    new_session = await cores.refresh_session("agent", now=later)

    assert new_session != old.memory_session_id and is_uuid4(new_session)
    core = await cores.get("agent")
    assert core is not None
    assert core.memory_session_id == new_session == await cores.session_id("agent")
    assert core.session_started_at == later
    assert core.version == old.version + 1


async def test_refresh_session_without_now_stamps_the_current_time(cores: MemoryCoreRepository) -> None:
    await cores.get_or_create("agent", now=T0)
    before = datetime.now(UTC) - timedelta(seconds=1)
    await cores.refresh_session("agent")
    core = await cores.get("agent")
    assert core is not None and before <= core.session_started_at <= datetime.now(UTC)


async def test_refresh_session_creates_a_missing_core(cores: MemoryCoreRepository) -> None:
    session = await cores.refresh_session("fresh", now=T0)
    core = await cores.get("fresh")
    assert core is not None
    assert (core.memory_session_id, core.session_started_at, core.chat_messages) == (session, T0, [])


async def test_refresh_session_keeps_the_rest_of_the_core(
    memory_db: Any, cores: MemoryCoreRepository
) -> None:
    await cores.get_or_create("agent", now=T0)
    await memory_db["memory_cores"].update_one(
        {"_id": "agent"}, {"$set": {"chat_messages": [{"role": "user", "content": "still here"}]}}
    )
    await cores.refresh_session("agent")
    core = await cores.get("agent")
    assert core is not None and [m.content for m in core.chat_messages] == ["still here"]


async def test_cores_are_independent(cores: MemoryCoreRepository) -> None:
    a = await cores.session_id("a")
    await cores.refresh_session("b")
    assert await cores.session_id("a") == a
