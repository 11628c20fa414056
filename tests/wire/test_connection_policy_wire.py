"""Issue 21: one connection policy, on the wire (the installed stack's driver against a scripted mockupdb).

``connect(uri)`` and ``connect_from_settings()`` give a client the same options; options in the URI win;
every library call is bounded by the operation timeout, and a frozen server surfaces as the project's
:class:`OperationTimedOut`; a database name MongoDB would refuse is refused before anything is sent.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from mockupdb import MockupDB, Request

from partner_repo import (
    ConnectionFailed,
    InvalidInput,
    MemoryCoreRepository,
    Message,
    OperationTimedOut,
    PartnerRepoSettings,
    close_database,
    connect,
    connect_from_settings,
)
from partner_repo.mongo import DEFAULTS
from tests.wire.wire_support import scripted_server

FROZEN = ("findAndModify", "update", "insert", "find", "aggregate")
"""What the frozen server never answers: every read and write of the library (setup commands are answered)."""


def _answer_setup_only(request: Request) -> bool:
    name = str(next(iter(request.doc)))
    if name.lower() in ("hello", "ismaster"):
        return False  # the handshake: mockupdb's own answer
    if name in FROZEN:
        return False  # left unanswered: the server froze
    if name == "buildInfo":
        return bool(request.replies({"version": "7.0.12", "versionArray": [7, 0, 12, 0]}))
    if name in ("listCollections", "listIndexes"):
        namespace = f"{request.doc['$db']}.$cmd.{name}"
        return bool(request.replies({"cursor": {"id": 0, "ns": namespace, "firstBatch": []}}))
    return bool(request.replies({"ok": 1}))


@pytest.fixture(scope="module")
def frozen() -> Iterator[MockupDB]:
    with scripted_server(autoresponder=_answer_setup_only) as server:
        yield server


def _options(database: Any) -> Any:
    return database.client.options


def _with(uri: str, options: str) -> str:
    return f"{uri}{'&' if '?' in uri else '/?'}{options}"


async def test_connect_and_connect_from_settings_give_the_same_client_options(frozen: MockupDB) -> None:
    plain = await connect(frozen.uri, create_indexes=False)
    configured = await connect_from_settings(
        PartnerRepoSettings(mongodb_uri=frozen.uri, create_indexes=False)
    )
    try:
        one, other = _options(plain), _options(configured)
        assert one.timeout == other.timeout == DEFAULTS["timeoutMS"] / 1000
        assert one.server_selection_timeout == other.server_selection_timeout == 5.0
        assert one.write_concern == other.write_concern and one.write_concern.document["w"] == "majority"
        assert one.retry_writes is other.retry_writes is True
        assert one.pool_options.max_pool_size == other.pool_options.max_pool_size == DEFAULTS["maxPoolSize"]
    finally:
        await close_database(plain)
        await close_database(configured)


async def test_timeouts_written_in_the_uri_are_honoured(frozen: MockupDB) -> None:
    uri = _with(frozen.uri, "serverSelectionTimeoutMS=1234&timeoutMS=4321")
    database = await connect(uri, create_indexes=False)
    try:
        assert _options(database).server_selection_timeout == 1.234
        assert _options(database).timeout == 4.321
    finally:
        await close_database(database)


async def test_the_server_selection_timeout_keyword_is_an_option_given_in_code(frozen: MockupDB) -> None:
    database = await connect(frozen.uri, create_indexes=False, server_selection_timeout_ms=1500)
    try:
        assert _options(database).server_selection_timeout == 1.5
    finally:
        await close_database(database)


async def test_options_given_in_code_sit_between_the_defaults_and_the_uri(frozen: MockupDB) -> None:
    database = await connect(
        _with(frozen.uri, "maxPoolSize=7"), create_indexes=False, maxPoolSize=3, appname="bill"
    )
    try:
        assert _options(database).pool_options.max_pool_size == 7
        assert _options(database).pool_options.metadata["application"]["name"] == "bill"
    finally:
        await close_database(database)


async def test_a_frozen_server_surfaces_as_operation_timed_out_within_the_operation_timeout(
    frozen: MockupDB,
) -> None:
    database = await connect(_with(frozen.uri, "timeoutMS=300"), create_indexes=False)
    started = time.monotonic()
    try:
        with pytest.raises(OperationTimedOut, match=r"MemoryCoreRepository\.record: MongoDB did not answer"):
            await MemoryCoreRepository(database).record("agent", [Message(role="user", content="hi")])
    finally:
        await close_database(database)
    assert time.monotonic() - started < 5


@pytest.mark.parametrize(
    ("name", "says"),
    [
        ("a.b$c", "must not contain"),
        ("", "must not be empty"),
        ("\ud800", "lone surrogate"),
        ("x" * 100, "at most 63 bytes"),
    ],
)
async def test_a_database_name_mongodb_refuses_is_invalid_input_and_nothing_is_sent(
    frozen: MockupDB, name: str, says: str
) -> None:
    with pytest.raises(InvalidInput, match=says):
        await connect(frozen.uri, name)
    with pytest.raises(InvalidInput, match=says):
        await connect(None, name)


async def test_an_unreachable_server_fails_within_the_uris_server_selection_timeout() -> None:
    started = time.monotonic()

    with pytest.raises(ConnectionFailed, match="cannot reach MongoDB"):
        await connect("mongodb://127.0.0.1:1/?serverSelectionTimeoutMS=300")

    assert time.monotonic() - started < 3  # not the 60 s operation timeout
