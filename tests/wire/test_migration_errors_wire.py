"""What a migration run says when the server fails it: the real Motor driver against mockupdb playing a
replica-set primary that holds one legacy unit and answers the migration's write (or its commit) with the
error MongoDB sends. Each failure is one clear ``MigrationError`` naming the migration, the cause and what to
do, and the migration is not recorded as applied."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from partner_repo import (
    MigrationError,
    PartnerRepoSettings,
    close_database,
    connect_from_settings,
    run_migrations,
)
from tests.wire.wire_support import PlausibleServer, serving

pytestmark = pytest.mark.wire

NORMALIZE = "20261129120000_normalize_units.py"
LEGACY_UNIT = {"_id": "legacy", "core_id": "core", "conversation_messages": [], "slices": [None]}

LIFETIME = {
    "ok": 0,
    "code": 290,
    "codeName": "TransactionExceededLifetimeLimitSeconds",
    "errmsg": "Aborting transaction with txnNumber 1 because it has been running for longer than "
    "'transactionLifetimeLimitSeconds'",
}
WRITE_CONFLICT = {
    "ok": 0,
    "code": 112,
    "codeName": "WriteConflict",
    "errmsg": "Caused by :: Write conflict during plan execution and yielding is disabled. :: Please retry "
    "your operation or multi-document transaction.",
    "errorLabels": ["TransientTransactionError"],
}
NO_SUCH_TRANSACTION = {
    "ok": 0,
    "code": 251,
    "codeName": "NoSuchTransaction",
    "errmsg": "Transaction with { txnNumber: 1 } has been aborted.",
    "errorLabels": ["TransientTransactionError"],
}
UNAUTHORIZED = {
    "ok": 0,
    "code": 13,
    "codeName": "Unauthorized",
    "errmsg": 'not authorized on partner to execute command { update: "memory_units" }',
}
TOO_LARGE = {
    "ok": 1,
    "n": 0,
    "nModified": 0,
    "writeErrors": [
        {"index": 0, "code": 17419, "errmsg": "Resulting document after update is larger than 16777216"}
    ],
}


class Primary(PlausibleServer):
    """A primary holding ``LEGACY_UNIT``; ``failures`` maps a command name to its scripted reply."""

    def __init__(self) -> None:
        super().__init__(found=[LEGACY_UNIT])

    def recorded_as_applied(self) -> bool:
        return any(c.get("insert") == "migrations_log" for c in self.commands)


@pytest.fixture(scope="module")
def primary_server() -> Iterator[tuple[Primary, str]]:
    primary = Primary()
    with serving(primary) as uri:
        yield primary, uri


@pytest.fixture
def primary(primary_server: tuple[Primary, str]) -> tuple[Primary, str]:
    primary_server[0].afresh()
    return primary_server


async def failure_of(uri: str, *, use_transaction: bool) -> str:
    database = await connect_from_settings(PartnerRepoSettings(mongodb_uri=uri), create_indexes=False)
    try:
        with pytest.raises(MigrationError) as failure:
            await run_migrations(database, use_transaction=use_transaction)
    finally:
        await close_database(database)
    message = str(failure.value)
    assert message.startswith(f"migration {NORMALIZE} failed: ") and "\n" not in message
    return message


@pytest.mark.parametrize(
    ("command", "reply", "cause"),
    [
        ("update", LIFETIME, "aborted its transaction for running past transactionLifetimeLimitSeconds"),
        ("update", WRITE_CONFLICT, "a concurrent write conflicted with its transaction"),
        ("commitTransaction", NO_SUCH_TRANSACTION, "the server had already aborted its transaction"),
    ],
    ids=["lifetime-290", "write-conflict-112", "no-such-transaction-251"],
)
async def test_a_transaction_the_server_gave_up_says_so_and_to_run_without_one(
    primary: tuple[Primary, str], command: str, reply: dict[str, Any], cause: str
) -> None:
    server, uri = primary
    server.failures[command] = reply

    message = await failure_of(uri, use_transaction=True)

    assert cause in message and f"({reply['codeName']}, code {reply['code']}: {reply['errmsg']})" in message
    assert "nothing of it is applied; run it without --transaction" in message
    assert not server.recorded_as_applied()


async def test_any_other_server_error_in_a_transaction_is_named_and_nothing_is_applied(
    primary: tuple[Primary, str],
) -> None:
    server, uri = primary
    server.failures["update"] = UNAUTHORIZED

    message = await failure_of(uri, use_transaction=True)

    assert "the server refused an operation: Unauthorized, code 13: not authorized on partner" in message
    assert "its transaction was rolled back, so nothing of it is applied" in message
    assert not server.recorded_as_applied()


async def test_a_server_error_without_a_transaction_says_the_migration_stays_pending_and_to_run_again(
    primary: tuple[Primary, str],
) -> None:
    server, uri = primary
    server.failures["update"] = UNAUTHORIZED

    message = await failure_of(uri, use_transaction=False)

    assert "Unauthorized, code 13" in message and "run partner-repo migrate again to continue" in message
    assert not any("startTransaction" in c for c in server.commands)
    assert not server.recorded_as_applied()


async def test_a_unit_the_server_refuses_is_left_named_and_the_migration_stays_pending(
    primary: tuple[Primary, str],
) -> None:
    server, uri = primary
    server.failures["update"] = TOO_LARGE

    message = await failure_of(uri, use_transaction=False)

    assert "1 unit(s) left as stored: 'legacy' (the server refused the write: Resulting document" in message
    assert "(code 17419)" in message and "run partner-repo migrate again" in message
    assert not server.recorded_as_applied()
