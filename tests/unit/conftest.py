"""Fixtures the unit tests of several packages share: the two repositories on the in-memory ``memory_db``."""

from __future__ import annotations

from typing import Any

import pytest

from partner_repo import MemoryCoreRepository, MemoryUnitRepository


@pytest.fixture
def cores(memory_db: Any) -> MemoryCoreRepository:
    """The ``memory_cores`` repository on the test's in-memory database."""
    return MemoryCoreRepository(memory_db)


@pytest.fixture
def units(memory_db: Any) -> MemoryUnitRepository:
    """The ``memory_units`` repository on the test's in-memory database."""
    return MemoryUnitRepository(memory_db)
