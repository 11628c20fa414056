"""Recall vectors with an identity: the ``core_vectors`` index forward; Backward restores the first shape.

Recall's vector channel finds slices on its own (issue 38): each slice's vectors carry the tag of the
embedder that made them (``vtag``), its vector is an int8 BSON vector (``vector``), its messages' vectors are
stored with it (``mvectors``), and a sign code (``vcode``: the slice's number and 256 bits) is read for every
slice of a core from ``core_vectors`` on ``(core_id, vtag, vcode)`` alone. The core's document records the
embedder (``embedder``: name, dimensions, tag).

Forward creates ``core_vectors``; no data changes. A vector 0.5's first shape stored (a list of floats of an
embedder it did not name) is left as it is: recall does not search untagged vectors, and ``partner-repo recall
reindex --embedder MODULE:NAME`` embeds those slices again under a name.

Backward drops ``core_vectors`` and writes the earlier shape back: each tagged slice's ``vector`` as a list of
floats (the int8 coordinates: a cosine similarity does not see the scale), ``vtag``, ``vcode`` and
``mvectors`` removed, and the cores' ``embedder`` removed. Each step is idempotent (a rerun finds nothing left
to change).

Frozen on purpose: the shapes and the index definition are copies, not imports of ``partner_repo``.
"""

# No `from __future__ import annotations`: Beanie loads this file outside sys.modules, where pydantic could
# not resolve string annotations.
import logging
from typing import Any

from beanie import Document, free_fall_migration
from bson.binary import Binary
from pymongo import ASCENDING, IndexModel, UpdateOne
from pymongo.errors import OperationFailure

from partner_repo.mongo import driver

INDEX = "recall_index"
CORE_VECTORS = IndexModel(
    [("core_id", ASCENDING), ("vtag", ASCENDING), ("vcode", ASCENDING)], name="core_vectors"
)
BATCH = 200
INDEX_NOT_FOUND = 27
NAMESPACE_NOT_FOUND = 26

log = logging.getLogger("partner_repo.migrations.recall_vectors")


class UnitCollection(Document):
    """Gives the migration its database (through the collection binding); no fields are read."""

    class Settings:
        name = "memory_units"


def _index() -> Any:
    return driver.document_collection(UnitCollection).database[INDEX]


async def create_index() -> None:
    options = dict(CORE_VECTORS.document)
    keys = list(options.pop("key").items())
    await _index().create_index(keys, **options)
    log.info("recall_vectors: %s.%s created", INDEX, CORE_VECTORS.document["name"])


async def drop_index() -> None:
    try:
        await _index().drop_index(CORE_VECTORS.document["name"])
    except OperationFailure as exc:
        if exc.code not in (INDEX_NOT_FOUND, NAMESPACE_NOT_FOUND) and "not found" not in str(exc).lower():
            raise
    log.info("recall_vectors backward: dropped %s.%s", INDEX, CORE_VECTORS.document["name"])


def _floats(value: Any) -> list[float] | None:
    if isinstance(value, Binary) and value.subtype == 9:
        try:
            return [float(x) for x in value.as_vector().data]
        except (ValueError, TypeError):
            return None
    return None


async def restore_first_shape() -> int:
    """Every tagged slice back in 0.5's first shape, in ``_id`` batches; how many were changed."""
    index = _index()
    changed = 0
    after: Any = None
    while True:
        selected: dict[str, Any] = {"vtag": {"$exists": True}}
        if after is not None:
            selected["_id"] = {"$gt": after}
        found = index.find(selected, {"vector": 1, "core_id": 1}).sort("_id", 1).limit(BATCH)
        rows = await found.to_list(None)
        if not rows:
            break
        writes = []
        for row in rows:
            update: dict[str, Any] = {"$unset": {"vtag": "", "vcode": "", "mvectors": ""}}
            floats = _floats(row.get("vector"))
            if floats is not None:
                update["$set"] = {"vector": floats}
            writes.append(UpdateOne({"_id": row["_id"], "core_id": row.get("core_id")}, update))
        await driver.bulk_write(index, writes, ordered=False)
        changed += len(rows)
        after = rows[-1]["_id"]
    await index.update_many({"embedder": {"$exists": True}}, {"$unset": {"embedder": ""}})
    log.info("recall_vectors backward: %d slice(s) back in the first shape", changed)
    return changed


class Forward:
    @free_fall_migration(document_models=[UnitCollection])
    async def index_the_codes(self, session: Any) -> None:
        await create_index()


class Backward:
    @free_fall_migration(document_models=[UnitCollection])
    async def back_to_untagged_vectors(self, session: Any) -> None:
        await drop_index()
        await restore_first_shape()
