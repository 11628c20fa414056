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

Partner's own rule, kept for those units and as the public :func:`resolve_chat_increment`: the window
keeps some already-rolled messages as context, so a snapshot usually starts with messages the unit already
ends with, and the increment is what follows the longest such overlap.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from partner_repo.cores import dropped_count
from partner_repo.models import MemoryCore, Message
from partner_repo.units import MemoryUnitRepository, UnitFence, UnitHead


def resolve_chat_increment(stored_tail: Sequence[Message], snapshot: Sequence[Message]) -> list[Message]:
    """``snapshot[k:]`` for the largest ``k`` with ``stored_tail[-k:] == snapshot[:k]``; all of it when none.

    ``stored_tail`` only needs the unit's last ``len(snapshot)`` messages: no longer overlap is possible.
    """
    for k in range(min(len(stored_tail), len(snapshot)), 0, -1):
        if list(stored_tail[-k:]) == list(snapshot[:k]):
            return list(snapshot[k:])
    return list(snapshot)


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
    floor: int | None = None
    """Where the window is to be cut at least (the ``trimmed_to`` beside the mark: the roll that set it
    trims there, a clear drops everything below its mark): a roll never keeps a message below it."""

    @property
    def first_position(self) -> int:
        """The position of the increment's first message."""
        return self.window_start if self.mark is None else max(self.mark, self.window_start)

    @property
    def taken(self) -> int:
        """How many of the snapshot's messages, from its front, are taken already."""
        return min(self.first_position - self.window_start, self.snapshot_size)

    def settled_drop(self) -> int:
        """How many messages to drop from the front of the snapshot whatever this roll stores: up to the
        :attr:`floor` (where the roll or the clear that set the mark cuts the window), in case that cut did
        not happen; nothing when it is not known (a mark from before 0.4)."""
        if self.mark is None or self.floor is None:
            return 0
        return min(max(self.floor - self.window_start, 0), self.snapshot_size)

    def drop(self, rolled: int, retain_divisor: int) -> int:
        """How many messages a roll that consumed the snapshot's first ``rolled`` messages drops: Partner's
        rule (the last ``1/retain_divisor`` kept), never fewer than the :meth:`settled_drop`."""
        return max(dropped_count(self.snapshot_size, rolled, retain_divisor), self.settled_drop())

    @property
    def expected_start(self) -> int:
        """The unit's message count as resolved against: the append's count fence."""
        return 0 if self.head is None else self.head.message_count


class WholeWindowNeeded(Exception):
    """The resolution needs messages the snapshot left out (a unit whose mark is not trusted after all)."""


class SessionErased(Exception):
    """An erased unit's tombstone stands under the session's unit id: an erasure of the core was cut short
    after fencing it (a finished one deletes the core), so no roll can store anything there until the
    erasure is run again, which removes the window too."""


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
    once. When it finds nothing new the head is read after all: that roll appends nothing, it only cuts the
    window where the head says (:meth:`Resolution.settled_drop`), and no write would check a remembered
    head's cut (a clear cut short after its mark moved it: the window kept what it cleared, and a new
    session stored it again). The head of the unit a continuation not created yet continues is always
    read: that append creates the continuation, fenced only on its id, from the sealed unit's mark (a
    remembered head may predate other rollers' appends there and would store them again).
    """
    cached = cached and _cache_is_current(units, core)
    resolution = await _resolve(units, core, snapshot, cached=cached, skipped=skipped)
    if cached and resolution.taken >= resolution.snapshot_size:  # nothing new: only a cut, checked by nothing
        resolution = await _resolve(units, core, snapshot, cached=False, skipped=skipped)
    if resolution.taken < skipped:
        raise WholeWindowNeeded  # a mark below what the snapshot skipped: read the whole window
    return resolution


def _cache_is_current(units: MemoryUnitRepository, core: MemoryCore) -> bool:
    """Whether the session unit's head this process remembers is the one the core's last trim recorded
    (``last_unit_version``): only then may a roll resolve, and so summarize, without reading the head. A
    head another process has appended to since is not trusted (its increment would be summarized in vain)."""
    known = units.known_head(core.memory_session_id)
    return (
        known is not None
        and core.last_unit_id == core.memory_session_id
        and core.last_unit_version == known.version
    )


async def _resolve(
    units: MemoryUnitRepository, core: MemoryCore, snapshot: Sequence[Message], *, cached: bool, skipped: int
) -> Resolution:
    size = skipped + len(snapshot)
    unit_id, start = core.memory_session_id, core.window_start
    known = units.known_head(unit_id) if cached else None
    fence = UnitFence(head=known) if known is not None else await units.fence(unit_id)
    if fence.erased:
        raise SessionErased(unit_id)  # before anything is summarized: every append there is refused
    head = fence.head
    if head is not None:
        mark = head.mark
        if mark is None:
            if skipped:
                raise WholeWindowNeeded  # a content overlap needs what the snapshot left out
            previous = head.previous_unit_id or core.session_continues
            mark = start + await stored_overlap(units, unit_id, previous, snapshot)
        return Resolution(unit_id, head, start, mark, size, head.trimmed_to)
    resolution = await _resolve_continuation(units, core, snapshot, skipped=skipped)
    reserved = fence.reservation
    if reserved is None:
        return resolution
    # a clear's reservation under the session's id: a unit for the fence (its mark, and where to cut)
    mark = max(reserved.mark, resolution.mark or 0)
    floor = max(reserved.trimmed_to or reserved.mark, resolution.floor or 0)
    return Resolution(unit_id, None, start, mark, size, floor)


async def _resolve_continuation(
    units: MemoryUnitRepository, core: MemoryCore, snapshot: Sequence[Message], *, skipped: int
) -> Resolution:
    """The resolution for a session whose unit does not exist yet: from the mark of the unit it continues."""
    size = skipped + len(snapshot)
    unit_id, start, continues = core.memory_session_id, core.window_start, core.session_continues
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
    floor = None if previous_head is None else previous_head.trimmed_to
    return Resolution(unit_id, None, start, mark, size, floor)


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


__all__ = [
    "Resolution",
    "SessionErased",
    "WholeWindowNeeded",
    "resolve",
    "resolve_chat_increment",
    "stored_overlap",
]
