"""Which messages of a roll's snapshot are new to the unit: by position, never by comparing contents.

Positions count every message recorded into a core: message ``i`` of the window is at ``window_start + i``
(``window_start`` moves only when a trim or a clear drops messages from the front). Each unit keeps a mark,
``taken_until``: every position below it is stored in the unit, or was discarded on purpose by a clear. A
continuation unit starts from the mark of the unit it continues. So a roll's increment is the snapshot's
messages at or after the mark, and its append is fenced on the mark (:mod:`partner_repo.units._increment`):
messages that repeat earlier ones are new all the same, and a clear or an erasure moves the fence itself.

A unit whose mark cannot be trusted (written before 0.4, or changed by another tool since) gets it derived
once from Partner's content overlap of its stored tail with the snapshot; the roll's append writes it, and
from then on positions decide. A new session's unit that continues nothing has no mark: its first roll stores
the whole window, the retained context included, as Partner does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from partner_repo.models import MemoryCore, Message
from partner_repo.rolling._increment import resolve_chat_increment
from partner_repo.units import MemoryUnitRepository, UnitHead


@dataclass(frozen=True)
class Resolution:
    """Where a snapshot's increment goes and where it starts."""

    unit_id: str
    head: UnitHead | None
    """The unit as resolved against (None: it does not exist yet)."""
    window_start: int
    """The position of the snapshot's first message."""
    mark: int | None
    """Every position below it is taken (None: nothing is, a new session's unit)."""
    snapshot_size: int
    marker: UnitHead | None = None
    """The unit whose mark it is (the session's, or the one it continues), as resolved."""

    @property
    def first_position(self) -> int:
        """The position of the increment's first message."""
        return self.window_start if self.mark is None else max(self.mark, self.window_start)

    @property
    def taken(self) -> int:
        """How many of the snapshot's messages, from its front, are taken already."""
        return min(self.first_position - self.window_start, self.snapshot_size)

    def settled_drop(self) -> int:
        """How many messages to drop from the front of the snapshot when nothing of it is new: what the roll
        that set the mark trims the window to (its ``trimmed_to``), in case its trim did not happen; nothing
        when that roll is not known (a mark from before 0.4, or set by a clear)."""
        trimmed_to = None if self.marker is None else self.marker.trimmed_to
        if self.mark is None or trimmed_to is None:
            return 0
        return min(max(trimmed_to - self.window_start, 0), self.snapshot_size)

    @property
    def expected_start(self) -> int:
        """The unit's message count as resolved against: the append's count fence."""
        return 0 if self.head is None else self.head.message_count


class WholeWindowNeeded(Exception):
    """The resolution needs messages the snapshot left out (a unit whose mark is not trusted after all)."""


async def resolve(
    units: MemoryUnitRepository,
    core: MemoryCore,
    snapshot: Sequence[Message],
    *,
    cached: bool,
    skipped: int = 0,
) -> Resolution:
    """The resolution of ``snapshot`` (the core's window as the lease took it, but for its first
    ``skipped`` messages, left out as known stored) against the session's unit.

    ``cached`` lets the repository answer with the session unit's head it last saw instead of reading it: a
    roller that appended last needs no read at all, and a stale head only costs the append's fence failing
    once. The head of the unit a continuation not created yet continues is always read: that append creates
    the continuation, fenced only on its id, from the sealed unit's mark (a remembered head may predate
    other rollers' appends there and would store them again).
    """
    resolution = await _resolve(units, core, snapshot, cached=cached, skipped=skipped)
    if resolution.taken < skipped:
        raise WholeWindowNeeded  # a mark below what the snapshot skipped: read the whole window
    return resolution


async def _resolve(
    units: MemoryUnitRepository, core: MemoryCore, snapshot: Sequence[Message], *, cached: bool, skipped: int
) -> Resolution:
    size = skipped + len(snapshot)
    unit_id, start = core.memory_session_id, core.window_start
    head = await units.head(unit_id, cached=cached)
    if head is not None:
        mark = head.mark
        if mark is None:
            if skipped:
                raise WholeWindowNeeded  # a content overlap needs what the snapshot left out
            previous = head.previous_unit_id or core.session_continues
            mark = start + await stored_overlap(units, unit_id, previous, snapshot)
        return Resolution(unit_id, head, start, mark, size, head)
    continues = core.session_continues
    if continues is None:
        return Resolution(unit_id, None, start, None, size)
    # never a remembered head here: the append that creates the continuation is fenced only by its own id,
    # so the mark it starts from must be the sealed unit's final one, not one seen before others filled it
    previous_head = await units.head(continues)
    mark = None if previous_head is None else previous_head.mark
    if previous_head is not None and mark is None:
        if skipped:
            raise WholeWindowNeeded
        mark = start + await stored_overlap(units, continues, previous_head.previous_unit_id, snapshot)
    return Resolution(unit_id, None, start, mark, size, previous_head)


async def stored_overlap(
    units: MemoryUnitRepository, unit_id: str, previous: str | None, snapshot: Sequence[Message]
) -> int:
    """How many of the snapshot's first messages the unit (and, when it holds fewer, the unit it continues)
    ends with: Partner's ``resolveChatIncrement``, used once for a unit without a trusted mark."""
    tail = await units.tail(unit_id, len(snapshot))
    stored = [] if tail is None else list(tail.messages)
    if previous is not None and len(stored) < len(snapshot):
        stored = await units.tail_messages(previous, len(snapshot) - len(stored)) + stored
    return len(snapshot) - len(resolve_chat_increment(stored, snapshot))


__all__ = ["Resolution", "WholeWindowNeeded", "resolve", "stored_overlap"]
