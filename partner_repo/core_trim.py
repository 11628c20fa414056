"""Cutting the front of a core's chat window: the write behind ``MemoryCoreRepository.trim_window``.

The window only grows at the end (``record``) and only shrinks at the front (here), so a trim guarded by what
it read never loses a message recorded meanwhile: it reads again and retries instead. A roller that knows
the window's size (its snapshot) sends the write without reading, guarded on that size; the same write can
give the lease back and record which front of the window is now stored
(:class:`~partner_repo.core_state.StoredFront`).
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Mapping
from typing import Any

from partner_repo.core_lease import RELEASED
from partner_repo.core_state import StoredFront
from partner_repo.errors import ConflictError, LeaseLost, NotFound
from partner_repo.window import dropped_count

TRIM_ATTEMPTS = 200
"""How often a trim that lost the race to concurrent ``record`` calls re-reads and retries."""

Update = Mapping[str, Mapping[str, Any]]
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
    done: Update = RELEASED if release else {}
    if window_size is not None and owner is not None:
        drop = dropped_count(window_size, snapshot_size, retain_divisor)
        guard = {"_id": core_id, "lease_owner": owner, "chat_messages": {"$size": window_size}}
        if await _drop_front(
            cores, guard, window_size, drop, _front(done, rolled_into, window_size, snapshot_size, drop)
        ):
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
        if await _drop_front(cores, guard, size, drop, _front(done, rolled_into, size, snapshot_size, drop)):
            return drop
        await asyncio.sleep(random.uniform(0, 0.0005 * min(attempt, 20)))
    raise ConflictError(f"core {core_id!r}: trimming the window lost the race {TRIM_ATTEMPTS} times")


async def _drop_front(cores: Collection, guard: dict[str, Any], size: int, drop: int, done: Update) -> bool:
    """One write, guarded, dropping the first ``drop`` of ``size`` messages and applying ``done`` (the lease
    release, the stored front); True when it matched. Nothing to drop and no lease to give back writes
    nothing (the stored front is then still what it was)."""
    if not drop and not done.get("$inc"):
        return True
    update: dict[str, dict[str, Any]] = {
        operator: {**done.get(operator, {})} for operator in ("$set", "$inc", "$unset")
    }
    if drop:
        # keep the last (size - drop): only the front goes, no message is rewritten
        update["$push"] = {"chat_messages": {"$each": [], "$slice": -(size - drop)}}
        update["$set"]["window_size"] = size - drop
    update["$inc"]["version"] = 1
    result = await cores.update_one(
        guard, {operator: fields for operator, fields in update.items() if fields}
    )
    return bool(result.matched_count)


def _front(
    done: Update, rolled_into: tuple[str, int] | None, size: int, snapshot_size: int, drop: int
) -> dict[str, dict[str, Any]]:
    """``done`` plus the window's stored front after dropping ``drop`` of ``size``: recorded when a roll's
    snapshot (all of it still at the front) now ends a unit, removed otherwise."""
    update = {operator: dict(fields) for operator, fields in done.items()}
    if rolled_into is not None and size >= snapshot_size:
        unit_id, count = rolled_into
        stored = StoredFront(unit_id, count, snapshot_size - drop)
        update.setdefault("$set", {})["window_stored"] = stored.as_document()
    else:
        update.setdefault("$unset", {})["window_stored"] = ""
    return update


def _version_guard(document: Mapping[str, Any]) -> Any:
    """Match the version read; a core written by another tool may have none yet."""
    return document.get("version", {"$exists": False})


__all__ = ["TRIM_ATTEMPTS", "trim_front"]
