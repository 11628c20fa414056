"""When a window is due to roll, decided twice: on the state a write or read returned, then by the server.

Count: the window holds at least ``trigger_limit`` messages. Bytes: its messages take at least
``trigger_bytes`` (a window of one message included). Idle: ``now - last_interaction_at`` exceeds
``idle_after``, the window holds more than one message, and no idle roll covered it yet. Idle beats the
others (an idle roll also starts a new session).

:func:`trigger` decides on a :class:`~partner_repo.cores._state.WindowState` (or a whole core) already in
hand, so the per-turn path needs no read to know it should try. :func:`due_query` is the same rule as a query
on the stored core: the lease is taken only while the stored window still meets it, with the snapshot, in one
command (another roller may have rolled it meanwhile).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from partner_repo.clock import to_utc_ms
from partner_repo.cores import WindowState
from partner_repo.models import MemoryCore
from partner_repo.rolling._config import RollingConfig

Trigger = Literal["count", "bytes", "idle"]


def trigger(state: WindowState | MemoryCore, now: datetime, config: RollingConfig) -> Trigger | None:
    """Which trigger holds for ``state`` at ``now``: ``"idle"``, ``"count"``, ``"bytes"`` or None."""
    if isinstance(state, MemoryCore):
        state = WindowState.of(state)
    last = state.last_interaction_at
    if (
        state.window_size > 1
        and last is not None
        and not state.idle_rolled
        and to_utc_ms(now) - last > config.idle_after
    ):
        return "idle"
    if state.window_size >= config.trigger_limit:
        return "count"
    if state.window_size and state.window_bytes is not None and state.window_bytes >= config.trigger_bytes:
        return "bytes"
    return None


def due_query(now: datetime, config: RollingConfig, which: Trigger | None = None) -> dict[str, Any]:
    """:func:`trigger` as a query on the stored core: matches while ``which`` trigger holds on its window
    (either, when None). A caller that decided on one asks for that one: a shorter command."""
    count = {f"chat_messages.{config.trigger_limit - 1}": {"$exists": True}}
    large = {"chat_messages.0": {"$exists": True}, "window_bytes": {"$gte": config.trigger_bytes}}
    idle = {
        "chat_messages.1": {"$exists": True},
        "idle_rolled": {"$ne": True},
        "last_interaction_at": {"$lt": to_utc_ms(now) - config.idle_after},
    }
    if which == "count":
        return count
    if which == "idle":
        return idle
    if which == "bytes":
        return large
    return {"$or": [count, large, idle]}


__all__ = ["Trigger", "due_query", "trigger"]
