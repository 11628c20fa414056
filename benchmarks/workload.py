"""Deterministic data for the benchmarks: readable conversations and units seeded in one write."""

from __future__ import annotations

import random
from datetime import datetime, timedelta
from typing import Any

from partner_repo import MemorySlice, MemoryUnit, Message, Role
from partner_repo.clock import utc_now
from partner_repo.mongo import UNITS, unit_document

_TOPICS = (
    "the trip to Lisbon in May",
    "a leaking kitchen tap",
    "the quarterly budget review",
    "training for a half marathon",
    "a birthday present for Ana",
    "the new database migration",
    "learning to bake sourdough",
    "moving the team standup",
)
_USER = (
    "Can you remind me what we decided about {topic}?",
    "I keep thinking about {topic}; what should I do first?",
    "Quick update on {topic}: it went better than expected.",
    "What did I say last week about {topic}?",
)
_ASSISTANT = (
    "We agreed to start with {topic} on Monday and check progress on Thursday.",
    "For {topic}, the first step is to list what you already have and what is missing.",
    "Good to hear. I noted that {topic} is on track and will bring it up again next week.",
    "You said {topic} mattered most this month and that you wanted a reminder every few days.",
)


def conversation(count: int, *, seed: int = 0, chars: int | None = None) -> list[Message]:
    """``count`` alternating user/assistant messages, the same for a seed: one sentence each (about 60-110
    characters), or with ``chars`` sentences of the same role joined and cut to ``chars`` characters."""
    chooser = random.Random(seed)
    messages = []
    for index in range(count):
        role: Role = "user" if index % 2 == 0 else "assistant"
        templates = _USER if role == "user" else _ASSISTANT
        content = chooser.choice(templates).format(topic=chooser.choice(_TOPICS))
        while chars is not None and len(content) < chars:
            content += " " + chooser.choice(templates).format(topic=chooser.choice(_TOPICS))
        messages.append(Message(role=role, content=content if chars is None else content[:chars].rstrip()))
    return messages


def turn(seed: int) -> list[Message]:
    """One turn of the per-turn benchmarks: a user and an assistant message of 200 characters each."""
    return conversation(2, seed=seed, chars=200)


def unit_with_slices(
    unit_id: str,
    core_id: str,
    messages: list[Message],
    *,
    messages_per_slice: int,
    first_slice_at: datetime | None = None,
    slice_every: timedelta = timedelta(minutes=5),
    slice_id_prefix: str | None = None,
) -> MemoryUnit:
    """A normalized unit whose slices tile its messages, ``messages_per_slice`` each (the last may hold
    fewer)."""
    start_time = first_slice_at or utc_now() - timedelta(days=30)
    prefix = slice_id_prefix or unit_id
    slices = []
    for number, start in enumerate(range(0, len(messages), messages_per_slice)):
        end = min(start + messages_per_slice, len(messages))
        slices.append(
            MemorySlice(
                id=f"{prefix}-s{number:05d}",
                start_index=start,
                end_index=end,
                summary=f"Summary {number} of unit {unit_id}: " + messages[start].content,
                created_at=start_time + number * slice_every,
            )
        )
    updated = slices[-1].created_at if slices else start_time
    return MemoryUnit(
        id=unit_id,
        core_id=core_id,
        conversation_messages=messages,
        slices=list(slices),
        updated_at=updated,
        version=1,
    )


async def seed_unit(
    database: Any, unit_id: str, core_id: str, messages: list[Message], *, messages_per_slice: int
) -> list[str]:
    """Store a unit with slices in one insert (in the repository's stored form); returns its slice ids."""
    unit = unit_with_slices(unit_id, core_id, messages, messages_per_slice=messages_per_slice)
    await database[UNITS].insert_one(unit_document(unit))
    return [s.id for s in unit.complete_slices() if s.id is not None]
