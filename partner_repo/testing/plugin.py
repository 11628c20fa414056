"""The pytest plugin partner-repo ships (entry point ``pytest11``): fixtures for an application's tests.

Every fixture's name starts with ``partner_repo_``, so it never clashes with an application's own fixtures.

``partner_repo_database``
    A fresh in-memory database (``partner_repo.connect(None, ...)``: documents registered, indexes created)
    for each test, closed (:func:`~partner_repo.close_database`) after it. Async: it runs on the test's event
    loop through pytest-asyncio (auto or strict mode).
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from partner_repo.mongo import Database, close_database, connect


def _async_fixture() -> Callable[[Any], Any]:
    """pytest-asyncio's fixture decorator when installed (it works in strict mode too), else pytest's."""
    try:
        import pytest_asyncio
    except ImportError:  # pragma: no cover - an application testing async code has an async plugin
        return pytest.fixture
    return pytest_asyncio.fixture


@_async_fixture()
async def partner_repo_database() -> AsyncIterator[Database]:
    """A fresh, initialized in-memory database of its own for the test; closed after it."""
    database = await connect(None, f"test_{uuid.uuid4().hex[:12]}")
    try:
        yield database
    finally:
        await close_database(database)
