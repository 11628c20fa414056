"""The chat window's arithmetic: what survives a roll (Partner's ``rollChatMessagesWithSnapshot``), pure.

After a roll, the window keeps the last ``1/retain_divisor`` of the rolled snapshot as context, and everything
recorded after the snapshot was taken. Only messages from the front are ever dropped, so the repository can
apply the result as "drop the first ``n``" and never rewrite a message.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

from partner_repo.errors import InvalidInput
from partner_repo.mongo import MAX_MESSAGE_BYTES, bson_size

T = TypeVar("T")


def dropped_count(window_size: int, snapshot_size: int, retain_divisor: int) -> int:
    """How many messages a roll removes from the front of a window of ``window_size`` messages.

    ``safe = clamp(snapshot_size, 0, window_size)``; nothing when ``safe == 0``; otherwise ``safe - retain``
    with ``retain = safe // max(retain_divisor, 1)``.
    """
    for name, value in (
        ("window_size", window_size),
        ("snapshot_size", snapshot_size),
        ("retain_divisor", retain_divisor),
    ):
        if isinstance(value, bool) or not isinstance(value, int):
            raise InvalidInput(f"{name} must be an integer, got {type(value).__name__}")
    if window_size < 0:
        raise InvalidInput(f"window_size must not be negative, got {window_size}")
    safe = min(max(snapshot_size, 0), window_size)
    if safe == 0:
        return 0
    retain = safe // max(retain_divisor, 1)
    return safe - retain


def roll_chat_messages(window: Sequence[T], snapshot_size: int, retain_divisor: int) -> list[T]:
    """The window after a roll of its first ``snapshot_size`` messages: ``window[safe - retain:]``.

    Equal to Partner's ``window[safe - retain : safe] + window[safe:]``: the retained tail of the snapshot,
    then every message recorded after the snapshot.
    """
    return list(window[dropped_count(len(window), snapshot_size, retain_divisor) :])


def refuse_unrollable(documents: list[dict[str, Any]]) -> None:
    """A message (or a turn) no unit could hold with its slice is refused: it would wedge the core."""
    total = 0
    for position, document in enumerate(documents):
        size = bson_size(document)
        total += size
        if size > MAX_MESSAGE_BYTES:
            raise InvalidInput(
                f"message {position} is {size} bytes; at most {MAX_MESSAGE_BYTES} fit in a memory unit with "
                "its summary"
            )
    if total > MAX_MESSAGE_BYTES:
        raise InvalidInput(
            f"the turn is {total} bytes; record at most {MAX_MESSAGE_BYTES} bytes of messages at once"
        )


__all__ = ["dropped_count", "refuse_unrollable", "roll_chat_messages"]
