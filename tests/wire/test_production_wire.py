"""Production settings and migration transactions on the wire: the real Motor driver against mockupdb
playing a replica-set primary (or a standalone server), recording every command it is sent."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from partner_repo import (
    MemoryUnitRepository,
    Message,
    PartnerRepoSettings,
    TransactionsUnsupported,
    admin_database,
    close_database,
    connect_from_settings,
    default_migrations_path,
    run_migrations,
)
from tests.wire.wire_support import PlausibleServer, serving

pytestmark = pytest.mark.wire

SHIPPED = len(list(default_migrations_path().glob("[!_]*.py")))
"""How many migrations the package ships (a run on a fresh database applies them all)."""

Recorder = PlausibleServer
"""The server of these tests: it answers every command plausibly and records them, in order."""


@pytest.fixture(scope="module")
def replica_set_server() -> Iterator[tuple[Recorder, str]]:
    recorder = Recorder()
    with serving(recorder) as uri:
        yield recorder, uri


@pytest.fixture(scope="module")
def standalone_server() -> Iterator[tuple[Recorder, str]]:
    recorder = Recorder(standalone=True)
    with serving(recorder) as uri:
        yield recorder, uri


@pytest.fixture
def replica_set(replica_set_server: tuple[Recorder, str]) -> tuple[Recorder, str]:
    replica_set_server[0].afresh()
    return replica_set_server


@pytest.fixture
def standalone(standalone_server: tuple[Recorder, str]) -> tuple[Recorder, str]:
    standalone_server[0].afresh()
    return standalone_server


async def test_every_write_waits_for_a_majority_and_is_retryable(replica_set: tuple[Recorder, str]) -> None:
    recorder, uri = replica_set
    database = await connect_from_settings(PartnerRepoSettings(mongodb_uri=uri))

    await MemoryUnitRepository(database).append("u", [Message(role="user", content="hi")], "s", core_id="c")

    (insert,) = recorder.named("insert", "memory_units")
    assert dict(insert["writeConcern"]) == {"w": "majority"}  # the operation timeout bounds the wait
    assert 0 < insert["maxTimeMS"] <= 60_000  # the client-side operation timeout, sent to the server too
    assert "txnNumber" in insert  # a retryable write: the driver may resend it once after a failover
    assert all(dict(c["writeConcern"])["w"] == "majority" for c in recorder.named("createIndexes"))
    await close_database(database)


async def test_without_an_operation_timeout_a_write_waits_for_its_write_concern_timeout(
    replica_set: tuple[Recorder, str],
) -> None:
    recorder, uri = replica_set
    database = await connect_from_settings(PartnerRepoSettings(mongodb_uri=uri, operation_timeout_ms=0))

    await MemoryUnitRepository(database).append("u", [Message(role="user", content="hi")], "s", core_id="c")

    (insert,) = recorder.named("insert", "memory_units")
    assert dict(insert["writeConcern"]) == {"w": "majority", "wtimeout": 10_000} and "maxTimeMS" not in insert
    await close_database(database)


async def test_hot_path_reads_go_to_the_primary_and_admin_reads_may_go_to_secondaries(
    replica_set: tuple[Recorder, str],
) -> None:
    recorder, uri = replica_set
    settings = PartnerRepoSettings(mongodb_uri=uri)
    database = await connect_from_settings(settings, create_indexes=False)

    await MemoryUnitRepository(database).get("u")
    await admin_database(database, settings)["memory_units"].find_one({"core_id": "c"})

    hot, admin = recorder.named("find", "memory_units")
    assert "$readPreference" not in hot  # primary, the default
    assert dict(admin["$readPreference"]) == {"mode": "secondaryPreferred"}
    await close_database(database)


async def test_options_in_the_uri_win_over_the_defaults(replica_set: tuple[Recorder, str]) -> None:
    recorder, uri = replica_set
    database = await connect_from_settings(
        PartnerRepoSettings(mongodb_uri=f"{uri}&w=1"), create_indexes=False
    )

    await MemoryUnitRepository(database).append("u", [Message(role="user", content="hi")], "s", core_id="c")

    (insert,) = recorder.named("insert", "memory_units")
    assert dict(insert["writeConcern"])["w"] == 1
    await close_database(database)


async def test_by_default_a_migration_sends_nothing_in_a_transaction(
    replica_set: tuple[Recorder, str],
) -> None:
    recorder, uri = replica_set
    database = await connect_from_settings(PartnerRepoSettings(mongodb_uri=uri), create_indexes=False)

    run = await run_migrations(database)

    assert len(run.ran) == SHIPPED and recorder.named("find", "memory_units")
    assert not any("startTransaction" in c or "autocommit" in c for c in recorder.commands)
    assert not recorder.named("commitTransaction") and not recorder.named("abortTransaction")
    await close_database(database)


async def test_with_use_transaction_a_migration_runs_its_reads_and_writes_in_one_transaction(
    replica_set: tuple[Recorder, str],
) -> None:
    recorder, uri = replica_set
    database = await connect_from_settings(PartnerRepoSettings(mongodb_uri=uri), create_indexes=False)

    await run_migrations(database, distance=1, use_transaction=True)

    (scan,) = recorder.named("find", "memory_units")
    assert scan["startTransaction"] is True and scan["autocommit"] is False and "txnNumber" in scan
    (commit,) = recorder.named("commitTransaction")
    assert commit["txnNumber"] == scan["txnNumber"] and commit["lsid"] == scan["lsid"]
    await close_database(database)


async def test_index_builds_run_outside_the_transaction(replica_set: tuple[Recorder, str]) -> None:
    """MongoDB refuses createIndexes on an existing collection inside a transaction."""
    recorder, uri = replica_set
    database = await connect_from_settings(PartnerRepoSettings(mongodb_uri=uri), create_indexes=False)

    await run_migrations(database, use_transaction=True)

    builds = recorder.named("createIndexes")
    assert builds and not any("startTransaction" in c or "txnNumber" in c for c in builds)
    await close_database(database)


async def test_a_standalone_server_refuses_transactions_and_the_error_says_to_run_without(
    standalone: tuple[Recorder, str],
) -> None:
    recorder, uri = standalone
    database = await connect_from_settings(PartnerRepoSettings(mongodb_uri=uri), create_indexes=False)

    with pytest.raises(TransactionsUnsupported, match=r"replica set.*run without --transaction"):
        await run_migrations(database, use_transaction=True)

    assert recorder.named("find", "memory_units")[0]["startTransaction"] is True
    await close_database(database)


async def test_on_a_standalone_server_the_default_runs_the_migrations(
    standalone: tuple[Recorder, str],
) -> None:
    recorder, uri = standalone
    database = await connect_from_settings(PartnerRepoSettings(mongodb_uri=uri), create_indexes=False)

    run = await run_migrations(database)

    assert len(run.ran) == SHIPPED
    assert not any("startTransaction" in c for c in recorder.commands)
    await close_database(database)
