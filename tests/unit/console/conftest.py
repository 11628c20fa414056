"""The console's tests share one seeded in-memory database per module (seeding rolls and runs a listener)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest_asyncio

from partner_repo import in_memory_database, init_repository
from tests.unit.console.support import Seeded, seed


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def seeded_memory() -> tuple[Any, Seeded]:
    database = await init_repository(in_memory_database(f"console_{uuid.uuid4().hex[:8]}"))
    return database, await seed(database)
