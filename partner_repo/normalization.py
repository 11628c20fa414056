"""Partner's slice normalization (``MemoryCore.normalizeMemoryUnit``), as a pure function.

It runs on every save path, so stored slices always have an id, a creation time and an interval inside the
unit's messages, sorted by creation time. The rules are Partner's, numbered as in its source; the two rules
about repeated ids are ours. Normalizing twice changes nothing.
"""

from __future__ import annotations

import uuid
from datetime import datetime

from partner_repo.clock import to_utc_ms, utc_now
from partner_repo.models import MemorySlice, MemoryUnit


def new_slice_id() -> str:
    """A fresh slice id (UUID4, as Partner uses)."""
    return str(uuid.uuid4())


def normalize_unit(unit: MemoryUnit, *, now: datetime | None = None) -> MemoryUnit:
    """Return a normalized copy of ``unit``; the argument is not modified."""
    updated_at = unit.updated_at or to_utc_ms(now or utc_now())  # 1
    max_end = len(unit.conversation_messages)  # 2
    seen: set[str] = set()
    slices: list[MemorySlice] = []
    for original in unit.slices:
        if original is None:  # 3
            continue
        piece = original.model_copy()
        if piece.id is None or not piece.id.strip() or piece.id in seen:  # 4, and repeated ids
            piece.id = new_slice_id()
        seen.add(piece.id)
        if piece.created_at is None:  # 5
            piece.created_at = updated_at
        start = piece.start_index
        piece.start_index = 0 if start is None or start < 0 else min(start, max_end)  # 6
        end = piece.end_index
        piece.end_index = max_end if end is None or end < piece.start_index else min(end, max_end)  # 7
        slices.append(piece)
    slices.sort(key=_created_at)  # 8: list.sort is stable, ties keep their order
    normalized: MemoryUnit = unit.model_copy(update={"updated_at": updated_at, "slices": slices}, deep=True)
    return normalized


def _created_at(piece: MemorySlice) -> datetime:
    assert piece.created_at is not None  # filled by rule 5 before sorting
    return piece.created_at
