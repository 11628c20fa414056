"""Finding 10 of issue 30: a server that stops answering once connected (its process stopped, the connection
open) reaches the caller as the library's error, within the operation timeout, on either stack.

The scripted server answers the handshake and the setup commands, then freezes: nothing is answered any more,
the monitors' ``hello`` included. The driver then gives up on the server (its heartbeat times out) and cancels
the operation in flight with a private class (PyMongo's ``_OperationCancelled``, a ``ConnectionFailure``), or
the operation times out first: either way the caller gets a ``PartnerRepoError`` (``ConnectionFailed`` or
``OperationTimedOut``), never a driver class, within ``timeoutMS``.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from mockupdb import MockupDB, Request

from partner_repo import (
    ConnectionFailed,
    MemoryCoreRepository,
    Message,
    OperationTimedOut,
    PartnerRepoError,
    close_database,
    connect,
)
from tests.wire.wire_support import scripted_server

pytestmark = pytest.mark.wire

TIMEOUT_MS = 3000


class Freezer:
    """Answers like a server until :attr:`frozen`; then answers nothing, ``hello`` included."""

    def __init__(self) -> None:
        self.frozen = False

    def __call__(self, request: Request) -> bool:
        if self.frozen:
            return True  # taken, never answered
        name = str(next(iter(request.doc)))
        if name.lower() in ("hello", "ismaster"):
            return False  # the handshake: mockupdb's own answer
        if name == "buildInfo":
            return bool(request.replies({"version": "7.0.12", "versionArray": [7, 0, 12, 0]}))
        if name in ("listCollections", "listIndexes"):
            namespace = f"{request.doc['$db']}.$cmd.{name}"
            return bool(request.replies({"cursor": {"id": 0, "ns": namespace, "firstBatch": []}}))
        return bool(request.replies({"ok": 1}))


@pytest.fixture
def freezing() -> Iterator[tuple[MockupDB, Freezer]]:
    freezer = Freezer()
    with scripted_server(autoresponder=lambda request: freezer(request)) as server:
        yield server, freezer


async def test_a_server_that_stops_answering_after_connecting_surfaces_as_the_librarys_error(
    freezing: tuple[MockupDB, Freezer],
) -> None:
    server, freezer = freezing
    options = f"heartbeatFrequencyMS=500&connectTimeoutMS=300&timeoutMS={TIMEOUT_MS}"
    database = await connect(f"{server.uri}/?{options}", create_indexes=False)
    freezer.frozen = True
    started = time.monotonic()
    caught: Any = None
    try:
        await MemoryCoreRepository(database).record("agent", [Message(role="user", content="hi")])
    except BaseException as exc:  # whatever it is: the assertions say what it must be
        caught = exc
    finally:
        await close_database(database)
    took = time.monotonic() - started

    assert isinstance(caught, PartnerRepoError), (
        f"{type(caught).__module__}.{type(caught).__name__}: {caught}"
    )
    assert isinstance(caught, ConnectionFailed | OperationTimedOut)
    assert "MemoryCoreRepository.record" in str(caught) and "\n" not in str(caught)
    assert took < TIMEOUT_MS / 1000 + 2
