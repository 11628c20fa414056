"""What a core says about its chat window without the window: enough to decide whether to roll.

``record`` answers with this (a few hundred bytes at any window size) instead of the whole core, and
``maybe_roll`` reads it instead of the window, so the per-turn path never echoes the window back.
The message count is the ``window_size`` field the repository keeps beside ``chat_messages`` (every write of
the window sets it in the same update). It is a hint for the trigger only: the roll itself works on the
window as stored, and the lease is taken only while the stored window still meets the trigger.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from partner_repo.cores._lease import lease_state
from partner_repo.cores._trim import window_of_size
from partner_repo.leases import LeaseState
from partner_repo.models import MemoryCore
from partner_repo.mongo import OperationFailure, messages_bytes


def state_projection() -> dict[str, Any]:
    """Everything on a core but its window (the other fields are bounded in size) and the head the last roll
    left (only a roller reads it, with the window, when it takes the lease): what every turn is answered
    with. A new dict at every call: mongomock adds ``_id`` to the projection it is given."""
    return {"chat_messages": 0, "last_unit_id": 0, "last_unit_version": 0}


def is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


@dataclass(frozen=True)
class WindowState:
    """A core's session, window size, interaction marks and lease, as one write or read left them."""

    core_id: str
    memory_session_id: str
    session_continues: str | None
    window_size: int
    window_start: int
    """The position of the window's first message (positions count every message recorded into the core)."""
    window_bytes: int | None
    """The BSON bytes of the window's messages (None: not counted yet, a core no 0.4 ``record`` wrote)."""
    last_interaction_at: datetime | None
    idle_rolled: bool
    lease: LeaseState
    version: int

    @property
    def window_end(self) -> int:
        """The position the next recorded message takes: how many messages the core has ever recorded
        (counted from its first roll under 0.4 for a core written before)."""
        return self.window_start + self.window_size

    @classmethod
    def of(
        cls, core: MemoryCore, window_size: int | None = None, window_bytes: int | None = None
    ) -> WindowState:
        """The state of a core as read (its window counted as read unless ``window_size`` and
        ``window_bytes`` say otherwise)."""
        return cls(
            core_id=core.id,
            memory_session_id=core.memory_session_id,
            session_continues=core.session_continues,
            window_size=len(core.chat_messages) if window_size is None else window_size,
            window_start=core.window_start,
            window_bytes=(
                messages_bytes(m.model_dump() for m in core.chat_messages)
                if window_size is None
                else window_bytes
            ),
            last_interaction_at=core.last_interaction_at,
            idle_rolled=core.idle_rolled,
            lease=lease_state(core.lease_owner, core.lease_beat, core.lease_ttl_ms),
            version=core.version,
        )

    @classmethod
    def from_document(cls, document: dict[str, Any], window_size: int) -> WindowState:
        """The state of a core document read without its window (validated like the core itself)."""
        counted = document.get("window_bytes")
        window_bytes = counted if is_count(counted) else None
        return cls.of(MemoryCore.model_validate({**document, "chat_messages": []}), window_size, window_bytes)


async def count_window(cores: Any, core_id: str) -> int | None:
    """Count a window whose stored counts are missing or not counts (a core written before 0.4, or by
    another tool), and store them, guarded on the window still holding as many; None: no core. A
    missing or null window is an empty one (and becomes an empty array, so ``record`` can push to it)."""
    document = await cores.find_one(
        {"_id": core_id}, {"chat_messages": 1, "window_size": 1, "window_bytes": 1}
    )
    if document is None:
        return None
    window = document.get("chat_messages")
    size = len(window or [])
    counts = {"window_size": size, "window_bytes": messages_bytes(window or [])}
    stored = {name: document.get(name) for name in counts}
    if stored != counts or not isinstance(window, list):
        fix: dict[str, Any] = dict(counts)
        if not isinstance(window, list):
            fix["chat_messages"] = []
        guard = {
            name: {"$exists": False} if name not in document else value for name, value in stored.items()
        }
        await cores.update_one({"_id": core_id, **window_of_size(size), **guard}, {"$set": fix})
    return size


NOT_AN_ARRAY_CODES = frozenset({2, 14})
"""BadValue and TypeMismatch: what a server answers a ``$push`` onto a field that is not an array."""


async def repair_window(cores: Any, core_id: str, failure: Exception) -> bool:
    """Whether ``failure`` was a window stored as something else than an array (null, by another tool),
    now stored as the empty window it reads as (counted, once): then ``record`` can push to it."""
    if isinstance(failure, OperationFailure) and failure.code not in NOT_AN_ARRAY_CODES:
        return False
    if await cores.find_one({"_id": core_id, "chat_messages": {"$not": {"$type": "array"}}}) is None:
        return False
    await count_window(cores, core_id)
    return True


__all__ = [
    "NOT_AN_ARRAY_CODES",
    "WindowState",
    "count_window",
    "is_count",
    "repair_window",
    "state_projection",
]
