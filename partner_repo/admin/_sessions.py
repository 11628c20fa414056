"""Cores whose memory session is another core's unit: what ``check`` reports and ``repair`` fixes.

A core records into the unit its ``memory_session_id`` names; a unit belongs to one core (its ``core_id``).
A core pointed at another core's unit (by a tool, or an import of one Partner state into two cores before
``import-state`` refused it) can never roll: every append there is refused. ``check`` finds such cores by
walking the cores in ``_id`` order in bounded batches, looking their session units up by ``_id`` (one query
per batch), and ``repair`` gives each a fresh session, with a compare-and-set on the session it found, so a
core that moved on meanwhile is left alone. The window is kept: the next roll stores it in the new session.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from pydantic import BaseModel, ConfigDict

from partner_repo.cores import MemoryCoreRepository, new_session_id
from partner_repo.mongo import CORES, UNITS, MongoDatabase
from partner_repo.validation import require_id

BATCH_CORES = 100


class ForeignSession(BaseModel):
    """A core whose session unit (``session_id``) belongs to core ``owner``."""

    model_config = ConfigDict(frozen=True)

    core_id: str
    session_id: str
    owner: str


async def foreign_sessions(
    database: MongoDatabase, core_id: str | None = None, *, max_time_ms: int, batch: int = BATCH_CORES
) -> AsyncIterator[ForeignSession]:
    """Every core (or only ``core_id``) whose session unit belongs to another core."""
    cores, units = database[CORES], database[UNITS]
    last: str | None = None
    while True:
        query: dict[str, Any] = {"_id": {"$type": "string"}}
        if core_id is not None:
            query["_id"] = require_id(core_id, "core_id")
        elif last is not None:
            query["_id"]["$gt"] = last
        cursor = (
            cores.find(query, {"memory_session_id": 1}).sort("_id", 1).limit(batch).max_time_ms(max_time_ms)
        )
        found = [document async for document in cursor]
        sessions = {
            d["memory_session_id"]: d["_id"] for d in found if isinstance(d.get("memory_session_id"), str)
        }
        owners = units.find({"_id": {"$in": sorted(sessions)}, "core_id": {"$exists": True}}, {"core_id": 1})
        async for unit in owners.max_time_ms(max_time_ms):
            if unit["core_id"] != sessions[unit["_id"]]:
                yield ForeignSession(
                    core_id=sessions[unit["_id"]], session_id=unit["_id"], owner=unit["core_id"]
                )
        if core_id is not None or len(found) < batch:
            return
        last = found[-1]["_id"]


async def give_fresh_session(database: MongoDatabase, foreign: ForeignSession) -> bool:
    """Give the core a fresh session while its session is still the foreign unit; True when it did."""
    cores = MemoryCoreRepository(database)
    return await cores.set_session(foreign.core_id, new_session_id(), expected=foreign.session_id)


__all__ = ["BATCH_CORES", "ForeignSession", "foreign_sessions", "give_fresh_session"]
