"""MemoryCoreRepository: per agent, the current memory session (and, from the rolling issue on, the window).

Every write is a single atomic update on the core document, so several service processes can share a core.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from pymongo import ReturnDocument
from pymongo.errors import DuplicateKeyError

from partner_repo.clock import utc_now
from partner_repo.database import MongoDatabase
from partner_repo.errors import ConflictError
from partner_repo.indexes import CORES
from partner_repo.models import MemoryCore
from partner_repo.validation import optional_datetime, require_id

DEFAULT_CORE_ID = "default"


def new_session_id() -> str:
    """A fresh memory session id (UUID4, as Partner uses); it becomes the id of the session's unit."""
    return str(uuid.uuid4())


class MemoryCoreRepository:
    """Reads and writes memory cores on the database it is given."""

    def __init__(self, database: MongoDatabase) -> None:
        self._database = database
        self._cores = database[CORES]

    async def get(self, core_id: str = DEFAULT_CORE_ID) -> MemoryCore | None:
        document = await self._cores.find_one({"_id": require_id(core_id, "core_id")})
        return None if document is None else MemoryCore.model_validate(document)

    async def get_or_create(self, core_id: str = DEFAULT_CORE_ID, *, now: datetime | None = None) -> MemoryCore:
        """The core, created with a fresh memory session when absent (atomic upsert; concurrent callers agree)."""
        core_id = require_id(core_id, "core_id")
        stamp = optional_datetime(now, "now") or utc_now()
        document = await self._upsert(
            core_id,
            {"$setOnInsert": self._fresh_fields(stamp)},
        )
        return MemoryCore.model_validate(document)

    async def session_id(self, core_id: str = DEFAULT_CORE_ID) -> str:
        """The core's current memory session id (the id of the unit new memory goes to)."""
        return (await self.get_or_create(core_id)).memory_session_id

    async def refresh_session(self, core_id: str = DEFAULT_CORE_ID, *, now: datetime | None = None) -> str:
        """Start a new memory session atomically; returns the new session id."""
        core_id = require_id(core_id, "core_id")
        stamp = optional_datetime(now, "now") or utc_now()
        session = new_session_id()
        fresh = self._fresh_fields(stamp)
        for key in ("memory_session_id", "session_started_at", "version"):
            fresh.pop(key)
        await self._upsert(
            core_id,
            {
                "$set": {"memory_session_id": session, "session_started_at": stamp},
                "$inc": {"version": 1},
                "$setOnInsert": fresh,
            },
        )
        return session

    async def _upsert(self, core_id: str, update: dict[str, Any]) -> dict[str, Any]:
        for _ in range(2):  # two first-time upserts may race on the insert; the loser retries as an update
            try:
                document = await self._cores.find_one_and_update(
                    {"_id": core_id}, update, upsert=True, return_document=ReturnDocument.AFTER
                )
                return dict(document)
            except DuplicateKeyError:
                continue
        raise ConflictError(f"core {core_id!r}: concurrent creation did not settle; try again")

    @staticmethod
    def _fresh_fields(stamp: datetime) -> dict[str, Any]:
        return {
            "memory_session_id": new_session_id(),
            "session_started_at": stamp,
            "chat_messages": [],
            "last_interaction_at": None,
            "lease_owner": None,
            "lease_until": None,
            "version": 0,
        }
