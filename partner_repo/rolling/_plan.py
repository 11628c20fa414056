"""How much of an increment one roll stores, where it goes, and what summary text can be stored: pure rules.

A roll must always be able to store *something*, or its core is wedged (every later roll failing the same
way). Three rules guarantee it:

- a summary is stored as valid UTF-8 of at most :data:`~partner_repo.mongo.MAX_SUMMARY_BYTES` (a longer one
  is cut, unencodable characters replaced; both logged by the caller);
- an increment too large for a fresh unit (with its slice and a maximal summary) is rolled as its largest
  prefix that fits; the rest stays in the window for the next roll. ``record`` refuses any message larger
  than :data:`~partner_repo.mongo.MAX_MESSAGE_BYTES`, so the prefix always holds at least one message;
- the decision to continue in a new unit counts the real summary, so a long summary near the size limit
  opens a continuation instead of failing with ``UnitTooLarge`` on every retry.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from partner_repo.models import MemorySlice, Message
from partner_repo.mongo import (
    MAX_DOCUMENT_BYTES,
    MAX_SUMMARY_BYTES,
    ROLL_RESERVE_BYTES,
    append_size,
    array_elements_size,
    slice_document,
)
from partner_repo.normalization import new_slice_id
from partner_repo.units import UnitHead

MESSAGES_BUDGET_BYTES = MAX_DOCUMENT_BYTES - ROLL_RESERVE_BYTES - MAX_SUMMARY_BYTES
"""What the messages of one roll may take: a fresh unit holds them with their slice and any summary."""


def rollable_prefix(increment: Sequence[Message]) -> int:
    """How many messages from the start of ``increment`` one roll stores (all of them unless they would not
    fit a fresh unit); at least one."""
    total = 0
    for index, message in enumerate(increment):
        total += array_elements_size([message.model_dump()], index)
        if total > MESSAGES_BUDGET_BYTES:
            return max(index, 1)
    return len(increment)


def storable_summary(summary: str) -> tuple[str, list[str]]:
    """``summary`` as it can be stored, and what had to change (empty when nothing did)."""
    changes: list[str] = []
    try:
        encoded = summary.encode("utf-8")
    except UnicodeEncodeError:
        encoded = summary.encode("utf-8", errors="replace")
        changes.append("characters that are not valid Unicode text (lone surrogates) replaced by '?'")
    if len(encoded) > MAX_SUMMARY_BYTES:
        changes.append(f"cut from {len(encoded)} to {MAX_SUMMARY_BYTES} bytes")
        encoded = encoded[:MAX_SUMMARY_BYTES]
    return encoded.decode("utf-8", errors="ignore"), changes


def continues_elsewhere(
    head: UnitHead | None,
    increment: Sequence[Message],
    summary: str,
    created_at: datetime,
    soft_limit_bytes: int,
) -> bool:
    """Whether the roll opens a continuation unit: the current unit holds messages and this append (the real
    summary counted) would take it past the soft limit. An empty or absent unit always takes the roll."""
    if head is None or head.message_count == 0:
        return False
    piece = MemorySlice(
        id=new_slice_id(),
        start_index=head.message_count,
        end_index=head.message_count + len(increment),
        summary=summary,
        created_at=created_at,
        rolling_size=0,
        retain_divisor=0,
        first_position=0,
    )
    documents = [m.model_dump() for m in increment]
    added = append_size(documents, head.message_count, slice_document(piece), head.slice_count)
    return head.size_bytes + added > soft_limit_bytes


__all__ = ["MESSAGES_BUDGET_BYTES", "continues_elsewhere", "rollable_prefix", "storable_summary"]
