"""Documents as partner-repo 0.3 stored them, for the tests of the positions migration (unit and integration:
``tests/contract/test_migrations_on_mongodb.py``)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from partner_repo.mongo import bson_size

ROLLED_BY_0_3 = datetime(2024, 5, 1, 9, 0, tzinfo=UTC)
"""When the 0.3 documents below were written."""


def msg(n: int) -> dict[str, str]:
    """Message ``n`` of a dialogue as 0.3 stored it; unique by its number, so losses and repeats show."""
    return {"role": "user" if n % 2 == 0 else "assistant", "content": f"message {n}"}


def msgs(start: int, stop: int) -> list[dict[str, str]]:
    """Messages ``start`` to ``stop`` (not included) of that dialogue."""
    return [msg(n) for n in range(start, stop)]


def unit_of_0_3(
    unit_id: str, messages: list[dict[str, str]], *, previous: str | None = None, core_id: str = "c"
) -> dict[str, Any]:
    """A unit as 0.3 stored it: one slice per roll (here one), the derived fields, an exact size, no mark."""
    slices = [
        {
            "id": f"{unit_id}-slice",
            "start_index": 0,
            "end_index": len(messages),
            "summary": "rolled by 0.3",
            "created_at": ROLLED_BY_0_3,
            "rolling_size": len(messages),
            "retain_divisor": 6,
        }
    ]
    document: dict[str, Any] = {
        "_id": unit_id,
        "core_id": core_id,
        "conversation_messages": messages,
        "slices": slices,
        "updated_at": ROLLED_BY_0_3,
        "previous_unit_id": previous,
        "version": 4,
        "message_count": len(messages),
        "slice_count": len(slices),
        "slice_ids": [s["id"] for s in slices],
        "size_bytes": 0,
    }
    document["size_bytes"] = bson_size(document)
    return document


def core_of_0_3(
    session: str,
    window: list[dict[str, str]],
    *,
    continues: str | None = None,
    stored: dict[str, Any] | None = None,
    core_id: str = "c",
) -> dict[str, Any]:
    """A core as 0.3 left it after a roll: its window counted, the lease given back, no ``window_start``, and
    the stored front its trim recorded (``window_stored``) when given."""
    document: dict[str, Any] = {
        "_id": core_id,
        "memory_session_id": session,
        "session_started_at": ROLLED_BY_0_3,
        "chat_messages": window,
        "window_size": len(window),
        "last_interaction_at": ROLLED_BY_0_3,
        "session_continues": continues,
        "lease_owner": None,
        "lease_beat": 7,
        "lease_ttl_ms": 60_000,
        "idle_rolled": False,
        "version": 12,
    }
    if stored is not None:
        document["window_stored"] = stored
    return document
