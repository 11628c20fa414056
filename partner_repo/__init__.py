"""partner-repo: the memory of the Partner conversational agent, kept in MongoDB.

Every public name is importable from here. Importing the package loads this module only: each name loads the
package that defines it when it is first used (PEP 562), so an application pays for what it uses, and
``import partner_repo`` changes nothing in the process (no logging set up, no import hook, no warnings
filter). :data:`_EXPORTS` says where each name lives; type checkers read the same names from the imports
under ``TYPE_CHECKING`` (``tests/unit/package/test_surface.py`` holds the two and ``__all__`` equal).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from partner_repo.admin import (
        CheckReport,
        DayCount,
        InvariantViolation,
        MemoryStats,
        RepairReport,
        SliceDetail,
        SlicePage,
        SliceQueries,
        SliceView,
        UnitChecker,
        UnitRepair,
        UnitRepairFailure,
        UnitSize,
        UnitView,
        UnitViolations,
    )
    from partner_repo.clock import (
        to_utc_ms,
        utc_now,
    )
    from partner_repo.cores import (
        DEFAULT_CORE_ID,
        MemoryCoreRepository,
        WindowState,
        roll_chat_messages,
    )
    from partner_repo.erasure import (
        ErasureReport,
        ErasureRequest,
        MemoryEraser,
    )
    from partner_repo.errors import (
        ChangeStreamUnavailable,
        ConflictError,
        ConnectionFailed,
        DuplicateSliceId,
        EmbedderMismatch,
        GroupLeaseLost,
        InvalidCursor,
        InvalidInput,
        InvalidSettings,
        LeaseLost,
        MigrationError,
        NotFound,
        OperationTimedOut,
        PartnerRepoError,
        StaleIncrement,
        TransactionsUnsupported,
        UnitOfAnotherCore,
        UnitTooLarge,
        UnreadableUnit,
        WindowTooLarge,
    )
    from partner_repo.events import (
        Erasure,
        ErasureAware,
        MemoryUnitRef,
        RollingResult,
    )
    from partner_repo.importing import (
        ImportIssue,
        ImportReport,
        import_partner_state,
        partner_unit,
    )
    from partner_repo.listener import (
        AfterRolling,
        AfterRollingRegistry,
        Backoff,
        DeadLetter,
        DeadLetterRepository,
        ErasureLog,
        GroupCheckpoint,
        ListenerCheckpoints,
        ListenerLag,
        LoggingConsumer,
        PrintConsumer,
        ReplayReport,
        RollingListener,
        UnitProgress,
        load_consumer,
        replay_dead_letters,
    )
    from partner_repo.migrating import (
        MigrationRun,
        MigrationStatus,
        default_migrations_path,
        migration_status,
        run_migrations,
    )
    from partner_repo.models import (
        MemoryCore,
        MemorySlice,
        MemoryUnit,
        Message,
        Role,
    )
    from partner_repo.mongo import (
        DOCUMENT_MODELS,
        MAX_DOCUMENT_BYTES,
        MAX_MESSAGE_BYTES,
        MAX_SUMMARY_BYTES,
        Connecting,
        Database,
        MongoDatabase,
        SecretsFilter,
        close_database,
        connect,
        ensure_indexes,
        in_memory_database,
        init_repository,
        mask_uri,
    )
    from partner_repo.normalization import (
        new_slice_id,
        normalize_unit,
    )
    from partner_repo.recall import (
        ActivatedSlice,
        MemoryRecall,
        RecallIndexer,
    )
    from partner_repo.rolling import (
        SUMMARY_ON_EMPTY,
        SUMMARY_ON_EXCEPTION,
        ExtractiveSummarizer,
        ResummarizedSlice,
        ResummarizeReport,
        RollingConfig,
        RollingService,
        Summarizer,
        extractive_summarizer,
        resolve_chat_increment,
    )
    from partner_repo.settings import (
        PartnerRepoSettings,
        admin_database,
        connect_from_settings,
        load_settings,
        settings_for,
    )
    from partner_repo.units import (
        HEAD_CACHE_SIZE,
        MemoryUnitRepository,
        UnitFingerprint,
        UnitHead,
        UnitOutline,
    )

_EXPORTS: dict[str, tuple[str, ...]] = {
    "partner_repo.admin": (
        "CheckReport",
        "DayCount",
        "InvariantViolation",
        "MemoryStats",
        "RepairReport",
        "SliceDetail",
        "SlicePage",
        "SliceQueries",
        "SliceView",
        "UnitChecker",
        "UnitRepair",
        "UnitRepairFailure",
        "UnitSize",
        "UnitView",
        "UnitViolations",
    ),
    "partner_repo.clock": (
        "to_utc_ms",
        "utc_now",
    ),
    "partner_repo.cores": (
        "DEFAULT_CORE_ID",
        "MemoryCoreRepository",
        "WindowState",
        "roll_chat_messages",
    ),
    "partner_repo.erasure": (
        "ErasureReport",
        "ErasureRequest",
        "MemoryEraser",
    ),
    "partner_repo.errors": (
        "ChangeStreamUnavailable",
        "ConflictError",
        "ConnectionFailed",
        "DuplicateSliceId",
        "EmbedderMismatch",
        "GroupLeaseLost",
        "InvalidCursor",
        "InvalidInput",
        "InvalidSettings",
        "LeaseLost",
        "MigrationError",
        "NotFound",
        "OperationTimedOut",
        "PartnerRepoError",
        "StaleIncrement",
        "TransactionsUnsupported",
        "UnitOfAnotherCore",
        "UnitTooLarge",
        "UnreadableUnit",
        "WindowTooLarge",
    ),
    "partner_repo.events": (
        "Erasure",
        "ErasureAware",
        "MemoryUnitRef",
        "RollingResult",
    ),
    "partner_repo.importing": (
        "ImportIssue",
        "ImportReport",
        "import_partner_state",
        "partner_unit",
    ),
    "partner_repo.listener": (
        "AfterRolling",
        "AfterRollingRegistry",
        "Backoff",
        "DeadLetter",
        "DeadLetterRepository",
        "ErasureLog",
        "GroupCheckpoint",
        "ListenerCheckpoints",
        "ListenerLag",
        "LoggingConsumer",
        "PrintConsumer",
        "ReplayReport",
        "RollingListener",
        "UnitProgress",
        "load_consumer",
        "replay_dead_letters",
    ),
    "partner_repo.migrating": (
        "MigrationRun",
        "MigrationStatus",
        "default_migrations_path",
        "migration_status",
        "run_migrations",
    ),
    "partner_repo.models": (
        "MemoryCore",
        "MemorySlice",
        "MemoryUnit",
        "Message",
        "Role",
    ),
    "partner_repo.mongo": (
        "DOCUMENT_MODELS",
        "MAX_DOCUMENT_BYTES",
        "MAX_MESSAGE_BYTES",
        "MAX_SUMMARY_BYTES",
        "Connecting",
        "Database",
        "MongoDatabase",
        "SecretsFilter",
        "close_database",
        "connect",
        "ensure_indexes",
        "in_memory_database",
        "init_repository",
        "mask_uri",
    ),
    "partner_repo.normalization": (
        "new_slice_id",
        "normalize_unit",
    ),
    "partner_repo.recall": (
        "ActivatedSlice",
        "MemoryRecall",
        "RecallIndexer",
    ),
    "partner_repo.rolling": (
        "SUMMARY_ON_EMPTY",
        "SUMMARY_ON_EXCEPTION",
        "ExtractiveSummarizer",
        "ResummarizedSlice",
        "ResummarizeReport",
        "RollingConfig",
        "RollingService",
        "Summarizer",
        "extractive_summarizer",
        "resolve_chat_increment",
    ),
    "partner_repo.settings": (
        "PartnerRepoSettings",
        "admin_database",
        "connect_from_settings",
        "load_settings",
        "settings_for",
    ),
    "partner_repo.units": (
        "HEAD_CACHE_SIZE",
        "MemoryUnitRepository",
        "UnitFingerprint",
        "UnitHead",
        "UnitOutline",
    ),
}
"""The package (or ground module) that defines each public name."""

_HOME = {name: module for module, names in _EXPORTS.items() for name in names}


def __getattr__(name: str) -> Any:
    """A public name, loaded from its package on first use; ``__version__`` from the installed metadata."""
    if name == "__version__":
        value: Any = _version()
    elif name in _HOME:
        value = getattr(importlib.import_module(_HOME[name]), name)
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("partner-repo")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree that was never installed
        return "0.0.0"


__all__ = [
    "DEFAULT_CORE_ID",
    "DOCUMENT_MODELS",
    "HEAD_CACHE_SIZE",
    "MAX_DOCUMENT_BYTES",
    "MAX_MESSAGE_BYTES",
    "MAX_SUMMARY_BYTES",
    "SUMMARY_ON_EMPTY",
    "SUMMARY_ON_EXCEPTION",
    "ActivatedSlice",
    "AfterRolling",
    "AfterRollingRegistry",
    "Backoff",
    "ChangeStreamUnavailable",
    "CheckReport",
    "ConflictError",
    "Connecting",
    "ConnectionFailed",
    "Database",
    "DayCount",
    "DeadLetter",
    "DeadLetterRepository",
    "DuplicateSliceId",
    "EmbedderMismatch",
    "Erasure",
    "ErasureAware",
    "ErasureLog",
    "ErasureReport",
    "ErasureRequest",
    "ExtractiveSummarizer",
    "GroupCheckpoint",
    "GroupLeaseLost",
    "ImportIssue",
    "ImportReport",
    "InvalidCursor",
    "InvalidInput",
    "InvalidSettings",
    "InvariantViolation",
    "LeaseLost",
    "ListenerCheckpoints",
    "ListenerLag",
    "LoggingConsumer",
    "MemoryCore",
    "MemoryCoreRepository",
    "MemoryEraser",
    "MemoryRecall",
    "MemorySlice",
    "MemoryStats",
    "MemoryUnit",
    "MemoryUnitRef",
    "MemoryUnitRepository",
    "Message",
    "MigrationError",
    "MigrationRun",
    "MigrationStatus",
    "MongoDatabase",
    "NotFound",
    "OperationTimedOut",
    "PartnerRepoError",
    "PartnerRepoSettings",
    "PrintConsumer",
    "RecallIndexer",
    "RepairReport",
    "ReplayReport",
    "ResummarizeReport",
    "ResummarizedSlice",
    "Role",
    "RollingConfig",
    "RollingListener",
    "RollingResult",
    "RollingService",
    "SecretsFilter",
    "SliceDetail",
    "SlicePage",
    "SliceQueries",
    "SliceView",
    "StaleIncrement",
    "Summarizer",
    "TransactionsUnsupported",
    "UnitChecker",
    "UnitFingerprint",
    "UnitHead",
    "UnitOfAnotherCore",
    "UnitOutline",
    "UnitProgress",
    "UnitRepair",
    "UnitRepairFailure",
    "UnitSize",
    "UnitTooLarge",
    "UnitView",
    "UnitViolations",
    "UnreadableUnit",
    "WindowState",
    "WindowTooLarge",
    "__version__",
    "admin_database",
    "close_database",
    "connect",
    "connect_from_settings",
    "default_migrations_path",
    "ensure_indexes",
    "extractive_summarizer",
    "import_partner_state",
    "in_memory_database",
    "init_repository",
    "load_consumer",
    "load_settings",
    "mask_uri",
    "migration_status",
    "new_slice_id",
    "normalize_unit",
    "partner_unit",
    "replay_dead_letters",
    "resolve_chat_increment",
    "roll_chat_messages",
    "run_migrations",
    "settings_for",
    "to_utc_ms",
    "utc_now",
]
