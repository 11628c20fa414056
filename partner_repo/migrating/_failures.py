"""What a failed migration tells its operator: one :class:`MigrationError` naming the migration, the cause in
one line, and what to do next.

The advice depends on how it ran. In a transaction nothing of the migration is applied, and the failures a
transaction brings on its own (MongoDB aborts one after ``transactionLifetimeLimitSeconds``, 60 s by default,
and on a write conflict with any concurrent writer) say to run without ``--transaction``. Without one, what
the migration already wrote stays; it is not recorded as applied, so running it again continues from there.
"""

from __future__ import annotations

from partner_repo.errors import MigrationError, TransactionsUnsupported
from partner_repo.mongo import ConfigurationError, ConnectionFailure, OperationFailure

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
