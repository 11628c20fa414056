"""The migration runner: Beanie's format and log, distances in both directions, and clear failures."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from beanie.migrations.controllers.base import BaseMigrationController
from beanie.migrations.database import DBHandler
from beanie.migrations.runner import MigrationNode

from partner_repo import (
    InvalidInput,
    MigrationError,
    TransactionsUnsupported,
    migration_status,
    run_migrations,
)
from partner_repo.mongo import remember_secrets
from tests.unit.migrations.support import (
    ERASURE_INDEXES,
    INDEXES,
    MIGRATIONS,
    NORMALIZE,
    POSITIONS,
    SHIPPED,
    SLICE_IDS,
    SLICE_INDEX,
    fresh_database,
    load,
    names,
)

ALL = names(SHIPPED)
LAST = SHIPPED[-1]
BEFORE_LAST = SHIPPED[-2]
KNOWN = (NORMALIZE, INDEXES, SLICE_IDS, SLICE_INDEX, ERASURE_INDEXES, POSITIONS)
"""Migrations the tests know by name; every shipped one counts, whether named here or not."""
FAILING = """
from beanie import Document, free_fall_migration


class Anything(Document):
    class Settings:
        name = "anything"


class Forward:
    @free_fall_migration(document_models=[Anything])
    async def explode(self, session):
        raise RuntimeError("the third migration broke")


class Backward:
    pass
