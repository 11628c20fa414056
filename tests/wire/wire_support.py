"""What every wire test shares: a scripted mockupdb server, a Motor client on it, and reply helpers.

The test plays the server: it receives each command the driver sends (in a thread: mockupdb blocks), checks
it, and scripts the reply. Handshakes and heartbeats are answered automatically and never reach the test.
Where a test checks a whole run rather than each command, a :class:`PlausibleServer` answers them all and
keeps what was sent.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import pytest
from mockupdb import MockupDB, Request

from partner_repo.mongo import driver

UNITS_NS = "partner.memory_units"
HELLO = {"ismaster": True, "minWireVersion": 0, "maxWireVersion": 21}
"""The handshake reply: a server without sessions (add ``logicalSessionTimeoutMinutes`` for them)."""


@contextmanager
def scripted_server(
    *,
    autoresponder: Callable[[Request], bool] | None = None,
    hello: Mapping[str, Any] = HELLO,
    **options: Any,
) -> Iterator[MockupDB]:
    """A running mockupdb speaking wire version 21; stopping it takes a second, so share it per module."""
    mock = MockupDB(auto_ismaster=dict(hello), **options)
    if autoresponder is not None:
        mock.autoresponds(autoresponder)
    mock.run()
    try:
        yield mock
    finally:
        mock.stop()


def server_fixture(
    *,
    autoresponder: Callable[[Request], bool] | None = None,
    hello: Mapping[str, Any] = HELLO,
    **options: Any,
) -> Any:
    """A module-scoped ``server`` fixture; assign it as ``server = server_fixture()`` in a test module."""

    @pytest.fixture(scope="module")
    def server() -> Iterator[MockupDB]:
        with scripted_server(autoresponder=autoresponder, hello=hello, **options) as mock:
            yield mock

    return server


@asynccontextmanager
async def motor_client(
    server: MockupDB, *, quiet_for: float | None, unexpected: str = "an unexpected request was sent"
) -> AsyncIterator[Any]:
    """A Motor client on ``server``; on a clean exit, asserts nothing more reached it within ``quiet_for``."""
    client: Any = driver.new_client(server.uri, tz_aware=True, serverSelectionTimeoutMS=5000)
    try:
        yield client
        if quiet_for is not None:
            assert not await asyncio.to_thread(server.got, timeout=quiet_for), unexpected
    finally:
        await driver.close_client(client)


async def receive(server: MockupDB, name: str | None = None) -> Request:
    """The next request the driver sends (never a handshake or heartbeat); with ``name``, it must be that
    command."""
    request = await asyncio.to_thread(server.receives, timeout=10)
    assert name is None or request.command_name == name, request
    return request


def cursor(*documents: Mapping[str, Any], ns: str = UNITS_NS) -> dict[str, Any]:
    """A single-batch, exhausted cursor reply."""
    return {"cursor": {"id": 0, "ns": ns, "firstBatch": list(documents)}}


def plain(value: Any) -> Any:
    """mockupdb decodes into OrderedDicts; compare as plain dicts and lists."""
    if isinstance(value, Mapping):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


STANDALONE_REFUSAL = {
    "ok": 0,
    "code": 20,
    "codeName": "IllegalOperation",
    "errmsg": "Transaction numbers are only allowed on a replica set member or mongos",
}
"""What a standalone mongod answers a command that starts a transaction."""


class PlausibleServer:
    """Answers every command plausibly (empty cursors, writes that matched one document) and keeps what was
    sent, in order. ``failures`` maps a command name to the reply to send instead; a find of
    ``memory_units`` returns ``found``; a ``standalone`` server refuses transactions, as mongod does."""

    def __init__(self, *, standalone: bool = False, found: Sequence[Mapping[str, Any]] = ()) -> None:
        self.standalone = standalone
        self.found = list(found)
        self.failures: dict[str, dict[str, Any]] = {}
        self.commands: list[dict[str, Any]] = []

    def handle(self, request: Request) -> bool:
        name = str(next(iter(request.doc)))
        if name.lower() in ("hello", "ismaster"):
            return False
        self.commands.append(dict(request.doc))
        if name in self.failures:
            return bool(request.replies(self.failures[name]))
        if self.standalone and request.doc.get("startTransaction"):
            return bool(request.replies(STANDALONE_REFUSAL))
        if name == "buildInfo":
            return bool(request.replies({"version": "7.0.12", "versionArray": [7, 0, 12, 0]}))
        if name in ("find", "listIndexes", "aggregate", "listCollections"):  # Beanie 2 lists collections
            target = "$cmd.listCollections" if name == "listCollections" else request.doc[name]
            namespace = f"{request.doc['$db']}.{target}"
            batch = self.found if namespace.endswith(".memory_units") and name == "find" else []
            return bool(request.replies({"cursor": {"id": 0, "ns": namespace, "firstBatch": batch}}))
        if name in ("insert", "update", "delete"):
            return bool(request.replies({"n": 1, "nModified": 1}))
        return bool(request.replies({"ok": 1}))

    def named(self, name: str, collection: str | None = None) -> list[dict[str, Any]]:
        """The commands ``name`` sent (to ``collection``, when given), in order."""
        return [c for c in self.commands if name in c and (collection is None or c[name] == collection)]

    def afresh(self) -> None:
        """Forget what was sent and the scripted failures: a module's server serves each test afresh."""
        self.commands.clear()
        self.failures.clear()


@contextmanager
def serving(server: PlausibleServer) -> Iterator[str]:
    """Run ``server`` on mockupdb as a replica set's primary (or a standalone mongod); yields the URI to
    connect with. Stopping it takes a second (its accept loop polls once a second): share it per module."""
    mock = MockupDB(auto_ismaster=False)
    mock.run()
    hello: dict[str, Any] = {
        "ismaster": True,
        "isWritablePrimary": True,
        "minWireVersion": 0,
        "maxWireVersion": 21,
        "logicalSessionTimeoutMinutes": 30,
    }
    uri = f"{mock.uri}/?directConnection=true"
    if not server.standalone:
        hello.update(setName="rs0", hosts=[mock.address_string], me=mock.address_string)
        uri = f"{mock.uri}/?replicaSet=rs0"
    mock.autoresponds("ismaster", **hello)
    mock.autoresponds("hello", **hello)
    mock.autoresponds(server.handle)
    try:
        yield uri
    finally:
        mock.stop()
