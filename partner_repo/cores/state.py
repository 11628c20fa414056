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

from partner_repo.cores.lease import lease_state
from partner_repo.leases import LeaseState
from partner_repo.models import MemoryCore


def state_projection() -> dict[str, Any]:
    """Everything on a core but its window (the other fields are bounded in size). A new dict at every call:
    mongomock adds ``_id`` to the projection it is given."""
    return {"chat_messages": 0, "window_stored": 0}


@dataclass(frozen=True)
class StoredFront:
    """What the last roll left stored of the window: its first ``front`` messages are the last ``front`` of
    unit ``unit_id`` as it stood at ``message_count`` messages.

    The roll's trim writes it in the same update that cuts the window, and every other change of the window's
    front removes it; ``record`` only adds at the end, and units only grow. So while the unit still holds
    ``message_count`` messages, the next roll knows its increment is the window after ``front`` and reads only
    those ``front`` stored messages (to check them) instead of a tail as long as the window.
    """

    unit_id: str
    message_count: int
    front: int

    def as_document(self) -> dict[str, Any]:
        return {"unit_id": self.unit_id, "message_count": self.message_count, "front": self.front}

    @classmethod
    def parse(cls, value: object) -> StoredFront | None:
        """The stored value, or None when absent or not one of ours (then the roll reads the whole tail)."""
        if not isinstance(value, dict):
            return None
        unit_id, count, front = value.get("unit_id"), value.get("message_count"), value.get("front")
        if not isinstance(unit_id, str) or not all(is_count(n) for n in (count, front)):
            return None
        assert isinstance(count, int) and isinstance(front, int)
        return cls(unit_id, count, front) if front <= count else None


def is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


@dataclass(frozen=True)
class WindowState:
    """A core's session, window size, interaction marks and lease, as one write or read left them."""

    core_id: str
    memory_session_id: str
    session_continues: str | None
    window_size: int
    last_interaction_at: datetime | None
    idle_rolled: bool
    lease: LeaseState
    version: int

    @classmethod
    def of(cls, core: MemoryCore, window_size: int | None = None) -> WindowState:
        """The state of a core as read (its window counted as read unless ``window_size`` says otherwise)."""
        return cls(
            core_id=core.id,
            memory_session_id=core.memory_session_id,
            session_continues=core.session_continues,
            window_size=len(core.chat_messages) if window_size is None else window_size,
            last_interaction_at=core.last_interaction_at,
            idle_rolled=core.idle_rolled,
            lease=lease_state(core.lease_owner, core.lease_beat, core.lease_ttl_ms),
            version=core.version,
        )

    @classmethod
    def from_document(cls, document: dict[str, Any], window_size: int) -> WindowState:
        """The state of a core document read without its window (validated like the core itself)."""
        return cls.of(MemoryCore.model_validate({**document, "chat_messages": []}), window_size)


__all__ = ["StoredFront", "WindowState", "is_count", "state_projection"]
