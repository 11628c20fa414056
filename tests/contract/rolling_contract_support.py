"""What the rolling contract tests share: numbered messages, a plain summarizer, the tiling check."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime

from partner_repo import MemoryUnit, Message

T0 = datetime(2024, 1, 1, 12, 0, tzinfo=UTC)


def numbered(start: int, stop: int) -> list[Message]:
    return [
        Message(role="user" if n % 2 == 0 else "assistant", content=f"message {n}")
        for n in range(start, stop)
    ]


async def summarize(messages: list[Message]) -> str:
    return f"{len(messages)} messages from {messages[0].content}"


def assert_tiles(unit: MemoryUnit) -> None:
    pieces = unit.complete_slices()
    assert pieces[0].start_index == 0
    assert all(a.end_index == b.start_index for a, b in itertools.pairwise(pieces))
    assert pieces[-1].end_index == len(unit.conversation_messages)
