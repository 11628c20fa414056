"""A core's newest slices, read at a cost that does not grow with its history on any server.

:meth:`SliceQueries.find` finds where a core's slices start with an index-ordered ``find_one`` and selects
units with an ``$elemMatch`` on ``slices.created_at``; MongoDB serves both from the ``core_slice_created``
index, stopping at the limit. A server that plans otherwise (SecantusDB, the test server: it does not stop an
index scan at a limit, and scans the collection for any ``$elemMatch``; see ``tests/emulator_gaps.py``) reads
every unit of the core for each. The newest page, the one an operator opens, is therefore read here without
either: where the newest slices are comes from one unit read by ``_id`` (the unit the core's last roll wrote
to: its ``updated_at`` is its last slice's time), and units are selected by a range on ``slices.created_at``
alone, open towards the newest slice (``{core_id, "slices.created_at": {$gte: since}}``: the units holding a
slice of the window, and any newer), which every server serves from the same index with tight bounds. The
window starts at :data:`FIRST_WIDTH` and widens :data:`GROWTH` times until the page is full; the last of at
most :data:`TRIES` reads takes the rest of the history (then the core has less than a page left).

The slices, their order (time, position in the core, start in the unit, ids) and their cursor are
:meth:`find`'s, so the next page is :meth:`find`'s next page.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from partner_repo.admin._filters import POSITION, START, SliceFilter, _number_or_none
from partner_repo.clock import to_utc_ms
from partner_repo.mongo import driver

FIRST_WIDTH = timedelta(hours=6)
GROWTH = 8
TRIES = 4


async def newest_documents(
    units: Any, query: SliceFilter, since_unit: str, wanted: int, max_time_ms: int
) -> list[dict[str, Any]] | None:
    """Up to ``wanted`` of the core's newest unwound slices in walk order (fewer: the core has no more), or
    None when ``since_unit`` cannot tell where they are (it is gone, is another core's, or has no time)."""
    unit = await units.find_one({"_id": since_unit}, {"updated_at": 1, "core_id": 1}, max_time_ms=max_time_ms)
    newest = (unit or {}).get("updated_at")
    if not isinstance(newest, datetime) or (unit or {}).get("core_id") != query.core_id:
        return None
    width = FIRST_WIDTH
    for attempt in range(TRIES):
        last = attempt == TRIES - 1  # the rest of the history at once: what is left is fewer than a page
        since = None if last else to_utc_ms(newest) - width
        window: dict[str, Any] = {"$type": "date"} if since is None else {"$type": "date", "$gte": since}
        pipeline: list[dict[str, Any]] = [
            {"$match": units_of(query.core_id, since)},
            {"$project": {"core_id": 1, "slices": 1}},
            {"$unwind": "$slices"},
            {
                "$addFields": {
                    POSITION: _number_or_none("first_position"),
                    START: _number_or_none("start_index"),
                }
            },
            {"$match": {"slices.created_at": window}},
            query.sort(),
            {"$limit": wanted},
        ]
        documents = await driver.aggregate_list(units, pipeline, wanted, maxTimeMS=max_time_ms)
        if len(documents) >= wanted or last:
            return documents
        width *= GROWTH
    return None  # not reached


def units_of(core_id: str | None, since: datetime | None) -> dict[str, Any]:
    """The core's units holding a slice created at or after ``since`` (every unit of it: None). A bare range
    on the dotted path, no ``$type`` beside it: every server bounds the index scan by it (a ``$type`` in the
    same condition makes SecantusDB read the core's every unit); the exact test follows the ``$unwind``."""
    return (
        {"core_id": core_id} if since is None else {"core_id": core_id, "slices.created_at": {"$gte": since}}
    )


__all__ = ["FIRST_WIDTH", "GROWTH", "TRIES", "newest_documents", "units_of"]
