"""MemoryCoreRepository.set_session: pointing a core at a given memory session (Partner state import)."""

from __future__ import annotations

from typing import Any

import pytest

from partner_repo import InvalidInput, MemoryCoreRepository


async def test_set_session_creates_a_missing_core_with_that_session(database: Any) -> None:
    cores = MemoryCoreRepository(database)

    assert await cores.set_session("c", "s-1") is True

    core = await cores.get("c")
    assert core is not None and core.memory_session_id == "s-1" and core.chat_messages == []


async def test_set_session_to_the_current_session_changes_nothing(database: Any) -> None:
    cores = MemoryCoreRepository(database)
    await cores.set_session("c", "s-1")
    before = await cores.get("c")

    assert await cores.set_session("c", "s-1") is False
    assert await cores.get("c") == before


async def test_set_session_replaces_the_session_of_an_existing_core(database: Any) -> None:
    cores = MemoryCoreRepository(database)
    old = await cores.session_id("c")

    assert await cores.set_session("c", "s-2") is True

    assert await cores.session_id("c") == "s-2" != old


async def test_set_session_with_expected_is_a_compare_and_set(database: Any) -> None:
    cores = MemoryCoreRepository(database)
    current = await cores.session_id("c")

    assert await cores.set_session("c", "s-3", expected="someone-else") is False
    assert await cores.session_id("c") == current
    assert await cores.set_session("c", "s-3", expected=current) is True
    assert await cores.session_id("c") == "s-3"


async def test_set_session_with_expected_never_creates_a_core(database: Any) -> None:
    cores = MemoryCoreRepository(database)

    assert await cores.set_session("c", "s-1", expected="s-0") is False
    assert await cores.get("c") is None


async def test_set_session_refuses_a_blank_session_id(database: Any) -> None:
    with pytest.raises(InvalidInput, match="session_id"):
        await MemoryCoreRepository(database).set_session("c", " ")
