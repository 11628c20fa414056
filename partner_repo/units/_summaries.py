"""Slices whose summary is a placeholder (``unsummarized``), and replacing one while it still is.

A roll whose every summarizer attempt failed stores Partner's placeholder with the slice marked
``unsummarized: true`` (the field is absent otherwise). :meth:`UnitSummaries.unsummarized` finds those slices
through the partial index ``unsummarized`` (``slices.unsummarized``, ``core_id``; only units holding such a
slice are in it, so it stays tiny and every query of it is served without a scan).

:meth:`UnitSummaries.replace` is one conditional update with the positional ``$``: the query matches the slice
with ``$elemMatch`` on its id *and* the placeholder fields as read (the summary, the mark, the revision), so
``slices.$`` is that very slice, and the update lands only while the placeholder is still there. Of two runs
replacing one slice, the second matches nothing (the mark is gone) and changes nothing. The write keeps the
unit's invariants: ``version`` is bumped (every write does: polling sees it, a cached head is re-read) and
``size_bytes`` moves by exactly the bytes the slice's fields change by; ``revision`` goes up by one.
(``arrayFilters`` would say the same, but the in-memory backend does not support them.)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from partner_repo.models import MemorySlice
from partner_repo.mongo import (
    MAX_DOCUMENT_BYTES,
    UNITS,
    MongoDatabase,
    bson_size,
    is_tombstone,
    slice_from_document,
)
from partner_repo.units._rules import refuse_too_large
from partner_repo.validation import optional_id, require_count, require_id

REPLACE_ATTEMPTS = 3
"""Reads and conditional writes of one slice before giving up (each miss re-reads the slice)."""

DEFAULT_MAX_TIME_MS = 30_000
"""How long the server may spend finding unsummarized slices."""

PLACEHOLDER_FIELDS = ("summary", "unsummarized", "revision")
"""The slice fields a replacement changes, matched as read."""


@dataclass(frozen=True)
class UnsummarizedSlice:
    """Where a placeholder summary is: the unit, its core, the slice and the interval of its messages."""

    unit_id: str
    core_id: str
    slice_id: str
    start_index: int
    end_index: int


class UnitSummaries:
    """Finds and replaces placeholder summaries in ``memory_units``; see the module docstring."""

    def __init__(
        self,
        database: MongoDatabase,
        *,
        max_document_bytes: int = MAX_DOCUMENT_BYTES,
        max_time_ms: int = DEFAULT_MAX_TIME_MS,
    ) -> None:
        self._units = database[UNITS]
        self._max_bytes = max_document_bytes
        self._max_time_ms = require_count(max_time_ms, "max_time_ms")

    async def unsummarized(self, core_id: str | None, limit: int) -> tuple[list[UnsummarizedSlice], bool]:
        """Up to ``limit`` unsummarized slices (of ``core_id``'s units, when given), and if more are left.

        One query through the ``unsummarized`` index, reading the slices' ids, marks and intervals (never a
        summary or a message); its cursor is closed before this returns, so no cursor outlives the call.
        """
        limit = require_count(limit, "limit")
        query = unsummarized_query(optional_id(core_id, "core_id"))
        projection = {
            "core_id": 1,
            "slices.id": 1,
            "slices.unsummarized": 1,
            "slices.start_index": 1,
            "slices.end_index": 1,
        }
        found: list[UnsummarizedSlice] = []
        cursor = self._units.find(query, projection).max_time_ms(self._max_time_ms)
        try:
            async for document in cursor:
                for piece in _unsummarized_in(document):
                    if len(found) == limit:
                        return found, True
                    found.append(piece)
        finally:
            await cursor.close()
        return found, False

    async def replace(self, unit_id: str, slice_id: str, summary: str) -> MemorySlice | None:
        """Replace the placeholder summary of ``slice_id`` with ``summary``, only while it is still one.

        Returns the slice as stored now (no longer ``unsummarized``, its ``revision`` one higher), or None
        when there was nothing to replace: the slice is not marked (any more: another run replaced it), or
        it or its unit is gone. :class:`UnitTooLarge` when the longer summary would not fit the unit.
        """
        unit_id, slice_id = require_id(unit_id, "unit_id"), require_id(slice_id, "slice_id")
        projection = {"core_id": 1, "size_bytes": 1, "slices": {"$elemMatch": {"id": slice_id}}}
        for _ in range(REPLACE_ATTEMPTS):
            document = await self._units.find_one({"_id": unit_id}, projection)
            found = [] if document is None or is_tombstone(document) else document.get("slices") or []
            stored = found[0] if found and isinstance(found[0], Mapping) else None
            if stored is None or stored.get("unsummarized") is not True:
                return None
            placeholder = {name: stored[name] for name in PLACEHOLDER_FIELDS if name in stored}
            revision = _revision(stored.get("revision")) + 1
            replacement = {"summary": summary, "revision": revision}
            grown = bson_size(replacement) - bson_size(placeholder)  # the element's other bytes stay
            size = document.get("size_bytes") if document is not None else None
            counted = isinstance(size, int) and not isinstance(size, bool)
            if isinstance(size, int) and counted:
                refuse_too_large(unit_id, size + grown, self._max_bytes)
            match: dict[str, Any] = {"id": slice_id, **placeholder}
            match.setdefault("revision", {"$exists": False})
            result = await self._units.update_one(
                {"_id": unit_id, "slices": {"$elemMatch": match}},
                {
                    "$set": {"slices.$.summary": summary, "slices.$.revision": revision},
                    "$unset": {"slices.$.unsummarized": ""},
                    "$inc": {"version": 1, **({"size_bytes": grown} if counted else {})},
                },
            )
            if result.matched_count:
                now = {k: v for k, v in stored.items() if k != "unsummarized"}
                return slice_from_document({**now, **replacement})
        return None


def unsummarized_query(core_id: str | None) -> dict[str, Any]:
    """The units holding an unsummarized slice (of ``core_id``): served by the partial ``unsummarized`` index,
    whose filter the query implies."""
    query: dict[str, Any] = {"slices.unsummarized": True}
    if core_id is not None:
        query["core_id"] = core_id
    return query


def _unsummarized_in(document: Mapping[str, Any]) -> list[UnsummarizedSlice]:
    unit_id, core_id = document.get("_id"), document.get("core_id")
    if not isinstance(unit_id, str) or not isinstance(core_id, str):
        return []  # not a unit the library can read: check reports it
    pieces: list[UnsummarizedSlice] = []
    for stored in document.get("slices") or []:
        if not isinstance(stored, Mapping) or stored.get("unsummarized") is not True:
            continue
        slice_id, start, end = stored.get("id"), stored.get("start_index"), stored.get("end_index")
        if isinstance(slice_id, str) and isinstance(start, int) and isinstance(end, int):
            pieces.append(UnsummarizedSlice(unit_id, core_id, slice_id, start, end))
    return pieces


def _revision(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


__all__ = ["UnitSummaries", "UnsummarizedSlice", "unsummarized_query"]
