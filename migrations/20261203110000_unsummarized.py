"""Summaries that recover (0.4.0): the ``unsummarized`` index, and the mark on the placeholder slices of 0.3.

0.4.0 stores a slice whose every summarizer attempt failed with Partner's placeholder ``"no summary, due to
exception"`` *and* ``unsummarized: true``; ``RollingService.resummarize`` (``partner-repo resummarize``)
finds such slices through the index and replaces their placeholder. Forward:

1. creates ``memory_units.unsummarized`` on ``(slices.unsummarized, core_id)``, partial on
   ``{"slices.unsummarized": true}``: only units holding a marked slice are in it, so it stays tiny while
   serving the search of every core and of one;
2. marks the slices stored before 0.4.0 with the placeholder (they carry no mark), so they can be summarized
   again too: one ``update_many`` per pass, matching a slice with ``$elemMatch`` (the placeholder, no mark)
   and setting the mark through the positional ``$`` (one slice per unit and pass, so it makes as many passes
   as the unit with the most slices to mark has slices, counted first, and stops early at a pass that matches
   nothing). Each write bumps ``version`` and adds the mark's exact bytes to ``size_bytes``; it is guarded by
   the missing mark, so it runs next to live services and a rerun continues.

Backward drops the index and removes the mark from every slice that still holds the placeholder (an older
version ignores the field, and Forward marks them all again by their text). Frozen on purpose: the names,
the text and the index are copies, not imports of ``partner_repo``.
"""

# No `from __future__ import annotations`: Beanie loads this file outside sys.modules, where pydantic could
# not resolve string annotations.
import logging
from typing import Any

import bson
from beanie import Document, free_fall_migration
from pymongo import ASCENDING, IndexModel
from pymongo.errors import OperationFailure

from partner_repo.mongo import driver

UNITS = "memory_units"
PLACEHOLDER = "no summary, due to exception"
INDEX = IndexModel(
    [("slices.unsummarized", ASCENDING), ("core_id", ASCENDING)],
    name="unsummarized",
    partialFilterExpression={"slices.unsummarized": True},
)
MARK_BYTES = len(bson.encode({"unsummarized": True})) - len(bson.encode({}))
"""What the mark adds to a stored slice (type, name, value): ``size_bytes`` stays exact."""

INDEX_NOT_FOUND = 27
NAMESPACE_NOT_FOUND = 26

log = logging.getLogger("partner_repo.migrations.unsummarized")


class UnitCollection(Document):
    """Gives the migration its database (through the collection binding); no fields are read."""

    class Settings:
        name = UNITS


async def create_index() -> None:
    options = dict(INDEX.document)
    keys = list(options.pop("key").items())
    await driver.document_collection(UnitCollection).create_index(keys, **options)
    log.info("unsummarized: index %s created", INDEX.document["name"])


async def drop_index() -> None:
    try:
        await driver.document_collection(UnitCollection).drop_index(INDEX.document["name"])
    except OperationFailure as exc:
        if exc.code not in (INDEX_NOT_FOUND, NAMESPACE_NOT_FOUND) and "not found" not in str(exc).lower():
            raise
    log.info("unsummarized backward: index %s dropped", INDEX.document["name"])


async def mark_all(*, marked: bool) -> int:
    """Mark (``marked``) or unmark every slice holding the placeholder; returns how many slices changed."""
    units = driver.document_collection(UnitCollection)
    before: dict[str, Any] = (
        {"$exists": False} if marked else True  # guarded: a rerun, or a roll marking meanwhile, is left alone
    )
    change: dict[str, Any] = (
        {"$set": {"slices.$.unsummarized": True}} if marked else {"$unset": {"slices.$.unsummarized": ""}}
    )
    grown = MARK_BYTES if marked else -MARK_BYTES
    pending = {"summary": PLACEHOLDER, "unsummarized": before}
    most = await driver.aggregate_list(
        units,
        [
            {"$match": {"core_id": {"$exists": True}, "slices": {"$elemMatch": pending}}},
            {"$group": {"_id": None, "slices": {"$max": {"$size": {"$ifNull": ["$slices", []]}}}}},
        ],
    )
    passes = int(most[0]["slices"] or 0) if most else 0  # a unit needs at most one pass per slice it holds
    changed = 0
    for _ in range(passes):
        changed_in_pass = 0
        for sized, inc in (
            ({"$type": "number"}, {"version": 1, "size_bytes": grown}),
            ({"$exists": False}, {"version": 1}),  # a unit without derived fields: completed when read
        ):
            result = await units.update_many(
                {"core_id": {"$exists": True}, "size_bytes": sized, "slices": {"$elemMatch": pending}},
                {**change, "$inc": inc},
            )
            changed_in_pass += int(result.modified_count)
        if not changed_in_pass:
            break
        changed += changed_in_pass
    log.info("unsummarized: %s %d placeholder slice(s)", "marked" if marked else "unmarked", changed)
    return changed


class Forward:
    @free_fall_migration(document_models=[UnitCollection])
    async def mark_placeholder_summaries(self, session: Any) -> None:
        await create_index()
        await mark_all(marked=True)


class Backward:
    @free_fall_migration(document_models=[UnitCollection])
    async def unmark_placeholder_summaries(self, session: Any) -> None:
        await drop_index()
        await mark_all(marked=False)
