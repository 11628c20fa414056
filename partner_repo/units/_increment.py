"""An increment on its way into a unit: the checked arguments of an append, and its two fences.

The count fence (``expected_start``) holds while the unit holds exactly the messages the increment was
resolved against; the position fence (``first_position``) while the unit has taken no position at or after the
increment's first. Either failing is :class:`~partner_repo.errors.StaleIncrement`: nothing is written.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from partner_repo.clock import utc_now
from partner_repo.encoding import require_encodable
from partner_repo.errors import InvalidInput, StaleIncrement
from partner_repo.models import MemorySlice, Message
from partner_repo.normalization import new_slice_id
from partner_repo.units._heads import UnitHead
from partner_repo.validation import (
    optional_id,
    optional_recorded_time,
    parse_messages,
    require_count,
    require_id,
)


@dataclass(frozen=True)
class AppendRequest:
    """One validated append: the unit, the increment and the slice that will cover it."""

    unit_id: str
    core_id: str
    increment: list[Message]
    piece: MemorySlice
    stamp: datetime
    created_at: datetime | None
    given_id: str | None
    fresh_slice_id: bool
    previous_unit_id: str | None
    expected_start: int | None = None
    """The count fence: the unit must hold exactly this many messages (None: wherever it ends)."""
    first_position: int | None = None
    """The position fence: the position (in its core) of the increment's first message. The append lands
    only while the unit has taken nothing at or after it, and marks the unit as having taken every position
    up to the increment's end (None: the messages take no positions, the unit's mark is kept as it is)."""
    trimmed_to: int | None = None
    """With ``first_position``: the window position the roll trims the window to, kept beside the mark."""

    def admits(self, head: UnitHead) -> bool:
        """Whether both fences hold for ``head`` (a mark that cannot be trusted leaves the count fence)."""
        if self.expected_start is not None and head.message_count != self.expected_start:
            return False
        if head.sealed and self.first_position is not None:
            return False  # a continuation took over: nothing more is positioned here
        mark = head.mark
        return self.first_position is None or mark is None or mark <= self.first_position

    def stale(self, head: UnitHead | None) -> StaleIncrement:
        """The refusal for ``head`` (None: the unit is gone)."""
        mark = None if head is None else head.mark
        if (
            head is not None
            and mark is not None
            and self.first_position is not None
            and mark > self.first_position
        ):
            return StaleIncrement(
                self.unit_id,
                head.message_count,
                head.message_count,
                position=self.first_position,
                taken_until=mark,
            )
        expected = self.expected_start if self.expected_start is not None else 0
        return StaleIncrement(self.unit_id, expected, None if head is None else head.message_count)


def append_request(
    unit_id: str,
    messages: Sequence[Message | Mapping[str, Any]],
    summary: str,
    *,
    core_id: str,
    slice_id: str | None,
    created_at: datetime | None,
    rolling_size: int | None,
    retain_divisor: int | None,
    previous_unit_id: str | None,
    fresh_slice_id: bool,
    expected_start: int | None,
    first_position: int | None,
    trimmed_to: int | None = None,
    unsummarized: bool = False,
) -> AppendRequest:
    """The arguments of ``MemoryUnitRepository.append`` checked (:class:`InvalidInput` before any write)."""
    increment = parse_messages(messages, allow_empty=False)
    if not isinstance(summary, str):
        raise InvalidInput(f"summary must be a string, got {type(summary).__name__}")
    require_encodable(summary, "summary")
    given_id = None if slice_id is None else require_id(slice_id, "slice_id")
    stamp = optional_recorded_time(created_at, "created_at") or utc_now()
    for name, value in (
        ("rolling_size", rolling_size),
        ("retain_divisor", retain_divisor),
        ("expected_start", expected_start),
        ("first_position", first_position),
        ("trimmed_to", trimmed_to),
    ):
        if value is not None:
            require_count(value, name)
    piece = MemorySlice(
        id=given_id or new_slice_id(),
        summary=summary,
        created_at=stamp,
        rolling_size=rolling_size,
        retain_divisor=retain_divisor,
        first_position=first_position,
        unsummarized=unsummarized is True,
    )
    return AppendRequest(
        unit_id=require_id(unit_id, "unit_id"),
        core_id=require_id(core_id, "core_id"),
        increment=increment,
        piece=piece,
        stamp=stamp,
        created_at=created_at,
        given_id=given_id,
        fresh_slice_id=fresh_slice_id,
        previous_unit_id=optional_id(previous_unit_id, "previous_unit_id"),
        expected_start=expected_start,
        first_position=first_position,
        trimmed_to=trimmed_to if first_position is not None else None,
    )


__all__ = ["AppendRequest", "append_request"]
