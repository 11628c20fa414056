"""The erasure log: every finished erasure, ids only, in the order listener groups deliver it.

Each document of ``erasures`` is one part of one finished erasure: the core, the units and slices it removed
(ids, never content), and its position in the log (``_id``, 1, 2, ...). A part is appended once its erasure
has deleted everything (so a consumer told of it can no longer be handed the erased slices), and a position
is taken by inserting ``last + 1``: two erasures finishing at once cannot both take it (``_id`` is unique),
the loser takes the next. A position therefore only becomes visible after every smaller one, which is what
lets a listener group keep one number as its erasure cursor. Parts are never updated or removed.

A part holds at most :data:`PART_UNITS` units and about :data:`PART_ID_BYTES` of slice ids, so a core of any
size is logged in documents far below 16 MiB; a consumer may receive one erasure as several parts.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime
from typing import Any

from partner_repo.clock import utc_now
from partner_repo.events import Erasure, ErasureScope
from partner_repo.mongo import DESCENDING, ERASURES, DuplicateKeyError, MongoDatabase

PART_UNITS = 1000
"""Units named in one part of the log, at most."""

PART_ID_BYTES = 4 * 1024 * 1024
"""Bytes of slice ids in one part, about (a unit's own ids always go in one part)."""


class ErasureLog:
    """Appends to and reads the erasure log on the database it is given."""

    def __init__(self, database: MongoDatabase) -> None:
        self._log = database[ERASURES]

    async def last_seq(self) -> int:
        """The position of the newest part (0 for an empty log)."""
        document = await self._log.find_one({}, {"_id": 1}, sort=[("_id", DESCENDING)])
        return 0 if document is None else int(document["_id"])

    async def after(self, seq: int, limit: int = 100) -> list[Erasure]:
        """The parts after position ``seq``, oldest first."""
        cursor = self._log.find({"_id": {"$gt": seq}}).sort("_id", 1).limit(limit)
        return [_erasure(document) async for document in cursor]

    async def get(self, seq: int) -> Erasure | None:
        document = await self._log.find_one({"_id": seq})
        return None if document is None else _erasure(document)

    async def append(
        self,
        erasure_id: str,
        core_id: str,
        scope: ErasureScope,
        targets: Iterable[tuple[Any, Sequence[Any]]],
        *,
        at: datetime | None = None,
    ) -> int:
        """Log the finished erasure ``erasure_id`` (``targets``: unit id and its slice ids, in a stable
        order) as parts; parts logged by an earlier run of the same erasure are kept as they are. Returns the
        number of parts.

        A whole core is always logged, with no units if it had none (a consumer may keep state per core);
        an erasure of units before a date that found none is not logged.
        """
        stamp = at or utc_now()
        count = 0
        parts = _parts(targets)
        for unit_ids, slice_ids in parts if scope == "before" else _at_least_one(parts):
            await self._insert_once(
                {
                    "erasure_id": erasure_id,
                    "part": count,
                    "core_id": core_id,
                    "scope": scope,
                    "unit_ids": unit_ids,
                    "slice_ids": slice_ids,
                    "erased_at": stamp,
                }
            )
            count += 1
        return count

    async def _insert_once(self, document: dict[str, Any]) -> None:
        """Insert at the next free position, unless this part is logged already."""
        key = {"erasure_id": document["erasure_id"], "part": document["part"]}
        while await self._log.find_one(key, {"_id": 1}) is None:
            try:
                await self._log.insert_one({"_id": await self.last_seq() + 1, **document})
                return
            except DuplicateKeyError:
                continue  # the position was taken meanwhile (or this very part was: the loop ends)


def _parts(targets: Iterable[tuple[Any, Sequence[Any]]]) -> Iterator[tuple[list[str], list[str]]]:
    """Group units (and their slice ids) into parts; only string ids are named (others cannot have been
    delivered: the listener skips units whose id is not a string)."""
    units: list[str] = []
    slices: list[str] = []
    size = 0
    for unit_id, slice_ids in targets:
        if not isinstance(unit_id, str):
            continue
        named = [s for s in slice_ids if isinstance(s, str)]
        added = sum(len(s) for s in named)
        if units and (len(units) >= PART_UNITS or size + added > PART_ID_BYTES):
            yield units, slices
            units, slices, size = [], [], 0
        units.append(unit_id)
        slices.extend(named)
        size += added
    if units:
        yield units, slices


def _at_least_one(parts: Iterable[tuple[list[str], list[str]]]) -> Iterator[tuple[list[str], list[str]]]:
    empty = True
    for part in parts:
        empty = False
        yield part
    if empty:
        yield [], []


def _erasure(document: dict[str, Any]) -> Erasure:
    return Erasure(
        seq=document["_id"],
        erasure_id=document["erasure_id"],
        part=document["part"],
        core_id=document["core_id"],
        scope=document["scope"],
        unit_ids=tuple(document.get("unit_ids") or ()),
        slice_ids=tuple(document.get("slice_ids") or ()),
        erased_at=document["erased_at"],
    )


__all__ = [
    "ErasureLog",
]
