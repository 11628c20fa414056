"""What the admin queries return: flat, JSON-ready views of slices, units and statistics.

They are read models, not the stored documents: a :class:`SliceView` joins a slice with its unit and core ids
so a page of slices from many units can be shown or serialized as one list.
"""

from __future__ import annotations

from datetime import date, datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, TypeAdapter

from partner_repo.clock import UtcDatetime
from partner_repo.models import MemorySlice, Message
from partner_repo.mongo import MAX_DOCUMENT_BYTES


class SliceView(BaseModel):
    """One slice with the ids of its unit and core, and ``message_count``, the length of its interval."""

    model_config = ConfigDict(frozen=True)

    id: str
    unit_id: str
    core_id: str
    start_index: int | None
    end_index: int | None
    summary: str
    created_at: UtcDatetime | None
    rolling_size: int | None = None
    retain_divisor: int | None = None
    first_position: int | None = None
    """Where the slice's first message is among every message recorded into its core (None for a slice not
    from a roll): the walk orders slices of one creation time by it."""
    unsummarized: bool = False
    """Every summarizer attempt of its roll failed: the summary is a placeholder ``resummarize`` replaces."""
    revision: int = 0
    """How many times the summary was replaced after the slice was stored (0: as rolled)."""
    message_count: int

    def memory_slice(self) -> MemorySlice:
        """The slice as the stored model."""
        return MemorySlice.model_validate(self.model_dump(exclude={"unit_id", "core_id", "message_count"}))

    @classmethod
    def from_document(cls, unit_id: Any, core_id: Any, piece: dict[str, Any]) -> SliceView:
        """Built defensively from a stored slice: data written by other tools still displays (``check``
        reports it), instead of one odd slice failing the whole page."""
        return cls.model_validate(_view_fields(unit_id, core_id, piece))

    @classmethod
    def from_unwound(cls, documents: list[dict[str, Any]]) -> list[SliceView]:
        """Views of unwound slices (``{"_id", "core_id", "slices": slice}``), validated as one list."""
        return _SLICE_VIEWS.validate_python(
            [_view_fields(d["_id"], d.get("core_id"), d["slices"]) for d in documents]
        )


def _view_fields(unit_id: Any, core_id: Any, piece: dict[str, Any]) -> dict[str, Any]:
    get = piece.get  # one view per slice of a page: created_at is normalized once, by the field
    start, end = _int_or_none(get("start_index")), _int_or_none(get("end_index"))
    summary = get("summary")
    created_at = get("created_at")
    return {
        "id": str(get("id")),
        "unit_id": str(unit_id),
        "core_id": str(core_id),
        "start_index": start,
        "end_index": end,
        "summary": summary if isinstance(summary, str) else "" if summary is None else str(summary),
        "created_at": created_at if isinstance(created_at, datetime) else None,  # validated to UTC ms
        "rolling_size": _int_or_none(get("rolling_size")),
        "retain_divisor": _int_or_none(get("retain_divisor")),
        "first_position": _int_or_none(get("first_position")),
        "unsummarized": get("unsummarized") is True,
        "revision": max(_int_or_none(get("revision")) or 0, 0),
        "message_count": max(end - start, 0) if start is not None and end is not None else 0,
    }


_SLICE_VIEWS: TypeAdapter[list[SliceView]] = TypeAdapter(list[SliceView])


class SlicePage(BaseModel):
    """One page of :meth:`SliceQueries.find`; pass ``next_cursor`` as ``after`` for the next (None: last)."""

    model_config = ConfigDict(frozen=True)

    items: list[SliceView]
    next_cursor: str | None


class SliceDetail(SliceView):
    """A slice with the messages it summarises (read with a ``$slice`` projection, not the whole unit)."""

    messages: list[Message]


class DayCount(BaseModel):
    """Slices created on one UTC day."""

    model_config = ConfigDict(frozen=True)

    day: date
    slices: int


class UnitSize(BaseModel):
    """A unit's stored size and its share of MongoDB's 16 MiB document limit (0.5 = half full)."""

    model_config = ConfigDict(frozen=True)

    unit_id: str
    core_id: str
    size_bytes: int
    share_of_limit: float
    message_count: int

    @classmethod
    def of(cls, unit_id: Any, core_id: Any, size_bytes: int, message_count: int) -> UnitSize:
        return cls(
            unit_id=str(unit_id),
            core_id=str(core_id),
            size_bytes=size_bytes,
            share_of_limit=size_bytes / MAX_DOCUMENT_BYTES,
            message_count=message_count,
        )


class MemoryStats(BaseModel):
    """Totals for one core (or every core), slices per day for the recent days, and the largest units."""

    model_config = ConfigDict(frozen=True)

    core_id: str | None
    units: int
    slices: int
    messages: int
    slices_per_day: list[DayCount]
    largest_units: list[UnitSize]
    generated_at: UtcDatetime


class UnitView(BaseModel):
    """A unit without its messages: counts, size, version, and its slices in stored order."""

    model_config = ConfigDict(frozen=True)

    id: str
    core_id: str
    message_count: int
    size_bytes: int | None
    share_of_limit: float | None
    updated_at: UtcDatetime | None
    previous_unit_id: str | None
    version: int | None
    slices: list[SliceView]


class CoreView(BaseModel):
    """A core without its window's messages: the window's size, its current unit (the memory session's, which
    may not exist yet), the last roll, how long it has been idle and who holds its rolling lease."""

    model_config = ConfigDict(frozen=True)

    id: str
    session_unit_id: str | None
    session_continues: str | None
    window_messages: int
    window_bytes: int | None
    """The BSON bytes of the window's messages (None: not counted, a core no 0.4 ``record`` wrote)."""
    window_start: int
    last_interaction_at: UtcDatetime | None
    """The last turn recorded: the core has been idle since."""
    idle_rolled: bool
    lease_owner: str | None
    lease_beat: int
    last_roll_at: UtcDatetime | None
    """When the unit the last roll appended to was last written (a roll's append is its last write)."""
    unit_messages: int | None
    """The current unit's messages and slices (None: the session's unit does not exist yet)."""
    unit_slices: int | None


class CorePage(BaseModel):
    """One page of :meth:`SliceQueries.cores`; pass ``next_cursor`` as ``after`` for the next (None: last)."""

    model_config = ConfigDict(frozen=True)

    items: list[CoreView]
    next_cursor: str | None


class UnitCounts(BaseModel):
    """A unit's message and slice counts, as its ``unit_fingerprint`` index entry holds them."""

    model_config = ConfigDict(frozen=True)

    unit_id: str
    message_count: int
    slice_count: int


def _int_or_none(value: Any) -> int | None:
    if type(value) is int:  # the common case, decided without the subclass checks
        return value
    return value if isinstance(value, int) and not isinstance(value, bool) else None


__all__ = [
    "CorePage",
    "CoreView",
    "DayCount",
    "MemoryStats",
    "SliceDetail",
    "SlicePage",
    "SliceView",
    "UnitCounts",
    "UnitSize",
    "UnitView",
]
