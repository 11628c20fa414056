"""What every wire test shares: a scripted mockupdb server, a Motor client on it, and reply helpers.

The test plays the server: it receives each command the driver sends (in a thread: mockupdb blocks), checks
it, and scripts the reply. Handshakes and heartbeats are answered automatically and never reach the test.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
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
