"""The filters of a slice query, validated once, and the aggregation stages they become.

``find`` and ``count`` share them; the keyset bound of a page (``after``) and its time window only narrow
the index range on ``slices.created_at``, so the exact keyset test follows the ``$unwind``. The walk order is
creation time, then position in the core, then position in the unit, then the ids (the last tie-breakers).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from partner_repo.admin._cursor import SliceKey, query_fingerprint
from partner_repo.admin._windows import ALL_TIME, Window
from partner_repo.errors import InvalidInput
from partner_repo.validation import optional_datetime, require_id

Order = Literal["asc", "desc"]
MAX_TEXT_LENGTH = 1_000
POSITION = "position"
"""The walk's second key, added to each unwound slice: its first message's position in the core
(``first_position``), so slices that share a creation time (a roll's time is raised to its unit's last
slice's: a lagging clock makes ties) are in the order they were stored, never in the order of their random
ids; :data:`NONE` for a slice not from a roll."""
START = "start"
"""The walk's third key: the slice's ``start_index`` in its unit (its order in a unit without positions)."""
NONE = -1

_DATE = "date"


@dataclass(frozen=True)
class SliceFilter:
    """The validated filters of one query; the same filters serve ``find`` and ``count``."""

    core_id: str | None
    unit_id: str | None
    created_from: datetime | None
    created_to: datetime | None
    text: str | None
    order: Order

    @classmethod
    def of(
        cls,
        core_id: object,
        unit_id: object,
        created_from: object,
        created_to: object,
        text: object,
        order: object = "desc",
    ) -> SliceFilter:
        if order not in ("asc", "desc"):
            raise InvalidInput(f"order must be 'asc' or 'desc', got {order!r}")
        start = optional_datetime(created_from, "created_from")
        end = optional_datetime(created_to, "created_to")
        if start is not None and end is not None and start > end:
            raise InvalidInput(f"created_from ({start.isoformat()}) is after created_to ({end.isoformat()})")
        if text is not None and not isinstance(text, str):
            raise InvalidInput(f"text must be a string, got {type(text).__name__}")
        if text is not None and len(text) > MAX_TEXT_LENGTH:
            raise InvalidInput(f"text must be at most {MAX_TEXT_LENGTH} characters")
        return cls(
            core_id=None if core_id is None else require_id(core_id, "core_id"),
            unit_id=None if unit_id is None else require_id(unit_id, "unit_id"),
            created_from=start,
            created_to=end,
            text=text or None,
            order="asc" if order == "asc" else "desc",
        )

    @property
    def fingerprint(self) -> str:
        return query_fingerprint(
            {
                "core_id": self.core_id,
                "unit_id": self.unit_id,
                "created_from": self.created_from,
                "created_to": self.created_to,
                "text": self.text,
                "order": self.order,
            }
        )

    def pipeline(self, after: SliceKey | None = None, window: Window = ALL_TIME) -> list[dict[str, Any]]:
        """``$match`` units (index-served), drop the messages, ``$unwind``, ``$match`` the slices exactly."""
        element = self.element(after, window)
        slices: dict[str, Any] = {f"slices.{name}": condition for name, condition in element.items()}
        if after is not None:
            slices["$or"] = _after(after, "$lt" if self.order == "desc" else "$gt")
        return [
            {"$match": self.unit_match(element)},
            {"$project": {"core_id": 1, "slices": 1}},
            {"$unwind": "$slices"},
            {
                "$addFields": {
                    POSITION: _number_or_none("first_position"),
                    START: _number_or_none("start_index"),
                }
            },
            {"$match": slices},
        ]

    def element(self, after: SliceKey | None = None, window: Window = ALL_TIME) -> dict[str, Any]:
        """What a matching slice satisfies. ``after`` (a keyset position) and ``window`` narrow its time
        range: bounds of the index range (the exact keyset test follows the unwind)."""
        descending = self.order == "desc"
        resume = None if after is None or descending else after.created_at
        lower = _latest(self.created_from, window.start, resume)
        upper = _earliest(self.created_to, window.end)
        when: dict[str, Any] = {"$type": _DATE}
        if lower is not None:
            when["$gte"] = lower
        if upper is not None:
            when["$lt"] = upper
        if after is not None and descending:
            when["$lte"] = after.created_at
        element: dict[str, Any] = {"created_at": when}
        if self.text is not None:
            element["summary"] = literal_pattern(self.text)
        return element

    def unit_match(self, element: dict[str, Any]) -> dict[str, Any]:
        """The units in scope holding a slice that satisfies ``element``."""
        return {**self.scope(), "slices": {"$elemMatch": element}}

    def scope(self) -> dict[str, Any]:
        """The units the core and unit filters allow, whatever their slices."""
        units: dict[str, Any] = {}
        if self.core_id is not None:
            units["core_id"] = self.core_id
        if self.unit_id is not None:
            units["_id"] = self.unit_id
        return units

    def sort(self) -> dict[str, Any]:
        direction = -1 if self.order == "desc" else 1
        keys = ("slices.created_at", POSITION, START, "slices.id", "_id")
        return {"$sort": dict.fromkeys(keys, direction)}


def literal_pattern(text: str) -> dict[str, str]:
    """A case-insensitive substring match of ``text`` taken literally (escaped; NUL spelled as ``\\x00``
    because BSON cannot carry it in a pattern)."""
    return {"$regex": re.escape(text).replace("\x00", "\\x00"), "$options": "i"}


def _latest(*moments: datetime | None) -> datetime | None:
    return max((m for m in moments if m is not None), default=None)


def _earliest(*moments: datetime | None) -> datetime | None:
    return min((m for m in moments if m is not None), default=None)


def _number_or_none(field: str) -> dict[str, Any]:
    """A slice's ``field`` where it is a number, else :data:`NONE` (a slice not from a roll has no position;
    another tool's value of another type must not break the walk's comparisons)."""
    return {"$cond": [{"$isNumber": f"$slices.{field}"}, f"$slices.{field}", NONE]}


def _after(key: SliceKey, beyond: str) -> list[dict[str, Any]]:
    """Strictly after ``key`` in walk order: by time, then position in the core, then position in the unit,
    then slice id, then unit id."""
    same_time = {"slices.created_at": key.created_at}
    same_place = {**same_time, POSITION: key.position, START: key.start}
    return [
        {"slices.created_at": {beyond: key.created_at}},
        {**same_time, POSITION: {beyond: key.position}},
        {**same_time, POSITION: key.position, START: {beyond: key.start}},
        {**same_place, "slices.id": {beyond: key.slice_id}},
        {**same_place, "slices.id": key.slice_id, "_id": {beyond: key.unit_id}},
    ]


__all__ = ["MAX_TEXT_LENGTH", "Order", "SliceFilter", "literal_pattern"]
