"""Shared fixtures: databases for the three test layers, and a wrapper that makes races visible.

``database`` is parametrized over backends: the embedded in-memory one always, and a real MongoDB when
``MONGODB_URI`` is set (those cases carry the ``integration`` marker and are skipped, with the reason shown,
otherwise). A test that uses ``database`` is therefore a contract both backends must keep.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import inspect
import os
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from partner_repo import close_database, in_memory_database, init_repository
from partner_repo.mongo import SHARD_KEYS, driver
from tests.emulator_gaps import gap_for
from tests.skip_summary import pytest_terminal_summary  # noqa: F401  (a hook: the skips summed up by reason)

with contextlib.suppress(ImportError):  # the mcp extra
    # The MCP SDK binds ``stdio_client(errlog=sys.stderr)`` when it is first imported. Imported first inside a
    # test that runs `partner-repo mcp` in process (click's CliRunner swaps sys.stderr for a stream with no
    # file descriptor), every later stdio client of the session would write its server's stderr there and
    # fail; importing it here binds the real stderr, as in any application.
    importlib.import_module("mcp.client.stdio")

MONGODB_URI = os.environ.get("MONGODB_URI")
NO_SERVER = (
    "MONGODB_URI is not set: run `scripts/test-server` (or `docker compose up -d` and export MONGODB_URI) "
    "for integration tests"
)


def _server_is_secantusdb(uri: str) -> bool:
    """Whether the server behind ``uri`` is SecantusDB (its ``buildInfo`` names its own version)."""
    from pymongo import MongoClient
    from pymongo.errors import PyMongoError

    client: MongoClient[dict[str, object]] = MongoClient(uri, serverSelectionTimeoutMS=5000)
    try:
        return "secantusVersion" in client.admin.command("buildInfo")
    except PyMongoError:
        return False  # unreachable: the integration tests fail on their own and say why
    finally:
        client.close()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """On SecantusDB, the tests of :data:`tests.emulator_gaps.SECANTUSDB_GAPS` run as strict ``xfail``: one
    that passes fails the run, saying its gap is gone."""
    if not MONGODB_URI or not any(item.get_closest_marker("integration") for item in items):
        return
    if not _server_is_secantusdb(MONGODB_URI):
        return
    for item in items:
        gap = gap_for(item.nodeid)
        if gap is not None and item.get_closest_marker("integration"):
            reason = f"SecantusDB gap: {gap.reason} (an XPASS means the gap is gone: remove it from the list)"
            item.add_marker(pytest.mark.xfail(reason=reason, strict=True))


def requires_mongodb() -> str:
    """The URI of the real MongoDB, or skip the test with a visible reason."""
    if not MONGODB_URI:
        pytest.skip(NO_SERVER)  # MONGODB_URI unset: the integration layer cannot run
    return MONGODB_URI


SHARDED = os.environ.get("PARTNER_REPO_TEST_SHARDED") == "1"
"""Set by the GitHub workflow's sharded job (MONGODB_URI at a mongos): each test database gets its shardable
collections sharded as docs/sharding.md says, before anything creates their indexes."""


async def real_database(**client_options: Any) -> Any:
    """A fresh database on the real server, through a client of its own (``client_options`` for it, such as
    ``event_listeners``)."""
    client: Any = driver.new_client(
        requires_mongodb(), tz_aware=True, serverSelectionTimeoutMS=5000, **client_options
    )
    database = client[f"partner_repo_test_{uuid.uuid4().hex[:12]}"]
    if SHARDED:
        await client.admin.command("enableSharding", database.name)
        for collection, key in SHARD_KEYS.items():
            await client.admin.command("shardCollection", f"{database.name}.{collection}", key=key)
    return database


@pytest.fixture(params=["memory", pytest.param("mongodb", marks=pytest.mark.integration)])
async def database(request: pytest.FixtureRequest) -> AsyncIterator[Any]:
    """A fresh, initialized database on each backend the machine has."""
    if request.param == "memory":
        db = in_memory_database(f"test_{uuid.uuid4().hex[:8]}")
        yield await init_repository(db)
        return
    db = await real_database()
    await init_repository(db)
    try:
        yield db
    finally:
        await db.client.drop_database(db.name)
        await close_database(db)


@pytest.fixture
async def memory_db() -> Any:
    """A fresh in-memory database (for behaviour only the embedded backend can show, such as forced races)."""
    return await init_repository(in_memory_database(f"test_{uuid.uuid4().hex[:8]}"))


class YieldingCursor:
    """A cursor that yields to the event loop before it fetches, as a network round trip would."""

    def __init__(self, cursor: Any) -> None:
        self._cursor = cursor

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._cursor, name)
        if name in {"sort", "skip", "limit", "max_time_ms", "batch_size", "hint"}:
            return lambda *a, **k: YieldingCursor(attribute(*a, **k))
        return attribute

    async def to_list(self, length: int | None = None) -> list[Any]:
        await _network_pause()
        return list(await self._cursor.to_list(length))

    def __aiter__(self) -> AsyncIterator[Any]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[Any]:
        await _network_pause()
        async for document in self._cursor:
            yield document


class YieldingCollection:
    """Wraps a mongomock-motor collection so every call yields first (and is recorded in ``calls``).

    mongomock-motor runs each call synchronously, so without this, concurrent tasks never interleave between a
    read and a write and no race could ever show.
    """

    def __init__(self, collection: Any) -> None:
        self._collection = collection
        self.calls: list[str] = []

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._collection, name)
        if not callable(attribute) or name == "with_options":
            return attribute
        if name == "find":

            def cursor(*args: Any, **kwargs: Any) -> YieldingCursor:
                self.calls.append(name)
                return YieldingCursor(attribute(*args, **kwargs))

            return cursor
        if name == "aggregate":  # a coroutine, as in PyMongo async (partner_repo.mongo.driver awaits both)

            async def aggregating(*args: Any, **kwargs: Any) -> YieldingCursor:
                self.calls.append(name)
                result = attribute(*args, **kwargs)
                return YieldingCursor(await result if inspect.isawaitable(result) else result)

            return aggregating

        async def call(*args: Any, **kwargs: Any) -> Any:
            self.calls.append(name)
            await _network_pause()
            result = attribute(*args, **kwargs)
            if asyncio.iscoroutine(result):
                result = await result
            await _network_pause()
            return result

        return call


class YieldingDatabase:
    """A database whose collections are :class:`YieldingCollection`; pass it where a database is expected."""

    def __init__(self, database: Any) -> None:
        self._database = database
        self._collections: dict[str, YieldingCollection] = {}

    def __getitem__(self, name: str) -> YieldingCollection:
        if name not in self._collections:
            self._collections[name] = YieldingCollection(self._database[name])
        return self._collections[name]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._database, name)


async def _network_pause() -> None:
    for _ in range(3):
        await asyncio.sleep(0)


@pytest.fixture
def racy_db(memory_db: Any) -> YieldingDatabase:
    """The in-memory database with every call yielding to the event loop, so concurrent tasks interleave."""
    return YieldingDatabase(memory_db)


async def until(check: Callable[[], Any], *, within: float = 5.0) -> None:
    """Wait until ``check()`` (a bool, or an awaitable bool) holds; fail the test after ``within`` seconds.

    For outcomes nothing can await directly (a delivery by a background listener, a consumer still busy).
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while True:
        value = check()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return
        assert loop.time() < deadline, "condition not reached in time"
        await asyncio.sleep(0.005)
