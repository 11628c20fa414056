"""The events and references that cross layers: what a roll produced and what an erasure removed.

Rolling produces a :class:`RollingResult`, the listener delivers it, recall indexes it; the eraser logs an
:class:`Erasure`, the listener delivers it, recall and every other consumer act on it. They live here, in the
ground, so the packages that pass them around import neither each other nor their producers (the listener
imports no rolling module, recall no eraser).

A :class:`RollingResult` is built from stored facts only (the slice, its messages, the roll parameters stored
with the slice), so the listener in any process rebuilds exactly the result the rolling process saw.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict

from partner_repo.clock import UtcDatetime
from partner_repo.models import MemorySlice, Message


class MemoryUnitRef(BaseModel):
    """A light reference to a unit: consumers load messages through the repository when they need them.

    ``message_count`` is the unit's message count right after the slice was appended (its ``end_index``).
    """

    model_config = ConfigDict(frozen=True)

    id: str
    core_id: str
    message_count: int


class RollingResult(BaseModel):
    """One roll: the unit it went to, the new slice, the messages it covers, and the roll's parameters.

    ``rolling_size`` (snapshot length) and ``retain_divisor`` are ``None`` for slices that did not come from a
    roll (imports, direct appends). ``slice_id`` is the idempotency key of a delivery; ``unit_id`` and
    ``core_id`` say where it went; ``first_position`` and ``end_position`` are the positions in the core of
    the increment's messages, ``[first_position, end_position)`` (None for slices stored without one: not
    from a roll, or rolled before 0.4).
    roll (imports, direct appends). ``slice_id`` is the idempotency key of a delivery; ``revision`` tells a
    replaced summary of a slice delivered before from its first delivery.
    """

    model_config = ConfigDict(frozen=True)

    memory_unit: MemoryUnitRef
    memory_slice: MemorySlice
    increment_messages: tuple[Message, ...]
    summary: str
    rolling_size: int | None
    retain_divisor: int | None

    @property
    def slice_id(self) -> str:
        assert self.memory_slice.id is not None
        return self.memory_slice.id

    @property
    def unit_id(self) -> str:
        """The unit the increment went to (``memory_unit.id``)."""
        return self.memory_unit.id

    @property
    def core_id(self) -> str:
        """The core that was rolled (``memory_unit.core_id``)."""
        return self.memory_unit.core_id

    @property
    def first_position(self) -> int | None:
        """The position in the core of the increment's first message (None: the slice has none)."""
        return self.memory_slice.first_position

    @property
    def end_position(self) -> int | None:
        """The position just past the increment's last message (None: the slice has none)."""
        first = self.memory_slice.first_position
        return None if first is None else first + len(self.increment_messages)

    @property
    def revision(self) -> int:
        """0 for the slice as its roll stored it; n once its summary was replaced n times (``resummarize``).
        The listener delivers each revision again under the same ``slice_id``: replace what you keep."""
        return self.memory_slice.revision

    @property
    def is_revision(self) -> bool:
        """Whether this delivery is a new summary of a slice delivered before (``revision > 0``)."""
        return self.memory_slice.revision > 0

    @property
    def unsummarized(self) -> bool:
        """Whether ``summary`` is Partner's placeholder: the summarizer failed; a revision will follow once
        ``resummarize`` replaces it."""
        return self.memory_slice.unsummarized

    @classmethod
    def from_slice(
        cls, unit_id: str, core_id: str, memory_slice: MemorySlice, messages: Sequence[Message]
    ) -> RollingResult:
        """The result for a stored slice and the messages of its interval."""
        return cls(
            memory_unit=MemoryUnitRef(id=unit_id, core_id=core_id, message_count=memory_slice.end_index or 0),
            memory_slice=memory_slice,
            increment_messages=tuple(messages),
            summary=memory_slice.summary,
            rolling_size=memory_slice.rolling_size,
            retain_divisor=memory_slice.retain_divisor,
        )


ErasureScope = Literal["core", "before"]
"""``"core"``: the whole core was forgotten; ``"before"``: its units that ended before a date."""


class Erasure(BaseModel):
    """What a consumer's ``on_erased`` receives: what one erasure removed, ids only.

    ``seq`` is the part's position in the log; ``part`` counts the parts of one erasure (``erasure_id``)
    from 0. ``unit_ids`` and ``slice_ids`` are the units removed and every slice they held, whether or not
    this consumer was ever given them. ``erased_at`` is when the erasure finished (the eraser's clock).
    """

    model_config = ConfigDict(frozen=True)

    seq: int
    erasure_id: str
    part: int
    core_id: str
    scope: ErasureScope
    unit_ids: tuple[str, ...]
    slice_ids: tuple[str, ...]
    erased_at: UtcDatetime


@runtime_checkable
class ErasureAware(Protocol):
    """A consumer that keeps data derived from slices (an index, topics) and must drop it when they are
    erased. ``on_erased`` is optional: consumers without it are delivered rolls as before."""

    @property
    def name(self) -> str: ...

    async def on_erased(self, erasure: Erasure) -> None: ...


def handles_erasures(consumer: object) -> bool:
    """Whether ``consumer`` has an ``on_erased`` method (it is told of every erasure)."""
    return callable(getattr(consumer, "on_erased", None))


__all__ = [
    "Erasure",
    "ErasureAware",
    "ErasureScope",
    "MemoryUnitRef",
    "RollingResult",
    "handles_erasures",
]
