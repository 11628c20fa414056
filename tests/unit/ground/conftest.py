"""Fixtures of the ground's tests."""

from __future__ import annotations

from typing import Any

import pytest

from partner_repo import MemoryCoreRepository, MemoryUnitRepository, Message


@pytest.fixture
async def seeded(memory_db: Any) -> Any:
    """The in-memory database holding core ``c`` and its unit ``u`` (one message, one slice ``seed``): what a
    refused call must leave as it was."""
    units = MemoryUnitRepository(memory_db)
    await units.append("u", [Message(role="user", content="kept")], "seed", core_id="c", slice_id="seed")
    await MemoryCoreRepository(memory_db).get_or_create("c")
    return memory_db
