"""Running the schema migrations in ``migrations/`` (Beanie's migration format) on a database we are handed.

Beanie's own runner (``beanie migrate``) reads a global connection and always opens a driver session, which
the in-memory backend does not have. This runner reuses Beanie's pieces, so the two stay interchangeable on
one database: the migration files (``Forward``/``Backward`` classes holding ``free_fall_migration`` or
``iterative_migration`` functions), the linked list of ``MigrationNode`` and its traversal, and the
``migrations_log`` collection that records the current migration. It differs in three ways:

- it works on the database it is given (any ``MongoDatabase``, the in-memory one included);
- by default it runs without a transaction and passes no session at all: each migration guards its own
  writes, so it runs on every backend, next to live writers and with no time limit; a transaction is opt-in
  (``use_transaction=True``), for small databases on a replica set;
- failures are one :class:`MigrationError` naming the migration, its cause in one line and what to do next
  (:func:`migration_failure`). A failed migration is never recorded as applied, and the ones after it do
  not run, so the next run starts with it again.

The advice depends on how it ran. In a transaction nothing of the migration is applied, and the failures a
transaction brings on its own (MongoDB aborts one after ``transactionLifetimeLimitSeconds``, 60 s by default,
and on a write conflict with any concurrent writer) say to run without ``--transaction``. Without one, what
the migration already wrote stays; it is not recorded as applied, so running it again continues from there.
"""

from __future__ import annotations

import logging
import re
import types
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib.machinery import SourceFileLoader
from pathlib import Path
from typing import Any

from beanie import init_beanie
from beanie.migrations.controllers.base import BaseMigrationController
from beanie.migrations.models import MigrationLog, RunningDirections, RunningMode
from beanie.migrations.runner import MigrationNode

from partner_repo.callables import Progress
from partner_repo.errors import InvalidInput, MigrationError, TransactionsUnsupported
from partner_repo.mongo import (
    ConfigurationError,
    ConnectionFailure,
    MongoDatabase,
    OperationFailure,
    driver,
    library_logger,
    topology_of,
)

ILLEGAL_OPERATION = 20
"""The server's answer to a transaction on a standalone server ("Transaction numbers are only allowed...")."""
WRITE_CONFLICT = 112
NO_SUCH_TRANSACTION = 251
TRANSACTION_EXCEEDED_LIFETIME = 290
TRANSIENT = "TransientTransactionError"

STANDALONE_HINT = (
    "transactions need a replica set or a sharded cluster, and this deployment has neither; run without "
    "--transaction (use_transaction=False, the default): each partner-repo migration is idempotent and "
    "safe to re-run"
)
NO_SESSIONS_HINT = (
    "this backend has no transactions (the in-memory backend has no sessions); run without --transaction "
    "(use_transaction=False, the default)"
)
WITHOUT_TRANSACTION = (
    "nothing of it is applied; run it without --transaction (the default): each write is then guarded on "
    "its own, with no time limit and next to live writers"
)
ROLLED_BACK = "its transaction was rolled back, so nothing of it is applied; fix the cause and run it again"
KEPT = (
    "it is not recorded as applied and what it already wrote is kept: run partner-repo migrate again to "
    "continue (once the cause is fixed, if it is not a passing one)"
)


def migration_failure(name: str, exc: BaseException, *, in_transaction: bool) -> MigrationError:
    """The clear error for ``exc``, raised by migration ``name`` (chain ``exc`` as its cause)."""
    if in_transaction and (_no_sessions(exc) or _standalone(exc)):
        hint = NO_SESSIONS_HINT if isinstance(exc, NotImplementedError) else STANDALONE_HINT
        return TransactionsUnsupported(f"migration {name}: {hint}")
    if in_transaction and isinstance(exc, OperationFailure):
        reason = _transaction_lost(exc)
        if reason is not None:
            return MigrationError(
                f"migration {name} failed: {reason} ({_server(exc)}); {WITHOUT_TRANSACTION}"
            )
    if isinstance(exc, OperationFailure):
        cause = f"the server refused an operation: {_server(exc)}"
    elif isinstance(exc, ConnectionFailure):
        cause = f"the connection to the server failed: {first_line(exc)}"
    else:
        cause = first_line(exc)
    return MigrationError(f"migration {name} failed: {cause}; {ROLLED_BACK if in_transaction else KEPT}")


def _transaction_lost(exc: OperationFailure) -> str | None:
    """Why the server gave up the transaction itself, when that is what happened."""
    if exc.code == TRANSACTION_EXCEEDED_LIFETIME:
        return "the server aborted its transaction for running past transactionLifetimeLimitSeconds"
    if exc.code == NO_SUCH_TRANSACTION:
        return "the server had already aborted its transaction (past its lifetime limit, or a write conflict)"
    if exc.code == WRITE_CONFLICT or exc.has_error_label(TRANSIENT):
        return "a concurrent write conflicted with its transaction"
    return None


