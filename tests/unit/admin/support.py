"""Builders for the admin tests: units with slices at chosen times, and raw (bad) documents."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from partner_repo import MemorySlice, MemoryUnit, MemoryUnitRepository, Message
from partner_repo.mongo import UNITS

T0 = datetime(2024, 3, 1, 9, 0, tzinfo=UTC)


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


async def seed_unit(
    database: Any,
    unit_id: str,
    core_id: str,
    slices: Sequence[tuple[str, datetime, str]],
    *,
    messages_per_slice: int = 2,
) -> MemoryUnit:
    """A unit whose slice ``i`` (id, created_at, summary) covers its own ``messages_per_slice`` messages."""
    messages: list[Message] = []
    pieces: list[MemorySlice | None] = []
    for slice_id, created_at, summary in slices:
        start = len(messages)
        for n in range(messages_per_slice):
            role = "user" if n % 2 == 0 else "assistant"
            messages.append(Message(role=role, content=f"{unit_id}/{slice_id} message {n}"))
        pieces.append(
            MemorySlice(
                id=slice_id,
                start_index=start,
                end_index=len(messages),
                summary=summary,
                created_at=created_at,
            )
        )
    unit = MemoryUnit(id=unit_id, core_id=core_id, conversation_messages=messages, slices=pieces)
    last = max((t for _, t, _ in slices), default=T0)
    return await MemoryUnitRepository(database).save(unit, now=last)


async def insert_raw(database: Any, document: dict[str, Any]) -> None:
    """Store a document exactly as given, bypassing the repository (data written by another tool)."""
    await database[UNITS].insert_one(document)


def raw_unit(unit_id: str, core_id: str = "c", **fields: Any) -> dict[str, Any]:
    """A raw unit document as another tool might write it: no derived fields unless given."""
    document: dict[str, Any] = {
        "_id": unit_id,
        "core_id": core_id,
        "conversation_messages": [
            {"role": "user", "content": "hello"},
            {"role": "assistant", "content": "hi"},
        ],
        "slices": [],
        "updated_at": T0,
    }
    document.update(fields)
    return document
