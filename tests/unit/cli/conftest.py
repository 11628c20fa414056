"""Fixtures of the command-line tests: the in-memory database every command of a test connects to."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from partner_repo import in_memory_database, init_repository
from partner_repo.cli._runtime import Connection
from tests.unit.cli.support import Seed


@pytest.fixture
def every_command_uses(monkeypatch: pytest.MonkeyPatch) -> Callable[[Seed], Any]:
    """``every_command_uses(seed)``: a fresh, initialized in-memory database, seeded by ``seed``, that every
    command the test runs connects to whatever it was told (``Connection.open`` returns it, ``MONGODB_URI``
    is unset). Returns the database, for the test to look into."""

    def prepared(seed: Seed) -> Any:
        database = asyncio.run(init_repository(in_memory_database("cli")))
        asyncio.run(seed(database))

        async def open_prepared(self: Connection, **options: Any) -> Any:
            return database

        monkeypatch.setattr(Connection, "open", open_prepared)
        monkeypatch.delenv("MONGODB_URI", raising=False)
        return database

    return prepared