def _no_sessions(exc: BaseException) -> bool:
    return isinstance(exc, NotImplementedError)


def _standalone(exc: BaseException) -> bool:
    text = str(exc)
    if isinstance(exc, ConfigurationError):
        return "session" in text.lower() or "transaction" in text.lower()
    return (
        isinstance(exc, OperationFailure)
        and exc.code == ILLEGAL_OPERATION
        and ("Transaction numbers" in text or "replica set" in text or "retryable writes" in text)
    )


def _server(exc: OperationFailure) -> str:
    details = exc.details or {}
    lines = str(details.get("errmsg") or first_line(exc)).strip().splitlines()
    message = lines[0] if lines else type(exc).__name__
    name = details.get("codeName")
    return f"{name}, code {exc.code}: {message}" if name else f"code {exc.code}: {message}"


def first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__


log = library_logger("partner_repo.migrating.runner")

MIGRATION_FILE = re.compile(r"^\d{14}_[A-Za-z0-9_]+\.py$")
"""``YYYYMMDDHHMMSS_<name>.py``; Beanie applies the files in name order, so the timestamp orders them."""

ROOT = "root"
"""The name Beanie gives the node before the first migration."""

SHARDED_TRANSACTION = (
    "migrate --transaction is refused on a sharded cluster: a migration may create a collection (its backup, "
    "an index's), which a cross-shard transaction cannot do; run it without --transaction (the default: "
    "each write is guarded, and a run cut short continues where it stopped)"
)


def default_migrations_path() -> Path:
    """The migrations that ship with the package, whatever the working directory.

    Their one copy is the top-level ``migrations/`` of the source tree; an installed package holds it as
    ``partner_repo/migrations`` (``pyproject.toml`` maps the one onto the other), an editable install or a
    checkout reads it in place.
    """
    package = Path(__file__).resolve().parent.parent
    installed = package / "migrations"
    return installed if installed.is_dir() else package.parent / "migrations"


@dataclass(frozen=True)
class MigrationStatus:
    """Which migrations exist (in order) and which one the database is at (None: none applied)."""

    names: tuple[str, ...]
    current: str | None

    @property
    def applied(self) -> tuple[str, ...]:
        return self.names[: self._position()]

    @property
    def pending(self) -> tuple[str, ...]:
        return self.names[self._position() :]

    def _position(self) -> int:
        return 0 if self.current is None else self.names.index(self.current) + 1


@dataclass(frozen=True)
class MigrationRun:
    """What one run did: the migrations it applied (forward) or reverted (backward), in the order run."""

    direction: str
    ran: tuple[str, ...]
    before: str | None
    after: str | None


class _Node(MigrationNode):
    """A Beanie migration node bound to one database, recording what it runs and translating failures."""

    def __init__(self, name: str, database: MongoDatabase, ran: Callable[[str], None], **links: Any) -> None:
        super().__init__(name, **links)
        self.database = database
        self.ran = ran

    async def run_forward(self, allow_index_dropping: bool, use_transaction: bool) -> None:
        await super().run_forward(allow_index_dropping=allow_index_dropping, use_transaction=use_transaction)
        self.ran(self.name)

    async def run_backward(self, allow_index_dropping: bool, use_transaction: bool) -> None:
        await super().run_backward(allow_index_dropping=allow_index_dropping, use_transaction=use_transaction)
        if self.forward_class is not None or self.backward_class is not None:
            self.ran(self.name)

    async def run_migration_class(self, cls: type, allow_index_dropping: bool, use_transaction: bool) -> None:
        controllers = [
            getattr(cls, attribute)
            for attribute in dir(cls)
            if isinstance(getattr(cls, attribute), BaseMigrationController)
        ]
        try:
            if use_transaction:
                await self._run_in_transaction(controllers, allow_index_dropping)
            else:
                await self.run_migrations(controllers, self.database, allow_index_dropping, None)  # type: ignore[arg-type]
        except MigrationError:
            raise
        except Exception as exc:  # whatever a migration raises is reported naming it, the cause chained
            raise migration_failure(self.name, exc, in_transaction=use_transaction) from exc

    async def _run_in_transaction(
        self, controllers: list[BaseMigrationController], allow_index_dropping: bool
    ) -> None:
        session = await driver.transaction_session(driver.client_of(self.database))
        async with session, driver.transaction(session):
            await self.run_migrations(controllers, self.database, allow_index_dropping, session)


def _migration_files(path: Path) -> list[Path]:
    if not path.is_dir():
        raise MigrationError(f"no migrations directory at {path}")
    files = sorted(p for p in path.glob("[!_]*.py"))
    for file in files:
        if not MIGRATION_FILE.match(file.name):
            raise MigrationError(f"{file.name} in {path} is not named YYYYMMDDHHMMSS_<name>.py")
    return files


