"""What an erasure would remove, counted without changing anything: ``partner-repo forget CORE`` without
``--yes`` prints it.

The counts are the erasure's as things stand now (a roll or a turn meanwhile changes them); they count what
:class:`~partner_repo.erasure._eraser.MemoryEraser` touches: the core document and its window (a whole-core
erasure, or only the window), the units and their slices and messages, every listener group's progress on
those units, and their dead letters.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from partner_repo.mongo import CHECKPOINTS, CORES, DEAD_LETTERS, UNITS, MongoDatabase

PreviewScope = Literal["core", "before", "window"]


@dataclass(frozen=True)
class ErasurePreview:
    """What erasing ``scope`` of ``core_id`` would remove now. ``window_messages`` is the live window's (a
    whole-core erasure removes the core document with it); ``kept_units`` are the current session's units an
    erasure ``before`` a date keeps."""

    core_id: str
    scope: PreviewScope
    before: datetime | None = None
    core_exists: bool = False
    window_messages: int = 0
    units: int = 0
    slices: int = 0
    messages: int = 0
    checkpoints: int = 0
    dead_letters: int = 0
    kept_units: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        """Nothing would be removed."""
        return not (self.units or self.window_messages or (self.scope == "core" and self.core_exists))


async def preview_erasure(
    database: MongoDatabase,
    core_id: str,
    scope: PreviewScope,
    *,
    before: datetime | None = None,
    kept: Collection[str] = (),
) -> ErasurePreview:
    """Count what erasing ``scope`` of ``core_id`` would remove (``kept``: the units ``before`` keeps)."""
    core = await database[CORES].find_one({"_id": core_id}, {"chat_messages.role": 1})
    window = len((core or {}).get("chat_messages") or []) if scope != "before" else 0
    if scope == "window":
        return ErasurePreview(core_id, scope, core_exists=core is not None, window_messages=window)
    query: dict[str, Any] = {"core_id": core_id}
    if scope == "before":
        query["updated_at"] = {"$lt": before}
        if kept:
            query["_id"] = {"$nin": list(kept)}
    unit_ids: list[Any] = []
    slices = messages = 0
    async for unit in database[UNITS].find(query, {"slices.id": 1, "conversation_messages.role": 1}):
        unit_ids.append(unit["_id"])
        slices += sum(1 for piece in unit.get("slices") or [] if isinstance(piece, dict) and piece.get("id"))
        messages += len(unit.get("conversation_messages") or [])
    checkpoints = dead_letters = 0
    if unit_ids:
        checkpoints = await database[CHECKPOINTS].count_documents(
            {"kind": "unit", "unit_id": {"$in": unit_ids}}
        )
        dead_letters = await database[DEAD_LETTERS].count_documents({"unit_id": {"$in": unit_ids}})
    return ErasurePreview(
        core_id,
        scope,
        before=before,
        core_exists=core is not None,
        window_messages=window,
        units=len(unit_ids),
        slices=slices,
        messages=messages,
        checkpoints=checkpoints,
        dead_letters=dead_letters,
        kept_units=tuple(kept) if scope == "before" else (),
    )


__all__ = ["ErasurePreview", "PreviewScope", "preview_erasure"]
