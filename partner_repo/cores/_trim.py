"""Cutting the front of a core's chat window: the write behind ``MemoryCoreRepository.trim_window``.

The window only grows at the end (``record``) and only shrinks at the front (here), so a trim guarded by what
it read never loses a message recorded meanwhile: it reads again and retries instead. A roller that knows
the window's size (its snapshot) sends the write without reading, guarded on that size; the same write can
give the lease back. Every trim moves ``window_start`` by what it drops, so each message keeps its position.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from partner_repo.cores._lease import RELEASED
from partner_repo.cores._window import dropped_count
from partner_repo.errors import ConflictError, LeaseLost, NotFound
from partner_repo.mongo import messages_bytes, stored_datetime

TRIM_ATTEMPTS = 200
"""How often a trim that lost the race to concurrent ``record`` calls re-reads and retries."""

Collection = Any
"""A Motor (or mongomock-motor) collection of cores."""


@dataclass(frozen=True)
class RollFinish:
    """What a roll's last write sets besides the trim and the lease's release, so that no state between them
    exists: the unit head its append left (``appended``: the unit's id and version, see
    ``MemoryCore.last_unit_version``), and for an idle roll the new session (``session``, started at
    ``started_at``) and the mark that the roll covered the window (set while ``last_interaction_at`` is
    still ``idle_since`` and nothing was recorded since the snapshot)."""

    appended: tuple[str, int] | None = None
    session: str | None = None
    started_at: datetime | None = None
    idle_since: datetime | None = None

    def fields(self, *, idle: bool) -> dict[str, Any]:
        """The fields to ``$set``; ``idle``: the window is still the one the idle roll covered."""
        fields: dict[str, Any] = {}
        if self.appended is not None:
            fields.update(last_unit_id=self.appended[0], last_unit_version=self.appended[1])
        if self.session is not None:
            fields.update(
                memory_session_id=self.session, session_started_at=self.started_at, session_continues=None
            )
            if idle:
                fields["idle_rolled"] = True
        return fields


async def trim_front(
    cores: Collection,
    core_id: str,
    snapshot_size: int,
    retain_divisor: int,
    *,
    owner: str | None,
    window_size: int | None,
    release: bool,
    message_bytes: Sequence[int] | None = None,
    finish: RollFinish | None = None,
) -> int:
    """Drop what rolling the first ``snapshot_size`` messages consumed; how many were dropped (arguments
    validated by the caller; see ``MemoryCoreRepository.trim_window`` for their meaning). ``message_bytes``
    are the sizes of the last messages of the ``window_size`` the caller saw (a roller's snapshot): when they
    cover every message the trim keeps, the first write needs no read, and the window's byte count is set
    exactly. ``finish`` is set in the same write."""
    finish = finish or RollFinish()
    if window_size is not None and owner is not None and message_bytes is not None:
        drop = dropped_count(window_size, snapshot_size, retain_divisor)
        unseen = window_size - len(message_bytes)  # the caller saw only the last messages
        if drop >= unseen:
            guard = {"_id": core_id, "lease_owner": owner, **window_of_size(window_size)}
            if finish.session is not None:  # idle_rolled only while nothing was recorded since the snapshot
                guard["last_interaction_at"] = finish.idle_since
            kept_bytes = sum(message_bytes[drop - unseen :])
            update = _trim(window_size, drop, release, kept_bytes, finish.fields(idle=True))
            if await _write(cores, guard, update):
                return drop
    return await _trim_read(
        cores, core_id, snapshot_size, retain_divisor, owner, window_size, release, finish
    )


async def _trim_read(
    cores: Collection,
    core_id: str,
    snapshot_size: int,
    retain_divisor: int,
    owner: str | None,
    window_size: int | None,
    release: bool,
    finish: RollFinish,
) -> int:
    """The trim of a window read first (it grew since the snapshot, or the caller saw none), guarded on the
    version read and retried when a ``record`` lands in between."""
    projection = {"chat_messages": 1, "version": 1, "lease_owner": 1, "last_interaction_at": 1}
    for attempt in range(TRIM_ATTEMPTS):
        document = await cores.find_one({"_id": core_id}, projection)
        if document is None:
            raise NotFound(f"no core {core_id!r}")
        if owner is not None and document.get("lease_owner") != owner:
            raise LeaseLost(core_id, owner)
        window = document.get("chat_messages") or []
        size = len(window)
        drop = dropped_count(size, snapshot_size, retain_divisor)
        guard = {"_id": core_id, "version": _version_guard(document)}
        if owner is not None:
            guard["lease_owner"] = owner
        idle = (
            size == window_size and stored_datetime(document.get("last_interaction_at")) == finish.idle_since
        )
        update = _trim(size, drop, release, messages_bytes(window[drop:]), finish.fields(idle=idle))
        if await _write(cores, guard, update):
            return drop
        await asyncio.sleep(random.uniform(0, 0.0005 * min(attempt, 20)))
    raise ConflictError(f"core {core_id!r}: trimming the window lost the race {TRIM_ATTEMPTS} times")


async def clear_front(cores: Collection, core_id: str, owner: str) -> int | None:
    """Drop the whole window under ``owner``'s lease, ``window_start`` moving past it; how many messages it
    held (None: ``owner`` does not hold the lease). Guarded on the window as read: a ``record`` in between
    makes it read again and retry."""
    for _ in range(TRIM_ATTEMPTS):
        document = await cores.find_one({"_id": core_id}, {"chat_messages": 1, "lease_owner": 1})
        if document is None or document.get("lease_owner") != owner:
            return None
        size = len(document.get("chat_messages") or [])
        update = {
            # the unit's head changed (the clear raised its mark): no roller may trust the one it remembers
            "$set": {"chat_messages": [], "window_size": 0, "window_bytes": 0, "last_unit_version": None},
            "$inc": {"version": 1, "window_start": size},
        }
        if await _write(cores, {"_id": core_id, "lease_owner": owner, **window_of_size(size)}, update):
            return size
    raise ConflictError(f"core {core_id!r}: clearing the window lost the race {TRIM_ATTEMPTS} times")


def _trim(
    size: int, drop: int, release: bool, kept_bytes: int, fields: dict[str, Any] | None = None
) -> dict[str, dict[str, Any]] | None:
    """The update dropping the first ``drop`` of ``size`` messages (only the front goes, no message is
    rewritten, ``window_start`` moves by as many so every message keeps its position; the kept messages take
    ``kept_bytes``), giving the lease back when ``release``, setting ``fields`` too. None: nothing to drop,
    no lease to give back and nothing to set, so nothing to write."""
    if not drop and not release and not fields:
        return None
    update: dict[str, dict[str, Any]] = {"$set": dict(fields or {}), "$inc": {"version": 1}}
    if release:
        update["$set"].update(RELEASED["$set"])
        update["$inc"].update(RELEASED["$inc"])
    if drop:
        update["$push"] = {"chat_messages": {"$each": [], "$slice": -(size - drop)}}  # keep the last ones
        update["$set"]["window_size"] = size - drop
        update["$set"]["window_bytes"] = kept_bytes
        update["$inc"]["window_start"] = drop
    return {operator: fields for operator, fields in update.items() if fields}


async def _write(cores: Collection, guard: dict[str, Any], update: dict[str, Any] | None) -> bool:
    """Send ``update`` guarded by ``guard``; True when it matched (or there was nothing to write)."""
    if update is None:
        return True
    result = await cores.update_one(guard, update)
    return bool(result.matched_count)


def window_of_size(size: int) -> dict[str, Any]:
    """A query matching a window of exactly ``size`` messages. An empty window may also be stored as no
    array at all (a core inserted by another tool without one), which ``$size`` never matches."""
    if size:
        return {"chat_messages": {"$size": size}}
    return {"$or": [{"chat_messages": {"$size": 0}}, {"chat_messages": None}]}


def _version_guard(document: Mapping[str, Any]) -> Any:
    """Match the version read; a core written by another tool may have none yet."""
    return document.get("version", {"$exists": False})


__all__ = ["TRIM_ATTEMPTS", "RollFinish", "clear_front", "trim_front", "window_of_size"]
