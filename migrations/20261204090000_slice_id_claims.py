"""Replace the unique slice-id index with slice-id claims, so ``memory_units`` can be sharded.

``slice_ids_unique`` (unique, on ``slice_ids``) cannot exist on a collection sharded by ``{_id: "hashed"}``: a
unique index must be prefixed by the shard key, so ``shardCollection`` fails while it exists. Slice ids stay
unique through ``slice_id_claims`` instead (``partner_repo.units._claims``): one document per claimed id,
``{_id: slice id, unit_id, claimed_at}``, written before the unit.

Forward, each step idempotent and safe with services running:

1. the claims' index on ``unit_id`` (an erasure releases the claims of its units);
2. a claim for every slice id every unit holds now, in ``_id`` batches (an id already claimed is left as it
   is; an id two units hold, possible only in data the unique index never saw, is claimed by the first unit
   in ``_id`` order, which is the one ``repair`` lets keep it);
3. ``slice_ids_unique`` (and 0.1's ``slice_id_unique``, if still there) dropped, then ``slice_ids`` built,
   not unique: it finds the unit of a slice id.

Stop services of an older version that append with their own slice ids before running it: they check no
claim. Backward restores the unique index and drops the claims; on a sharded ``memory_units`` it is refused
(the index cannot exist there). Index builds ignore the migration's session, as in the other index
migrations. Frozen on purpose: the definitions are copies.
"""

# No `from __future__ import annotations`: Beanie loads this file outside sys.modules, where pydantic could
# not resolve string annotations.
import logging
from typing import Any

from beanie import Document, free_fall_migration
from pymongo import ASCENDING, IndexModel
from pymongo.errors import BulkWriteError, OperationFailure

from partner_repo.clock import utc_now
from partner_repo.mongo import driver, topology_of

UNITS = "memory_units"
CLAIMS = "slice_id_claims"
BATCH = 500

CLAIM_INDEX = IndexModel([("unit_id", ASCENDING)], name="unit")
LOOKUP_INDEX = IndexModel([("slice_ids", ASCENDING)], name="slice_ids")
UNIQUE_INDEX = IndexModel(
    [("slice_ids", ASCENDING)],
    name="slice_ids_unique",
    unique=True,
    partialFilterExpression={"slice_ids": {"$type": "string"}},
)
UNIQUE_INDEX_OF_0_1 = "slice_id_unique"
INDEX_NOT_FOUND = 27
NAMESPACE_NOT_FOUND = 26
DUPLICATE_KEY = 11000

log = logging.getLogger("partner_repo.migrations.slice_id_claims")


class UnitCollection(Document):
    """Gives the migration its database (through the collection binding); no fields are read."""

    class Settings:
        name = UNITS


def database() -> Any:
    return driver.document_collection(UnitCollection).database


async def create(collection: Any, index: IndexModel) -> None:
    options = dict(index.document)
    keys = list(options.pop("key").items())
    await collection.create_index(keys, **options)


async def drop(collection: Any, name: str) -> None:
    try:
        await collection.drop_index(name)
    except OperationFailure as exc:
        if exc.code not in (INDEX_NOT_FOUND, NAMESPACE_NOT_FOUND) and "not found" not in str(exc).lower():
            raise


def held_ids(document: dict[str, Any]) -> list[str]:
    """The ids a stored unit holds: its derived array and its slices' own ids (a unit from another tool)."""
    ids = [i for i in document.get("slice_ids") or [] if isinstance(i, str)]
    for piece in document.get("slices") or []:
        found = piece.get("id") if isinstance(piece, dict) else None
        if isinstance(found, str):
            ids.append(found)
    return list(dict.fromkeys(ids))


async def claim_every_held_id() -> int:
    """Step 2: a claim for each id held now; returns how many were new."""
    units, claims = database()[UNITS], database()[CLAIMS]
    added, last = 0, None
    while True:
        ids: dict[str, Any] = {"$type": "string"} if last is None else {"$type": "string", "$gt": last}
        cursor = units.find({"_id": ids, "erased_at": {"$exists": False}}, {"slice_ids": 1, "slices.id": 1})
        batch = [document async for document in cursor.sort("_id", ASCENDING).limit(BATCH)]
        if not batch:
            return added
        last = batch[-1]["_id"]
        stamp = utc_now()
        rows = [{"_id": i, "unit_id": d["_id"], "claimed_at": stamp} for d in batch for i in held_ids(d)]
        added += await insert_new(claims, rows)


async def insert_new(claims: Any, rows: list[dict[str, Any]]) -> int:
    """Insert the claims not present yet (the first claimant of an id in ``rows`` wins); how many."""
    rows = list({row["_id"]: row for row in reversed(rows)}.values())[::-1]
    if not rows:
        return 0
    try:
        result = await claims.insert_many(rows, ordered=False)
        return len(result.inserted_ids)
    except BulkWriteError as exc:
        errors = exc.details.get("writeErrors", [])
        if any(error.get("code") != DUPLICATE_KEY for error in errors):
            raise
        return int(exc.details.get("nInserted", 0))


class Forward:
    @free_fall_migration(document_models=[UnitCollection])
    async def claim_slice_ids_and_drop_the_unique_index(self, session: Any) -> None:
        units = database()[UNITS]
        await create(database()[CLAIMS], CLAIM_INDEX)
        added = await claim_every_held_id()
        await drop(units, UNIQUE_INDEX.document["name"])
        await drop(units, UNIQUE_INDEX_OF_0_1)
        await create(units, LOOKUP_INDEX)
        log.info("slice_id_claims: %d claim(s) added; slice_ids_unique replaced by slice_ids", added)


class Backward:
    @free_fall_migration(document_models=[UnitCollection])
    async def restore_the_unique_index(self, session: Any) -> None:
        topology = await topology_of(database())
        if topology.shard_key(UNITS) is not None:
            raise RuntimeError(
                "memory_units is sharded: the unique slice-id index cannot exist on it, so this migration "
                "cannot be reverted; slice ids stay unique through slice_id_claims"
            )
        units = database()[UNITS]
        await drop(units, LOOKUP_INDEX.document["name"])
        try:
            await create(units, UNIQUE_INDEX)
        except OperationFailure as exc:
            if exc.code == DUPLICATE_KEY:
                raise RuntimeError(
                    f"cannot build slice_ids_unique: a slice id is held by two units ({exc}); run "
                    "`partner-repo check` and `partner-repo repair`, then migrate backward again"
                ) from None
            raise
        await database()[CLAIMS].drop()
