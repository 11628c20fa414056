"""The backends a benchmark runs on, each opened the way a service would open it.

- ``memory``: the embedded in-memory database (``partner_repo.in_memory_database``: mongomock). Only counts
  are reported there (calls, documents, bytes): mongomock tests every document and copies what it answers, so
  its times say nothing about the library (the in-memory section times it as a usability bound only).
- ``wire``: the real driver over a socket to :mod:`benchmarks.wire_server`, a scripted standalone MongoDB
  running in a child process (so this process's CPU time is the library's and the driver's only): it counts
  commands and bytes exactly.
- ``mongodb``: the server every latency and scale figure is measured on, a fresh database each time, dropped
  afterwards: the one named by ``--uri`` or ``MONGODB_URI``, else the throwaway SecantusDB that
  ``python -m benchmarks`` starts (:func:`started_server`, unless ``--no-server``).
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any, TypeVar

from pymongo import monitoring

from partner_repo import in_memory_database, init_repository, mask_uri
from partner_repo.mongo import driver
from partner_repo.testing import server

ROOT = Path(__file__).resolve().parent.parent
T = TypeVar("T")
SECANTUS = "SecantusDB " + server.SERVER_PACKAGE.split("==")[-1]
_started: dict[str, str] = {}
"""The server :func:`started_server` started for this run: its URI and how the tables name it."""


def given_uri() -> str | None:
    """The server named by ``--uri`` or ``MONGODB_URI`` (None: none was)."""
    return os.environ.get("MONGODB_URI") or None


def mongodb_uri() -> str | None:
    """The server the latency and scale figures are measured on: the one given, else the one this run started
    (None: neither, with ``--no-server`` or when a section is called on its own, as the smoke test does; the
    section then measures in memory, counts only)."""
    return given_uri() or _started.get("uri")


@contextmanager
def started_server() -> Iterator[str]:
    """Start the throwaway SecantusDB of ``scripts/test-server`` for this run and yield its URI; stopped on
    exit.

    The same server, venv and options as ``scripts/test-server`` (``partner_repo.testing.server``: the pinned
    package installed on first use into ``$PARTNER_REPO_TEST_SERVER_VENV`` or ``.test-server/venv``, a free
    port on 127.0.0.1, in-memory storage); :func:`mongodb_uri` names it while it runs."""
    environment = Path(os.environ.get("PARTNER_REPO_TEST_SERVER_VENV") or ROOT / ".test-server" / "venv")
    environment = environment.absolute()
    executable = server.install(environment)
    port = server.free_port()
    log_path = environment.parent / f"secantusd-{port}.log"
    uri = f"mongodb://127.0.0.1:{port}/?{server.URI_OPTIONS}"
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [str(executable), "--host", "127.0.0.1", "--port", str(port), "--storage-path", ":memory:"],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        server.wait_ready(environment, uri, process, log_path)
        _started.update(uri=uri, label=f"{SECANTUS} (started by python -m benchmarks, 127.0.0.1)")
        yield uri
    finally:
        _started.clear()
        server.stop(process)


@contextmanager
def scripted_server() -> Any:
    """Start :mod:`benchmarks.wire_server` in a child process; yields its ``mongodb://`` URI."""
    process = subprocess.Popen(
        [sys.executable, "-m", "benchmarks.wire_server"],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        port = int(process.stdout.readline())
        yield f"mongodb://localhost:{port}/?directConnection=true"
    finally:
        assert process.stdin is not None
        process.stdin.close()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@asynccontextmanager
async def motor_database(
    uri: str, *, listeners: Sequence[monitoring.CommandListener] = (), **options: Any
) -> AsyncIterator[Any]:
    """A fresh, initialized database on ``uri`` through Motor; dropped and closed on exit."""
    client: Any = driver.new_client(
        uri, tz_aware=True, serverSelectionTimeoutMS=5000, event_listeners=list(listeners), **options
    )
    database = client[f"partner_bench_{uuid.uuid4().hex[:10]}"]
    try:
        await init_repository(database)
        yield database
    finally:
        await client.drop_database(database.name)
        await driver.close_client(client)


@asynccontextmanager
async def memory_database() -> AsyncIterator[Any]:
    yield await init_repository(in_memory_database(f"bench_{uuid.uuid4().hex[:8]}"))


DRIVER_NAME = "Motor" if driver.STACK == "motor" else "PyMongo async"
"""The driver of the installed stack (partner_repo.mongo._driver), as the tables name it."""


def describe(backend: str, uri: str | None = None) -> str:
    if backend == "memory":
        shape = "mongomock-motor" if driver.STACK == "motor" else "mongomock in PyMongo async's shape"
        return f"embedded ({shape}, in process)"
    if backend == "wire":
        scripted = "scripted standalone MongoDB (mockupdb + mongomock store, separate process)"
        return f"{DRIVER_NAME} driver -> {scripted}"
    if uri is not None and uri == _started.get("uri"):
        return _started["label"]
    return f"MongoDB at {mask_uri(uri or '')}"


def server_description(
    none: str = "none (--no-server): in memory, counts only; the scripted server counts commands and bytes",
) -> str:
    """Which server this run measures its latency and scale figures on, as its output says (``none``: what
    it says when there is none)."""
    uri = mongodb_uri()
    return none if uri is None else describe("mongodb", uri)


async def on_servers(measure: Callable[[str, str], Awaitable[T]]) -> list[T]:
    """``measure(uri, backend)`` on the scripted server, then on the server given (``--uri``,
    ``MONGODB_URI``): the sections that count commands and bytes leave a SecantusDB this run started alone,
    as the scripted server counts them exactly and a second count would only make the run longer."""
    results = []
    with scripted_server() as uri:
        results.append(await measure(uri, describe("wire")))
    real = given_uri()
    if real is not None:
        results.append(await measure(real, describe("mongodb", real)))
    return results


async def server_version(database: Any) -> str | None:
    try:
        info = await database.command("buildInfo")
    except Exception:
        return None
    return str(info.get("version"))


class YieldingCollection:
    """A mongomock-motor collection whose every call yields to the event loop first, as a round trip would.

    mongomock-motor runs calls synchronously, so without this concurrent writers never interleave between an
    append's read and its write and no optimistic retry could ever happen. Same idea as the test suite's
    ``YieldingDatabase`` (tests/conftest.py); counts calls per method so retries can be measured.
    """

    def __init__(self, collection: Any, calls: dict[str, int]) -> None:
        self._collection = collection
        self._calls = calls

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._collection, name)
        if not callable(attribute):
            return attribute
        if name in {"find", "aggregate"}:
            return lambda *a, **k: _YieldingCursor(attribute(*a, **k), self._calls, name)

        async def call(*args: Any, **kwargs: Any) -> Any:
            self._calls[name] = self._calls.get(name, 0) + 1
            await _round_trip()
            result = attribute(*args, **kwargs)
            if asyncio.iscoroutine(result):
                result = await result
            await _round_trip()
            return result

        return call


