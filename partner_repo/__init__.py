"""partner-repo: the memory of the Partner conversational agent, kept in MongoDB.

Every public name is importable from here.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from partner_repo.admin.check import (
    CheckReport,
    RepairReport,
    UnitChecker,
    UnitRepair,
    UnitRepairFailure,
    UnitViolations,
)
from partner_repo.admin.inspection import InvariantViolation
from partner_repo.admin.queries import SliceQueries
from partner_repo.admin.views import (
    DayCount,
    MemoryStats,
    SliceDetail,
    SlicePage,
    SliceView,
    UnitSize,
    UnitView,
)
from partner_repo.clock import to_utc_ms, utc_now
from partner_repo.cores.repository import DEFAULT_CORE_ID, MemoryCoreRepository
from partner_repo.cores.state import WindowState
from partner_repo.cores.window import roll_chat_messages
from partner_repo.database import (
    DOCUMENT_MODELS,
    Connecting,
    Database,
    MongoDatabase,
    close_database,
    connect,
    ensure_indexes,
    in_memory_database,
    init_repository,
)
from partner_repo.erasure.eraser import ErasureReport, MemoryEraser
from partner_repo.erasure.requests import ErasureRequest
from partner_repo.errors import (
    ChangeStreamUnavailable,
    ConflictError,
    ConnectionFailed,
    DuplicateSliceId,
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
from partner_repo.importing.importer import ImportIssue, ImportReport, import_partner_state, partner_unit
from partner_repo.listener import (
    AfterRolling,
    AfterRollingRegistry,
    Backoff,
    DeadLetter,
    DeadLetterRepository,
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
from partner_repo.listener.erasure_log import Erasure, ErasureAware, ErasureLog
from partner_repo.masking import mask_library_logs, mask_uri
from partner_repo.migrating.runner import (
    MigrationRun,
    MigrationStatus,
    default_migrations_path,
    migration_status,
    run_migrations,
)
from partner_repo.models import MemoryCore, MemorySlice, MemoryUnit, Message, Role
from partner_repo.normalization import new_slice_id, normalize_unit
from partner_repo.recall import ActivatedSlice, MemoryRecall, RecallIndexer
from partner_repo.rolling.config import RollingConfig
from partner_repo.rolling.increment import resolve_chat_increment
from partner_repo.rolling.result import MemoryUnitRef, RollingResult
from partner_repo.rolling.resummarize import ResummarizedSlice, ResummarizeReport
from partner_repo.rolling.service import RollingService
from partner_repo.rolling.summarizer import (
    SUMMARY_ON_EMPTY,
    SUMMARY_ON_EXCEPTION,
    ExtractiveSummarizer,
    Summarizer,
    extractive_summarizer,
)
from partner_repo.settings import (
    PartnerRepoSettings,
    admin_database,
    connect_from_settings,
    load_settings,
    settings_for,
)
from partner_repo.storage import MAX_DOCUMENT_BYTES, MAX_MESSAGE_BYTES, MAX_SUMMARY_BYTES
from partner_repo.units.repository import (
    HEAD_CACHE_SIZE,
    MemoryUnitRepository,
    UnitFingerprint,
    UnitHead,
    UnitOutline,
)

mask_library_logs()  # records of every partner_repo logger are scrubbed of credentials (partner_repo.masking)

try:
    __version__ = version("partner-repo")
except PackageNotFoundError:  # pragma: no cover - running from a source tree that was never installed
    __version__ = "0.0.0"

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
    "Erasure",
    "ErasureAware",
    "ErasureLog",
    "ErasureReport",
    "ErasureRequest",
    "ExtractiveSummarizer",
    "GroupCheckpoint",
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
