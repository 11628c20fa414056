"""Cutting the front of a core's chat window: the write behind ``MemoryCoreRepository.trim_window``.

The window only grows at the end (``record``) and only shrinks at the front (here), so a trim guarded by what
it read never loses a message recorded meanwhile: it reads again and retries instead. A roller that knows
the window's size (its snapshot) sends the write without reading, guarded on that size; the same write can
give the lease back and record which front of the window is now stored
(:class:`~partner_repo.cores.state.StoredFront`).
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Mapping
from typing import Any

from partner_repo.cores.lease import RELEASED
from partner_repo.cores.state import StoredFront
from partner_repo.cores.window import dropped_count
from partner_repo.errors import ConflictError, LeaseLost, NotFound

TRIM_ATTEMPTS = 200
"""How often a trim that lost the race to concurrent ``record`` calls re-reads and retries."""

Collection = Any
"""A Motor (or mongomock-motor) collection of cores."""


async def trim_front(
    cores: Collection,
    core_id: str,
    snapshot_size: int,
    retain_divisor: int,
    *,
    owner: str | None,
    window_size: int | None,
    release: bool,
    rolled_into: tuple[str, int] | None,
) -> int:
    """Drop what rolling the first ``snapshot_size`` messages consumed; how many were dropped (arguments
    validated by the caller; see ``MemoryCoreRepository.trim_window`` for their meaning)."""
    if window_size is not None and owner is not None:
        drop = dropped_count(window_size, snapshot_size, retain_divisor)
        guard = {"_id": core_id, "lease_owner": owner, "chat_messages": {"$size": window_size}}
        if await _write(cores, guard, _trim(window_size, drop, snapshot_size, release, rolled_into)):
            return drop
    projection = {"chat_messages": 1, "version": 1, "lease_owner": 1}
    for attempt in range(TRIM_ATTEMPTS):
        document = await cores.find_one({"_id": core_id}, projection)
        if document is None:
            raise NotFound(f"no core {core_id!r}")
        if owner is not None and document.get("lease_owner") != owner:
            raise LeaseLost(core_id, owner)
        size = len(document.get("chat_messages") or [])
        drop = dropped_count(size, snapshot_size, retain_divisor)
        guard = {"_id": core_id, "version": _version_guard(document)}
        if owner is not None:
            guard["lease_owner"] = owner
        if await _write(cores, guard, _trim(size, drop, snapshot_size, release, rolled_into)):
            return drop
        await asyncio.sleep(random.uniform(0, 0.0005 * min(attempt, 20)))
    raise ConflictError(f"core {core_id!r}: trimming the window lost the race {TRIM_ATTEMPTS} times")


def _trim(
    size: int, drop: int, snapshot_size: int, release: bool, rolled_into: tuple[str, int] | None
) -> dict[str, dict[str, Any]] | None:
    """The update dropping the first ``drop`` of ``size`` messages (only the front goes, no message is
    rewritten), giving the lease back when ``release``, and recording the window's stored front when a roll's
    snapshot (all of it still at the front) now ends a unit, else removing it. None: nothing to drop and no
    lease to give back, so nothing to write (the stored front is then still what it was)."""
    if not drop and not release:
        return None
    update: dict[str, dict[str, Any]] = {"$set": {}, "$inc": {"version": 1}, "$unset": {}}
    if release:
        update["$set"].update(RELEASED["$set"])
        update["$inc"].update(RELEASED["$inc"])
    if drop:
        update["$push"] = {"chat_messages": {"$each": [], "$slice": -(size - drop)}}  # keep the last ones
        update["$set"]["window_size"] = size - drop
    if rolled_into is not None and size >= snapshot_size:
        unit_id, count = rolled_into
        update["$set"]["window_stored"] = StoredFront(unit_id, count, snapshot_size - drop).as_document()
    else:
        update["$unset"]["window_stored"] = ""
    return {operator: fields for operator, fields in update.items() if fields}


async def _write(cores: Collection, guard: dict[str, Any], update: dict[str, Any] | None) -> bool:
    """Send ``update`` guarded by ``guard``; True when it matched (or there was nothing to write)."""
    if update is None:
        return True
    result = await cores.update_one(guard, update)
    return bool(result.matched_count)


def _version_guard(document: Mapping[str, Any]) -> Any:
    """Match the version read; a core written by another tool may have none yet."""
    return document.get("version", {"$exists": False})


__all__ = ["TRIM_ATTEMPTS", "trim_front"]