class _YieldingCursor:
    def __init__(self, cursor: Any, calls: dict[str, int], name: str) -> None:
        self._cursor = cursor
        self._calls = calls
        self._name = name

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._cursor, name)
        if name in {"sort", "skip", "limit", "max_time_ms", "batch_size", "hint"}:
            return lambda *a, **k: _YieldingCursor(attribute(*a, **k), self._calls, self._name)
        return attribute

    async def to_list(self, length: int | None = None) -> list[Any]:
        self._calls[self._name] = self._calls.get(self._name, 0) + 1
        await _round_trip()
        return list(await self._cursor.to_list(length))

    def __aiter__(self) -> AsyncIterator[Any]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[Any]:
        self._calls[self._name] = self._calls.get(self._name, 0) + 1
        await _round_trip()
        async for document in self._cursor:
            yield document


class YieldingDatabase:
    """A database whose collections are :class:`YieldingCollection`; ``calls`` counts driver calls by name."""

    def __init__(self, database: Any) -> None:
        self._database = database
        self.calls: dict[str, int] = {}
        self._collections: dict[str, YieldingCollection] = {}

    def __getitem__(self, name: str) -> YieldingCollection:
        if name not in self._collections:
            self._collections[name] = YieldingCollection(self._database[name], self.calls)
        return self._collections[name]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._database, name)


async def _round_trip() -> None:
    for _ in range(3):
        await asyncio.sleep(0)