async def _current(database: MongoDatabase) -> str | None:
    await init_beanie(database=database, document_models=[MigrationLog])
    entry = await MigrationLog.find_one({"is_current": True})
    # Reverting the first migration makes Beanie record its root node as current: nothing is applied.
    return None if entry is None or entry.name == ROOT else entry.name


async def migration_status(database: MongoDatabase, path: Path | str | None = None) -> MigrationStatus:
    """The migrations in ``path`` (default :func:`default_migrations_path`) and the one the database is at."""
    files = _migration_files(Path(path) if path is not None else default_migrations_path())
    names = tuple(file.name for file in files)
    current = await _current(database)
    if current is not None and current not in names:
        raise MigrationError(
            f"the database is at migration {current}, which is not in {len(names)} known migrations; "
            "is this the right migrations directory?"
        )
    return MigrationStatus(names=names, current=current)


def _load(file: Path) -> tuple[type | None, type | None]:
    loader = SourceFileLoader(file.stem, str(file.absolute()))
    module = types.ModuleType(loader.name)
    try:
        loader.exec_module(module)
    except Exception as exc:  # a broken migration file must say which file, whatever it raised
        raise MigrationError(f"cannot load migration {file.name}: {first_line(exc)}") from exc
    for value in vars(module).values():  # a migration's own logger is the library's: its records are scrubbed
        if isinstance(value, logging.Logger) and value.name.startswith("partner_repo."):
            library_logger(value.name)
    forward = getattr(module, "Forward", None)
    backward = getattr(module, "Backward", None)
    if forward is None or backward is None:
        raise MigrationError(f"migration {file.name} must define both Forward and Backward classes")
    return forward, backward


def _build(
    database: MongoDatabase, files: Sequence[Path], current: str | None, ran: Callable[[str], None]
) -> _Node:
    root = _Node(ROOT, database, ran)
    start = root
    previous = root
    for file in files:
        forward, backward = _load(file)
        node = _Node(
            file.name, database, ran, forward_class=forward, backward_class=backward, prev_migration=previous
        )
        previous.next_migration = node
        previous = node
        if node.name == current:
            start = node
    return start


async def run_migrations(
    database: MongoDatabase,
    path: Path | str | None = None,
    *,
    backward: bool = False,
    distance: int | None = None,
    use_transaction: bool = False,
    progress: Progress | None = None,
) -> MigrationRun:
    """Apply the pending migrations (or revert applied ones) and return what ran.

    ``distance`` is how many to run; ``0`` means all of them. Forward defaults to all; backward defaults to
    one, the most recent (reverting everything must be asked for). By default each migration runs without a
    transaction: the migrations guard every write and are idempotent, so one that fails (a unit that kept
    changing, a lost connection) stays pending and running again continues. ``use_transaction=True`` runs
    each in one transaction instead, all or nothing: only for a small, quiet database on a replica set, since
    MongoDB aborts a transaction after ``transactionLifetimeLimitSeconds`` (60 s) or on a write conflict.

    On a sharded cluster ``use_transaction=True`` is refused before anything runs (SHARDED_TRANSACTION).

    ``progress`` is told how many of the migrations to run have run
    (:data:`~partner_repo.callables.Progress`).

    Beanie binds its migration documents (``migrations_log``, the migrations' frozen models) per process, so
    run one migration run at a time per process.
    """
    if distance is not None and (isinstance(distance, bool) or not isinstance(distance, int) or distance < 0):
        raise InvalidInput(f"distance must be a non-negative integer, got {distance!r}")
    if use_transaction and (await topology_of(database)).mongos:
        raise MigrationError(SHARDED_TRANSACTION)
    status = await migration_status(database, path)
    files = _migration_files(Path(path) if path is not None else default_migrations_path())
    direction = RunningDirections.BACKWARD if backward else RunningDirections.FORWARD
    steps = distance if distance is not None else (1 if backward else 0)
    candidates = len(status.applied if backward else status.pending)
    total = candidates if steps == 0 else min(steps, candidates)
    ran: list[str] = []

    def record(name: str) -> None:
        ran.append(name)
        if progress is not None:
            progress(len(ran), total)

    start = _build(database, files, status.current, record)
    if progress is not None:
        progress(0, total)
    start_name = status.current or "the start"
    log.info("migrations %s from %s (distance %s)", direction.value.lower(), start_name, steps)
    await start.run(
        mode=RunningMode(direction=direction, distance=steps),
        allow_index_dropping=False,
        use_transaction=use_transaction,
    )
    after = await _current(database)
    return MigrationRun(direction=direction.value.lower(), ran=tuple(ran), before=status.current, after=after)


__all__ = [
    "MigrationRun",
    "MigrationStatus",
    "default_migrations_path",
    "migration_status",
    "run_migrations",
]
