"""A core's memory as a picture: each unit a row, each slice a block as wide as the messages it covers.

Pure geometry over one page of slices (the newest first page, or an older one by its cursor) and the units'
message counts. Slices tile their unit (``docs/rolling.md``): each starts where the one before it in the unit
ended. Where two neighbours on the page do not meet, the picture says so with a block of its own: a *gap*
(messages ``[end, next start)`` are in no slice) or an *overlap* (messages ``[next start, end)`` are in two).
On the newest page every unit's last slice is on the page (a unit's slices are stored in time order, and the
page holds everything newer than its oldest slice), so messages a unit holds after its last slice are a gap
too; on an older page the row ends at its newest slice. Every row shares one scale, so a block's width is
the number of messages it covers, comparable across units.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from partner_repo.admin import SliceView

WIDTH = 960.0
"""The drawing's width in user units (the SVG scales to the page)."""
MIN_BLOCK = 3.0
"""The narrowest block drawn, so an empty or one-message slice still shows and can be clicked."""
ROW_HEIGHT = 34.0
ROW_GAP = 26.0
CHAR_WIDTH = 6.6
"""About how wide a character of a block's label is (12 px sans-serif), to cut a label to its block."""

Kind = Literal["slice", "unsummarized", "gap", "overlap"]


@dataclass(frozen=True)
class Block:
    """One block of a row: a slice (``slice_id`` set), or a gap or an overlap between neighbours."""

    kind: Kind
    start: int
    end: int
    x: float
    width: float
    label: str
    title: str
    slice_id: str | None = None

    @property
    def messages(self) -> int:
        return self.end - self.start


@dataclass(frozen=True)
class Row:
    """One unit: its blocks left to right, and where the row sits in the drawing."""

    unit_id: str
    message_count: int | None
    first: int
    last: int
    y: float
    blocks: list[Block] = field(default_factory=list)

    @property
    def label(self) -> str:
        counted = "" if self.message_count is None else f", {self.message_count} messages in the unit"
        return f"unit {self.unit_id}: messages {self.first} to {self.last}{counted}"


@dataclass(frozen=True)
class Timeline:
    """The rows of one page of slices, oldest unit first; ``problems`` lists every gap and overlap as text."""

    rows: list[Row]
    height: float
    scale: float
    """User units per message."""

    @property
    def problems(self) -> list[Block]:
        return [block for row in self.rows for block in row.blocks if block.kind in ("gap", "overlap")]


def timeline(
    slices: Sequence[SliceView],
    unit_messages: Mapping[str, int],
    topics: Mapping[str, str],
    *,
    newest_page: bool,
) -> Timeline:
    """The picture of ``slices`` (any order), with each unit's message count (``unit_messages``, by id: a
    unit absent there is drawn to its newest slice) and each slice's topic (``topics``, by slice id; a slice
    not indexed is labelled by the start of its summary)."""
    by_unit: dict[str, list[SliceView]] = {}
    for piece in sorted(slices, key=_time_order):
        by_unit.setdefault(piece.unit_id, []).append(piece)
    spans: list[tuple[str, list[SliceView], int, int]] = []
    for unit_id, pieces in by_unit.items():
        pieces.sort(key=lambda piece: (piece.start_index or 0, piece.end_index or 0))
        first = min(piece.start_index or 0 for piece in pieces)
        last = max(piece.end_index or 0 for piece in pieces)
        if newest_page and unit_id in unit_messages:
            last = max(last, unit_messages[unit_id])
        spans.append((unit_id, pieces, first, last))
    widest = max((last - first for _, _, first, last in spans), default=1)
    scale = WIDTH / max(widest, 1)
    rows = []
    for number, (unit_id, pieces, first, last) in enumerate(spans):
        y = number * (ROW_HEIGHT + ROW_GAP) + ROW_GAP
        row = Row(unit_id, unit_messages.get(unit_id), first, last, y)
        row.blocks.extend(
            _blocks(pieces, first, last, scale, topics, tail=newest_page and unit_id in unit_messages)
        )
        rows.append(row)
    return Timeline(rows=rows, height=len(rows) * (ROW_HEIGHT + ROW_GAP) + ROW_GAP, scale=scale)


def _time_order(piece: SliceView) -> tuple[float, int]:
    return (piece.created_at.timestamp() if piece.created_at else 0.0, piece.start_index or 0)


def _blocks(
    pieces: list[SliceView], first: int, last: int, scale: float, topics: Mapping[str, str], *, tail: bool
) -> list[Block]:
    blocks: list[Block] = []
    reached: int | None = None
    for piece in pieces:
        start, end = piece.start_index or 0, max(piece.end_index or 0, piece.start_index or 0)
        if reached is not None and start > reached:
            blocks.append(_between("gap", reached, start, first, scale))
        elif reached is not None and start < reached:
            blocks.append(_between("overlap", start, min(reached, end), first, scale))
        topic = topics.get(piece.id)
        label = topic if topic else _summary_start(piece.summary)
        kind: Kind = "unsummarized" if piece.unsummarized else "slice"
        mark = " (unsummarized)" if piece.unsummarized else ""
        blocks.append(
            Block(
                kind=kind,
                start=start,
                end=end,
                x=(start - first) * scale,
                width=max((end - start) * scale, MIN_BLOCK),
                label=_fit(label + mark, (end - start) * scale),
                title=f"slice {piece.id}{mark}: messages {start} to {end} ({end - start}), {label}",
                slice_id=piece.id,
            )
        )
        reached = end if reached is None else max(reached, end)
    if tail and reached is not None and last > reached:
        blocks.append(_between("gap", reached, last, first, scale))
    return sorted(blocks, key=lambda block: block.kind in ("gap", "overlap"))  # drawn last: on top


def _between(kind: Kind, start: int, end: int, first: int, scale: float) -> Block:
    count = end - start
    what = "in no slice" if kind == "gap" else "in two slices"
    text = f"{kind}: {count} message{'s' if count != 1 else ''} {what} ({start} to {end})"
    return Block(
        kind=kind,
        start=start,
        end=end,
        x=(start - first) * scale,
        width=max(count * scale, MIN_BLOCK),
        label=_fit(kind, count * scale),
        title=text,
    )


def _summary_start(summary: str) -> str:
    words = " ".join(summary.split())
    return words[:40] + ("..." if len(words) > 40 else "")


def _fit(label: str, width: float) -> str:
    """``label`` cut to what fits ``width`` (empty when not even three characters do)."""
    room = int((width - 8) / CHAR_WIDTH)
    if room < 3:
        return ""
    return label if len(label) <= room else label[: room - 1] + "…"


__all__ = ["Block", "Row", "Timeline", "timeline"]
