"""Forgetting what listener groups recorded of erased units: :func:`remove_unit_progress`, which leaves a
tombstone per group and unit so no commit saved later brings the progress back."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from partner_repo.clock import utc_now
from partner_repo.listener.state._checkpoints import ERASED_UNIT
from partner_repo.mongo import CHECKPOINTS, ERASED_AT, MongoDatabase, insert_new


async def remove_unit_progress(
    database: MongoDatabase, unit_ids: Collection[Any], *, group: str | None = None
) -> int:
    """Remove what listener groups (every group, or one, when given) recorded of these units (delivered
    slice ids, partial deliveries, fingerprints), leaving a tombstone per group and unit in its place, so
    that no commit saved later brings it back. Returns how many progress documents went.

    Two idempotent commands: a tombstone is inserted for every group and unit that has no document (one
    unordered ``insert``; a key already taken is left as it is), then every progress document left becomes
    a tombstone (one ``update``). A commit racing them either lands on progress the second turns into a
    tombstone, or finds the key a tombstone's, and records nothing."""
    if not unit_ids:
        return 0
    collection = database[CHECKPOINTS]
    ids, at = list(unit_ids), utc_now()
    if group is None:
        groups = [d["group"] async for d in collection.find({"kind": "group"}, {"group": 1})]
    else:
        groups = [group]
    await insert_new(
        collection,
        [
            {"_id": {"group": g, "unit_id": u}, "kind": ERASED_UNIT, "group": g, "unit_id": u, ERASED_AT: at}
            for g in groups
            for u in ids
        ],
    )
    query: dict[str, Any] = {"kind": "unit", "unit_id": {"$in": ids}}
    if group is not None:
        query["group"] = group
    erased = {"$set": {"kind": ERASED_UNIT, ERASED_AT: at}, "$unset": dict.fromkeys(_PROGRESS_FIELDS, "")}
    result = await collection.update_many(query, erased)
    return int(result.matched_count)


_PROGRESS_FIELDS = ("core_id", "delivered", "partial", "fingerprint")
"""What a unit document holds besides its key: what a tombstone drops."""


__all__ = ["remove_unit_progress"]
