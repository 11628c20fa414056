"""Move the unique slice-id index from ``slices.id`` to ``slice_ids`` (which the previous migration filled).

The new index is ``slice_ids_unique`` on ``slice_ids``, unique, with the partial filter ``{"slice_ids":
{"$type": "string"}}``: a unit is indexed when it holds at least one id; a unit without slices has an empty
array, which would otherwise index one ``undefined`` key that every such unit shares. Its keys are ids only,
so a slice without an id (written by another tool) never gives a null key.

Frozen on purpose: both definitions are copies, not imports of ``partner_repo.mongo._indexes``.

A migration of its own, apart from the writes of the previous one: index builds ignore the migration's session
(MongoDB refuses ``createIndexes`` on an existing collection and every ``dropIndexes`` inside a transaction),
and a build on a collection that the same open transaction had written to would wait for that transaction.
Both steps are idempotent. A slice id held by two units makes the build fail; the error says to run
``partner-repo check`` and ``repair`` first, and the old index is already gone (nothing is lost: the data
stays as it is, and rerunning the migration builds the new index).

Backward drops ``slice_ids_unique`` and recreates ``slice_id_unique`` as 0.1.0 had it. On a collection
sharded before ``migrate`` neither unique index can exist (``partner_repo.mongo._topology``): the drop still
runs, the build is skipped, and ``20261204090000_slice_id_claims`` keeps slice ids unique instead.
"""

# No `from __future__ import annotations`: Beanie loads this file outside sys.modules, where pydantic could
# not resolve string annotations.
import logging
from typing import Any

from beanie import Document, free_fall_migration
from pymongo import ASCENDING, IndexModel
from pymongo.errors import OperationFailure

from partner_repo.mongo import driver, topology_of

UNITS = "memory_units"

NEW_INDEX = IndexModel(
    [("slice_ids", ASCENDING)],
    name="slice_ids_unique",
    unique=True,
    partialFilterExpression={"slice_ids": {"$type": "string"}},
)
OLD_INDEX = IndexModel(
    [("slices.id", ASCENDING)],
    name="slice_id_unique",
    unique=True,
    partialFilterExpression={"slices.id": {"$exists": True}},
)
INDEX_NOT_FOUND = 27
NAMESPACE_NOT_FOUND = 26
DUPLICATE_KEY = 11000

log = logging.getLogger("partner_repo.migrations.slice_ids_index")


class UnitCollection(Document):
    """Gives the migration its database (through the collection binding); no fields are read."""

    class Settings:
        name = UNITS


class SharedSliceIds(RuntimeError):
    """The unique index cannot be built: some slice id is held by two units."""


async def swap_indexes(drop: IndexModel, create: IndexModel) -> None:
    """Drop ``drop`` (if present), then create ``create`` (one index, its options kept)."""
    units = driver.document_collection(UnitCollection)
    try:
        await units.drop_index(drop.document["name"])
    except OperationFailure as exc:
        if exc.code not in (INDEX_NOT_FOUND, NAMESPACE_NOT_FOUND) and "not found" not in str(exc).lower():
            raise
    refusal = (await topology_of(units.database)).refusal(UNITS, create.document)
    if refusal is not None:
        log.info("slice_ids_index: %s dropped; not building %s: %s", drop.document["name"], UNITS, refusal)
        return
    options = dict(create.document)
    keys = list(options.pop("key").items())
    try:
        await units.create_index(keys, **options)
    except OperationFailure as exc:
        if exc.code == DUPLICATE_KEY:
            raise SharedSliceIds(
                f"cannot build {create.document['name']}: a slice id is held by two units ({exc}); run "
                "`partner-repo check` and `partner-repo repair`, then migrate again"
            ) from None
        raise
    log.info("slice_ids_index: %s dropped, %s created", drop.document["name"], create.document["name"])


class Forward:
    @free_fall_migration(document_models=[UnitCollection])
    async def move_the_unique_index(self, session: Any) -> None:
        await swap_indexes(OLD_INDEX, NEW_INDEX)


class Backward:
    @free_fall_migration(document_models=[UnitCollection])
    async def restore_the_unique_index(self, session: Any) -> None:
        await swap_indexes(NEW_INDEX, OLD_INDEX)
