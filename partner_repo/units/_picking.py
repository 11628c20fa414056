"""Reading chosen messages of several units in one round trip, by position.

Recall activates a few slices of a few units and needs only some messages of each (the ones that matter,
within a budget). One aggregation reads exactly those: for each unit, a ``$map`` over the wanted positions
picks each message with ``$arrayElemAt``, so no other message of the unit crosses the wire. A unit that is
gone, or is an erasure tombstone, yields nothing: what was erased never comes back through recall.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import ValidationError

from partner_repo.models import Message
from partner_repo.mongo import ERASED_AT, UNITS, driver

MESSAGES = "conversation_messages"


async def messages_at(
    database: Any, wanted: Mapping[str, Sequence[int]], *, core_id: str | None = None
) -> dict[str, dict[int, Message]]:
    """``{unit id: {position: message}}`` for the ``wanted`` positions of each unit, in one aggregation.

    Positions past a unit's end, units that are gone or erased, and messages that cannot be read are left
    out (the caller treats a missing message as not there). With ``core_id``, only that core's units are
    read: the command selects the one core, and no other core's messages can come back."""
    wanted = {unit_id: sorted(set(positions)) for unit_id, positions in wanted.items() if positions}
    if not wanted:
        return {}
    branches = [
        {
            "case": {"$eq": ["$_id", unit_id]},
            "then": {
                "$map": {"input": positions, "as": "p", "in": {"$arrayElemAt": [f"${MESSAGES}", "$$p"]}}
            },
        }
        for unit_id, positions in wanted.items()
    ]
    pipeline: list[dict[str, Any]] = [
        # the units by _id (one shard each; the core's only, when given), then no tombstone
        {"$match": {"_id": {"$in": list(wanted)}, **({"core_id": core_id} if core_id is not None else {})}},
        {"$match": {ERASED_AT: {"$exists": False}}},
        {
            "$project": {
                "picked": {"$switch": {"branches": branches, "default": []}},
                "count": "$message_count",
            }
        },
    ]
    found: dict[str, dict[int, Message]] = {}
    for row in await driver.aggregate_list(database[UNITS], pipeline):
        positions = wanted.get(row["_id"], [])
        count = row.get("count")
        picked: dict[int, Message] = {}
        for position, stored in zip(positions, row.get("picked") or [], strict=False):
            if stored is None or (isinstance(count, int) and position >= count):
                continue
            try:
                picked[position] = Message.model_validate(stored)
            except ValidationError:
                continue
        found[row["_id"]] = picked
    return found


__all__ = ["messages_at"]
