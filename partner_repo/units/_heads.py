"""A unit's head (what it is without its messages) and the bounded cache of heads one repository last saw.

The head is all an append needs: where the new messages start, how many bytes the unit holds, the version to
guard the push with and the last slice (to keep slices sorted by time). It is cheap to read at any unit size.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from partner_repo.models import MemorySlice, Message
from partner_repo.mongo import DERIVED_PROJECTION, slice_from_document, stored_datetime

HEAD_CACHE_SIZE = 1024
"""How many unit heads a repository remembers to skip the head read of its next append to that unit."""

CONTENDED_S = 1.0
"""After losing a race on a unit, a repository reads its head before every push there for this long."""

HEAD_PROJECTION: dict[str, Any] = {
    "core_id": 1,
    **DERIVED_PROJECTION,
    "version": 1,
    "updated_at": 1,
    "previous_unit_id": 1,
    "taken_until": 1,
    "taken_count": 1,
    "trimmed_to": 1,
    "sealed": 1,
    "slices": {"$slice": -1},
}
"""What a head read fetches: the derived fields, the positions mark and the last slice, never a message."""


@dataclass(frozen=True)
class UnitHead:
    """What a unit is without its messages: cheap to read at any unit size."""

    id: str
    core_id: str
    message_count: int
    size_bytes: int
    version: int
    updated_at: datetime | None
    previous_unit_id: str | None
    last_slice: MemorySlice | None
    slice_count: int = 0
    taken_until: int | None = None
    """Every position (of the core's recorded messages) below this is taken by the unit: stored in it, or
    discarded on purpose by a clear. None: not known (a unit written before 0.4, or by another tool)."""
    taken_count: int | None = None
    """The unit's message count when ``taken_until`` was last set."""
    trimmed_to: int | None = None
    """Where the roll that set the mark trims the window to (the position its retained context starts at):
    a later roll with nothing new finishes that trim when it did not happen."""
    sealed: bool = False
    """A roll opened a continuation after it: the unit takes no more positions (its mark is final)."""

    @property
    def mark(self) -> int | None:
        """``taken_until`` while it can be trusted: no message came into the unit since it was set except
        through a write that kept the mark (a positioned roll, or an append that counted itself in). Any other
        write (a 0.3 roller, another tool, a replaced document) leaves it untrusted: None, and the next roll
        derives it once from the unit's stored tail, as Partner does."""
        if self.taken_until is None or self.taken_count != self.message_count:
            return None
        return self.taken_until


@dataclass(frozen=True)
class UnitTail:
    """A unit's last messages and its head, read together: all a roll decides and appends with."""

    head: UnitHead
    messages: list[Message]

    @property
    def message_count(self) -> int:
        return self.head.message_count

    @property
    def slice_count(self) -> int:
        return self.head.slice_count

    @property
    def size_bytes(self) -> int:
        return self.head.size_bytes

    @property
    def previous_unit_id(self) -> str | None:
        return self.head.previous_unit_id


def head_from(document: Mapping[str, Any]) -> UnitHead:
    """The head of a stored unit read with :data:`HEAD_PROJECTION` (its derived fields present)."""
    slices = document.get("slices") or []
    return UnitHead(
        id=document["_id"],
        core_id=document["core_id"],
        message_count=int(document.get("message_count", 0)),
        size_bytes=int(document.get("size_bytes", 0)),
        version=int(document.get("version", 0)),
        updated_at=stored_datetime(document.get("updated_at")),
        previous_unit_id=document.get("previous_unit_id"),
        last_slice=slice_from_document(slices[-1]) if slices else None,
        slice_count=int(document.get("slice_count", 0)),
        taken_until=_count_or_none(document.get("taken_until")),
        taken_count=_count_or_none(document.get("taken_count")),
        trimmed_to=_count_or_none(document.get("trimmed_to")),
        sealed=document.get("sealed") is True,
    )


def _count_or_none(value: object) -> int | None:
    """A stored count as written by the library; anything else (another tool's float, a string) is unknown."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


class HeadCache:
    """The unit heads one repository last saw, least recently used dropped first.

    Concurrent tasks share a repository, so an entry is only ever replaced by a newer version, and a stale
    entry is dropped only if nothing newer was learned meanwhile.
    """

    def __init__(self, size: int) -> None:
        self._size = size
        self._heads: OrderedDict[str, UnitHead] = OrderedDict()
        self._lost: OrderedDict[str, float] = OrderedDict()

    def get(self, unit_id: str) -> UnitHead | None:
        head = self._heads.get(unit_id)
        if head is not None:
            self._heads.move_to_end(unit_id)
        return head

    def learn(self, head: UnitHead) -> UnitHead:
        if self._size == 0:
            return head
        known = self._heads.get(head.id)
        if known is None or head.version > known.version:
            self._heads[head.id] = head
        self._heads.move_to_end(head.id)
        while len(self._heads) > self._size:
            self._heads.popitem(last=False)
        return head

    def forget(self, unit_id: str, *, up_to: int | None = None) -> None:
        known = self._heads.get(unit_id)
        if known is not None and (up_to is None or known.version <= up_to):
            del self._heads[unit_id]

    def lost(self, unit_id: str) -> None:
        """Another writer changed the unit first: for :data:`CONTENDED_S` its heads are not pushed to unread.

        Under contention a remembered head is a head start: the last winner pushes in one round trip while
        the others read first, so it wins again and again and starves them. Once a repository has lost on a
        unit, it reads before each push there, on equal terms with the other writers.
        """
        self._lost[unit_id] = time.monotonic()
        self._lost.move_to_end(unit_id)
        while len(self._lost) > max(self._size, 1):
            self._lost.popitem(last=False)

    def contended(self, unit_id: str) -> bool:
        at = self._lost.get(unit_id)
        return at is not None and time.monotonic() - at < CONTENDED_S


__all__ = ["CONTENDED_S", "HEAD_CACHE_SIZE", "HEAD_PROJECTION", "HeadCache", "UnitHead", "head_from"]