"""


@pytest.fixture
def own_migrations(tmp_path: Path) -> Path:
    """A copy of the shipped migrations that a test may add files to."""
    directory = tmp_path / "migrations"
    shutil.copytree(MIGRATIONS, directory, ignore=shutil.ignore_patterns("*.md", "__pycache__"))
    return directory


def test_every_shipped_migration_is_named_by_timestamp_and_has_forward_and_backward() -> None:
    files = sorted(MIGRATIONS.glob("[!_]*.py"))
    assert [f.name for f in files] == list(ALL)
    assert [f for f in files if f in KNOWN] == list(KNOWN)  # they run in the order they were shipped
    for file in files:
        assert re.fullmatch(r"\d{14}_[a-z0-9_]+\.py", file.name)
        module = load(file)
        for direction in (module.Forward, module.Backward):
            steps = [getattr(direction, name) for name in dir(direction)]
            assert any(isinstance(step, BaseMigrationController) for step in steps), (file.name, direction)


async def test_a_new_database_has_every_migration_pending() -> None:
    status = await migration_status(await fresh_database())

    assert status.names == ALL
    assert status.current is None and status.applied == () and status.pending == ALL


async def test_forward_applies_every_pending_migration_in_order() -> None:
    database = await fresh_database()

    run = await run_migrations(database)

    assert run.ran == ALL and run.before is None and run.after == LAST.name
    assert (await migration_status(database)).pending == ()


async def test_forward_with_a_distance_applies_that_many() -> None:
    database = await fresh_database()

    run = await run_migrations(database, distance=1)

    assert run.ran == (NORMALIZE.name,)
    assert (await migration_status(database)).pending == ALL[1:]


async def test_forward_when_nothing_is_pending_runs_nothing() -> None:
    database = await fresh_database()
    await run_migrations(database)

    run = await run_migrations(database)

    assert run.ran == () and run.before == run.after == LAST.name


async def test_backward_reverts_only_the_most_recent_unless_told_otherwise() -> None:
    database = await fresh_database()
    await run_migrations(database)

    run = await run_migrations(database, backward=True)

    assert run.ran == (LAST.name,) and run.after == BEFORE_LAST.name


async def test_backward_with_distance_zero_reverts_everything_newest_first() -> None:
    database = await fresh_database()
    await run_migrations(database)

    run = await run_migrations(database, backward=True, distance=0)

    assert run.ran == tuple(reversed(ALL)) and run.after is None
    assert (await migration_status(database)).pending == ALL


async def test_backward_with_nothing_applied_runs_nothing() -> None:
    run = await run_migrations(await fresh_database(), backward=True)

    assert run.ran == () and run.after is None


async def test_the_log_is_beanies_so_beanie_migrate_continues_where_this_runner_stopped() -> None:
    database = await fresh_database()
    await run_migrations(database, distance=1)
    saved = {name: getattr(DBHandler, name) for name in ("client", "database") if hasattr(DBHandler, name)}
    DBHandler.client, DBHandler.database = database.client, database
    try:
        node = await MigrationNode.build(MIGRATIONS)
    finally:
        for name in ("client", "database"):
            if name in saved:
                setattr(DBHandler, name, saved[name])
            else:
                delattr(DBHandler, name)

    assert node.name == NORMALIZE.name


class SessionCounter:
    """The database, with its client counting the sessions anything starts on it."""

    def __init__(self, database: Any) -> None:
        self._database = database
        self.sessions = 0

    def __getitem__(self, name: str) -> Any:
        return self._database[name]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._database, name)

    @property
    def client(self) -> Any:
        counter, client = self, self._database.client

        class Client:
            def __getattr__(self, name: str) -> Any:
                return getattr(client, name)

            async def start_session(self, *args: Any, **kwargs: Any) -> Any:
                counter.sessions += 1
                return await client.start_session(*args, **kwargs)

        return Client()


async def test_by_default_migrations_run_without_a_session_or_transaction() -> None:
    database = SessionCounter(await fresh_database())

    run = await run_migrations(database)

    assert run.ran == ALL and database.sessions == 0


async def test_asking_for_transactions_on_the_in_memory_backend_is_refused_with_the_way_out() -> None:
    database = await fresh_database()

    with pytest.raises(TransactionsUnsupported, match=r"has no transactions.*run without --transaction"):
        await run_migrations(database, use_transaction=True)

    assert (await migration_status(database)).current is None


async def test_a_failing_migration_names_itself_and_stays_pending(own_migrations: Path) -> None:
    (own_migrations / "20991231000000_explode.py").write_text(FAILING)
    database = await fresh_database()

    with pytest.raises(
        MigrationError,
        match=r"20991231000000_explode\.py failed: the third migration broke; it is not recorded as applied.*"
        r"run partner-repo migrate again",
    ):
        await run_migrations(database, own_migrations)

    assert (await migration_status(database, own_migrations)).current == LAST.name


@pytest.mark.parametrize(
    ("file_name", "text", "complaint"),
    [
        ("add_things.py", "class Forward: ...\nclass Backward: ...\n", "YYYYMMDDHHMMSS"),
        ("20991231000000_half.py", "class Forward: ...\n", "both Forward and Backward"),
        (
            "20991231000000_broken.py",
            "this is not python\n",
            "cannot load migration 20991231000000_broken.py",
        ),
    ],
)
async def test_an_unusable_migration_file_is_refused_before_anything_runs(
    own_migrations: Path, file_name: str, text: str, complaint: str
) -> None:
    (own_migrations / file_name).write_text(text)
    database = await fresh_database()

    with pytest.raises(MigrationError, match=complaint):
        await run_migrations(database, own_migrations)

    assert await database["migrations_log"].count_documents({}) == 0


async def test_a_database_ahead_of_the_migrations_directory_is_refused(own_migrations: Path) -> None:
    database = await fresh_database()
    await run_migrations(database)
    (own_migrations / LAST.name).unlink()

    with pytest.raises(MigrationError, match=f"not in {len(ALL) - 1} known migrations"):
        await run_migrations(database, own_migrations)


async def test_a_missing_migrations_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(MigrationError, match="no migrations directory"):
        await run_migrations(await fresh_database(), tmp_path / "absent")


@pytest.mark.parametrize("distance", [-1, True, 1.5, "2"])
async def test_a_distance_that_is_not_a_count_is_refused(distance: Any) -> None:
    with pytest.raises(InvalidInput, match="distance"):
        await run_migrations(await fresh_database(), distance=distance)


LOGGING = """
import logging

from beanie import Document, free_fall_migration

log = logging.getLogger("partner_repo.migrations.logging_a_uri")


class Anything(Document):
    class Settings:
        name = "anything"


class Forward:
    @free_fall_migration(document_models=[Anything])
    async def say(self, session):
        log.warning("copying from mongodb://app:M1grated-Secret@db/ (M1grated-Secret)")


class Backward:
    pass
"""


async def test_a_migrations_log_records_are_scrubbed_of_credentials(
    own_migrations: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (own_migrations / "20991231000000_logging_a_uri.py").write_text(LOGGING)
    remember_secrets("mongodb://app:M1grated-Secret@db/")

    with caplog.at_level("WARNING", logger="partner_repo.migrations.logging_a_uri"):
        await run_migrations(await fresh_database(), own_migrations)

    assert "copying from mongodb://app:***@db/ (***)" in caplog.text
    assert "M1grated-Secret" not in caplog.text
