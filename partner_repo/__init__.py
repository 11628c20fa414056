"""partner-repo: the memory of the Partner conversational agent, kept in MongoDB.

Every public name is importable from here.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from partner_repo.clock import to_utc_ms, utc_now
from partner_repo.cores import DEFAULT_CORE_ID, MemoryCoreRepository
from partner_repo.database import MongoDatabase, connect, in_memory_database, init_repository, mask_uri
from partner_repo.errors import (
    ConflictError,
    ConnectionFailed,
    DuplicateSliceId,
    InvalidInput,
    NotFound,
    PartnerRepoError,
    UnitTooLarge,
)
from partner_repo.models import MemoryCore, MemorySlice, MemoryUnit, Message, Role
from partner_repo.normalization import new_slice_id, normalize_unit
from partner_repo.storage import MAX_DOCUMENT_BYTES
from partner_repo.units import MemoryUnitRepository, UnitHead

try:
    __version__ = version("partner-repo")
except PackageNotFoundError:  # pragma: no cover - running from a source tree that was never installed
    __version__ = "0.0.0"

__all__ = [
    "DEFAULT_CORE_ID",
    "MAX_DOCUMENT_BYTES",
    "ConflictError",
    "ConnectionFailed",
    "DuplicateSliceId",
    "InvalidInput",
    "MemoryCore",
    "MemoryCoreRepository",
    "MemorySlice",
    "MemoryUnit",
    "MemoryUnitRepository",
    "Message",
    "MongoDatabase",
    "NotFound",
    "PartnerRepoError",
    "Role",
    "UnitHead",
    "UnitTooLarge",
    "__version__",
    "connect",
    "in_memory_database",
    "init_repository",
    "mask_uri",
    "new_slice_id",
    "normalize_unit",
    "to_utc_ms",
    "utc_now",
]
