"""Shared builders for the rolling tests: numbered messages, scripted summarizers, a settable clock."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from partner_repo import MemoryUnit, Message

T0 = datetime(2024, 1, 1, 12, 0, tzinfo=UTC)


def message(number: int, role: str = "user") -> Message:
    """A message that is unique by its number, so lost, repeated or reordered messages show."""
    return Message(role=role, content=f"message {number}")  # type: ignore[arg-type]


def turn(number: int) -> list[Message]:
    """Turn ``number`` of a dialogue: a user message and the assistant's answer, numbered 2n and 2n+1."""
    return [message(2 * number, "user"), message(2 * number + 1, "assistant")]


def numbered(start: int, stop: int) -> list[Message]:
    return [message(n, "user" if n % 2 == 0 else "assistant") for n in range(start, stop)]


@dataclass
class RecordingSummarizer:
    """Summarizes deterministically and remembers every increment it was given."""

    calls: list[list[Message]] = field(default_factory=list)

    async def __call__(self, messages: list[Message]) -> str:
        self.calls.append(list(messages))
        return f"summary of {messages[0].content} .. {messages[-1].content}"


@dataclass
class Clock:
    """A clock tests move by hand."""

    now: datetime = T0

    def __call__(self) -> datetime:
        return self.now

    def advance(self, delta: timedelta) -> datetime:
        self.now += delta
        return self.now


def assert_slices_tile(unit: MemoryUnit) -> None:
    """Slices cover the unit's messages without gap or overlap, in order."""
    pieces = unit.complete_slices()
    assert pieces, "the unit has no slices"
    assert pieces[0].start_index == 0
    for before, after in itertools.pairwise(pieces):
        assert before.end_index == after.start_index
    assert pieces[-1].end_index == len(unit.conversation_messages)
    assert all(p.message_count > 0 for p in pieces)


def assert_in_order_without_repeats(stored: Sequence[Message], recorded: Sequence[Message]) -> None:
    """``stored`` is exactly the first ``len(stored)`` recorded messages."""
    assert list(stored) == list(recorded[: len(stored)])


class Ticks:
    """A monotonic clock the test moves (seconds), for how long a lease has been watched silent."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now
